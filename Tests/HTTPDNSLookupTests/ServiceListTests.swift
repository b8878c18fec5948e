// The vendors' service-IP lists: their two formats, read and written, and the rules for
// which address a query goes to and when the list is fetched, without sockets and on a clock we move.

@testable import HTTPDNSCore
@testable import HTTPDNSLookup
import Foundation
import Testing

@Suite struct ServiceListTests {
    let t0 = Timestamp.seconds(1_700_000_000)
    func ip(_ text: String) -> IPAddress { IPAddress(text)! }

    @Test func alibabaAnswerIsReadAsTheAndroidSDKReadsIt() throws {
        let body = Array(
            #"{"service_ip":["203.107.1.1","not-an-ip","2401::1"],"service_ipv6":["2401:b180:2000:20::10"],"service_ip_port":[80],"statistics":{}}"#
                .utf8
        )
        let list = try ServiceListFormat.parseAlibaba(body, now: t0)
        // A v6 literal in the v4 list (and junk) is dropped, not trusted.
        #expect(list.ipv4 == [ip("203.107.1.1")])
        #expect(list.ipv6 == [ip("2401:b180:2000:20::10")])
        #expect(!list.disabled)
        #expect(list.lifetime == .seconds(86400))
        let off = try ServiceListFormat.parseAlibaba(Array(#"{"service_status":"disable"}"#.utf8), now: t0)
        #expect(off.disabled && off.all.isEmpty)
        // Switched off, the scheduler is asked again after 5 minutes (the iOS SDK's rule), not a day.
        #expect(off.lifetime == .seconds(300))
        for bad in [#"{"service_ip":[]}"#, "[]", "<html>", #"{"service_ip":"1.2.3.4"}"#] {
            #expect(throws: AnswerFormatError.self, "\(bad)") {
                try ServiceListFormat.parseAlibaba(Array(bad.utf8), now: t0)
            }
        }
        // What our server writes, the client reads back.
        let written = ServiceListFormat.formatAlibaba(ipv4: [ip("10.0.0.1")], ipv6: [ip("fd00::1")])
        #expect(try ServiceListFormat.parseAlibaba(written, now: t0).all == [ip("10.0.0.1"), ip("fd00::1")])
        // A huge list is cut, not kept whole.
        let many =
            "{\"service_ip\":[" + (0..<1000).map { "\"10.0.\($0 / 256).\($0 % 256)\"" }.joined(separator: ",") + "]}"
        #expect(
            try ServiceListFormat.parseAlibaba(Array(many.utf8), now: t0).ipv4.count == ServiceList.maximumPerFamily
        )
    }

    @Test func tencentTextIsReadAsTheDNSPodSDKsReadIt() throws {
        let list = try ServiceListFormat.parseTencent("log:1|domain:0|ip:119.29.29.98;119.29.29.99|ttl:30\n", now: t0)
        #expect(list.ipv4 == [ip("119.29.29.98"), ip("119.29.29.99")])
        #expect(list.lifetime == .seconds(1800))
        // ttl out of 1…1440 minutes, or missing: 60 minutes.
        #expect(try ServiceListFormat.parseTencent("ip:1.2.3.4|ttl:0", now: t0).lifetime == .seconds(3600))
        #expect(try ServiceListFormat.parseTencent("ip:1.2.3.4|ttl:99999", now: t0).lifetime == .seconds(3600))
        #expect(try ServiceListFormat.parseTencent("ip:1.2.3.4;2001:db8::1", now: t0).ipv6 == [ip("2001:db8::1")])
        for bad in ["", "log:1|domain:1", "ip:x;y|ttl:5"] {
            #expect(throws: AnswerFormatError.self, "\(bad)") { try ServiceListFormat.parseTencent(bad, now: t0) }
        }
        let written = ServiceListFormat.formatTencent([ip("10.0.0.1"), ip("10.0.0.2")], minutes: 5)
        #expect(try ServiceListFormat.parseTencent(written, now: t0).lifetime == .seconds(300))
        #expect(ServiceListFormat.alibabaAccount(path: "/139450/ss") == "139450")
        #expect(ServiceListFormat.alibabaAccount(path: "/139450/d") == nil)
        #expect(ServiceListFormat.alibabaAccount(path: "//ss") == nil)
    }

    func list(_ v4: [String], v6: [String] = [], at time: Timestamp? = nil, lifetime: Duration = .seconds(86400))
        -> ServiceList
    {
        ServiceList(ipv4: v4.map(ip), ipv6: v6.map(ip), fetched: time ?? t0, lifetime: lifetime)
    }

    @Test func queriesGoToTheListInOrderFromTheLastThatAnsweredThenBootstrap() {
        var state = ServiceAddressState(bootstrap: [ip("203.107.1.1")])
        // Cold start: the bootstrap address, and a fetch is due at once.
        #expect(state.addresses == [ip("203.107.1.1")])
        #expect(state.fetchDue(now: t0))
        state.fetchStarted(now: t0)
        #expect(!state.fetchDue(now: t0), "one fetch at a time")
        state.fetched(list(["10.0.0.1", "10.0.0.2", "203.107.1.1"], v6: ["fd00::1"]))
        // The list's order, the bootstrap address not repeated.
        #expect(state.addresses == ["10.0.0.1", "10.0.0.2", "203.107.1.1", "fd00::1"].map(ip))
        // The second answered (the first failed): it goes first from now on, the rest rotated behind it.
        state.answered(from: ip("10.0.0.2"))
        #expect(state.addresses == ["10.0.0.2", "203.107.1.1", "10.0.0.1", "fd00::1"].map(ip))
        #expect(!state.fetchDue(now: t0 + .seconds(3600)))
        // Outlived its lifetime (24 h for Alibaba): fetch again; a clock gone backwards too.
        #expect(state.fetchDue(now: t0 + .seconds(86400)))
        #expect(state.fetchDue(now: Timestamp(nanoseconds: t0.nanoseconds - 10_000_000_000)))
        // A new, different list starts from its first address.
        state.fetchStarted(now: t0 + .seconds(86400))
        state.fetched(list(["10.0.0.3"], at: t0 + .seconds(86400)))
        #expect(state.addresses == [ip("10.0.0.3"), ip("203.107.1.1")])
    }

    @Test func aFailedFetchWaitsFiveMinutesAndAnExhaustedListAtMostThirtySeconds() {
        var state = ServiceAddressState(bootstrap: [ip("203.107.1.1")])
        state.fetchStarted(now: t0)
        state.fetchFailed(now: t0)
        #expect(state.addresses == [ip("203.107.1.1")], "the bootstrap address keeps serving")
        #expect(!state.fetchDue(now: t0 + .seconds(299)))
        #expect(state.fetchDue(now: t0 + .seconds(300)))
        state.fetchStarted(now: t0 + .seconds(300))
        state.fetched(list(["10.0.0.1"]))
        let later = t0 + .seconds(600)
        #expect(!state.fetchDue(now: later))
        // Only the bootstrap address still answers: the list is worn out, ask again...
        state.answered(from: ip("203.107.1.1"))
        #expect(state.fetchDue(now: later))
        state.fetchStarted(now: later)
        state.fetchFailed(now: later)
        // ...but not in a loop: a failed fetch waits 5 minutes, and the exhausted rule waits 30 s.
        state.unreachable()
        #expect(!state.fetchDue(now: later + .seconds(60)))
        #expect(state.fetchDue(now: later + .seconds(300)))
        state.fetchStarted(now: later + .seconds(300))
        state.fetched(list(["10.0.0.1"], at: later + .seconds(300)))
        state.unreachable()
        #expect(!state.fetchDue(now: later + .seconds(310)), "fetched 10 s ago")
        #expect(state.fetchDue(now: later + .seconds(330)))
        // An answer from a listed address ends that.
        state.answered(from: ip("10.0.0.1"))
        #expect(!state.fetchDue(now: later + .seconds(340)))
    }

    @Test func aDisablingSchedulerLeavesNoAddressForQueriesUntilALaterList() {
        var state = ServiceAddressState(bootstrap: [ip("203.107.1.1")])
        state.fetchStarted(now: t0)
        state.fetched(ServiceList(ipv4: [], ipv6: [], disabled: true, fetched: t0, lifetime: .seconds(86400)))
        #expect(state.disabled)
        state.answered(from: ip("203.107.1.1"))
        #expect(!state.fetchDue(now: t0 + .seconds(60)))
        #expect(state.fetchDue(now: t0 + .seconds(86400)))
        state.fetchStarted(now: t0 + .seconds(86400))
        state.fetched(list(["10.0.0.1"]))
        #expect(!state.disabled)
    }

    @Test func aListSurvivesJSONWithItsAge() throws {
        let saved = list(["10.0.0.1"], v6: ["fd00::1"], lifetime: .seconds(1800))
        let decoded = try JSONDecoder().decode(ServiceList.self, from: JSONEncoder().encode(saved))
        #expect(decoded == saved)
        let state = ServiceAddressState(bootstrap: [ip("203.107.1.1")], saved: decoded)
        #expect(state.addresses.first == ip("10.0.0.1"))
        #expect(!state.fetchDue(now: t0 + .seconds(60)), "a fresh saved list is used without a fetch")
        #expect(state.fetchDue(now: t0 + .seconds(1800)))
    }

    /// Port i goes with address i of the raw list, as the Android SDK indexes it (`ServerConfig.getPort`):
    /// a dropped entry keeps its index, a port of 0 or less (or none) means the endpoint's own.
    @Test func alibabaPortsGoWithTheAddressAtTheirIndex() throws {
        let body = Array(
            #"{"service_ip":["10.0.0.1","junk","10.0.0.3","10.0.0.4","10.0.0.5"],"service_ip_port":[8080,9,0,-1],"service_ipv6":["fd00::1"],"service_ipv6_port":[8443]}"#
                .utf8
        )
        let list = try ServiceListFormat.parseAlibaba(body, now: t0)
        #expect(list.ipv4 == ["10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.5"].map(ip))
        #expect(list.port(of: ip("10.0.0.1")) == 8080)
        for none in ["10.0.0.3", "10.0.0.4", "10.0.0.5"] { #expect(list.port(of: ip(none)) == nil, "\(none)") }
        #expect(list.port(of: ip("fd00::1")) == 8443)
        // Ports out of range are not kept.
        let wide = ServiceList(
            ipv4: [ip("10.0.0.1")],
            ipv6: [],
            ports: [ip("10.0.0.1"): 70000],
            fetched: t0,
            lifetime: .seconds(60)
        )
        #expect(wide.port(of: ip("10.0.0.1")) == nil)
        // Our server writes them in order, 0 for an address without; the client reads them back.
        let written = ServiceListFormat.formatAlibaba(
            ipv4: [ip("10.0.0.1"), ip("10.0.0.2")],
            ipv6: [ip("fd00::1")],
            ports: [ip("10.0.0.2"): 8443]
        )
        #expect(String(decoding: written, as: UTF8.self).contains(#""service_ip_port":[0,8443]"#))
        let read = try ServiceListFormat.parseAlibaba(written, now: t0)
        #expect(read.port(of: ip("10.0.0.2")) == 8443 && read.port(of: ip("10.0.0.1")) == nil)
        // The state gives a port only to a listed address, and none while the service is off.
        let state = ServiceAddressState(bootstrap: [ip("203.107.1.1")], saved: read)
        #expect(state.port(of: ip("10.0.0.2")) == 8443 && state.port(of: ip("203.107.1.1")) == nil)
        // Saved and loaded with its ports; a list saved before ports existed still loads.
        let decoded = try JSONDecoder().decode(ServiceList.self, from: JSONEncoder().encode(read))
        #expect(decoded == read)
        var old = try JSONSerialization.jsonObject(with: JSONEncoder().encode(read)) as! [String: Any]
        old["ports"] = nil
        let legacy = try JSONDecoder().decode(ServiceList.self, from: JSONSerialization.data(withJSONObject: old))
        #expect(legacy.all == read.all && legacy.ports == nil)
    }
}
