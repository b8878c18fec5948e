// What an origin's HTTPS records change about a connect (ServiceEndpoint.swift), rule by rule, without a
// socket.

import Foundation
import HTTPDNSCore
@testable import HTTPDNSEngine
import Testing

@Suite struct ServiceEndpointTests {
    /// A record from the presentation form's few keys these tests use (the full parser is
    /// HTTPDNSLookup's, ServiceBinding+Wire.swift).
    func endpoint(_ text: String) -> ServiceBinding {
        let fields = text.split(separator: " ").map(String.init)
        var binding = ServiceBinding(priority: UInt16(fields[0])!, target: fields[1])
        for field in fields.dropFirst(2) {
            let pair = field.split(separator: "=", maxSplits: 1).map(String.init)
            let value = pair.count == 2 ? pair[1].replacingOccurrences(of: "\"", with: "") : ""
            switch pair[0] {
            case "alpn": binding.alpn = value.split(separator: ",").map(String.init)
            case "no-default-alpn": binding.noDefaultALPN = true
            case "port": binding.port = Int(value)!
            case "ipv4hint": binding.ipv4Hints = value.split(separator: ",").map { IPAddress(String($0))! }
            case "ipv6hint": binding.ipv6Hints = value.split(separator: ",").map { IPAddress(String($0))! }
            default: Issue.record("key \(pair[0]) is not one these tests read")
            }
        }
        return binding
    }

    func bindings(_ records: [String], aliases: [String] = []) -> ServiceBindings {
        ServiceBindings(name: "a.test", aliases: aliases, endpoints: records.map(endpoint), source: .httpdns("doh"))
    }

    @Test func theFirstEndpointGivesItsPortAndProtocols() {
        let route = ServiceEndpoint.choose(
            bindings([#"1 . alpn="h2" port=8443 ipv4hint=192.0.2.1 ipv6hint=2001:db8::1"#]),
            port: 443,
            versions: .automatic
        )
        // h2 offered, http/1.1 too (no no-default-alpn): ALPN's choice stays.
        #expect(
            route
                == ServiceEndpoint(
                    port: 8443,
                    versions: .automatic,
                    addressName: "a.test",
                    hints: [IPAddress("2001:db8::1")!, IPAddress("192.0.2.1")!]
                )
        )
    }

    @Test func onlyTheProtocolsOfferedAreOfferedInALPN() {
        let h2 = ServiceEndpoint.choose(
            bindings([#"1 . alpn="h2" no-default-alpn"#]),
            port: 443,
            versions: .automatic
        )
        #expect(h2?.versions == .http2Only && h2?.port == 443)
        let h1 = ServiceEndpoint.choose(
            bindings([#"1 . alpn="http/1.1""#]),
            port: 443,
            versions: .automatic
        )
        #expect(h1?.versions == .http1Only)
    }

    @Test func anEndpointOfferingNothingWeSpeakIsPassedOver() {
        let records = [#"1 . alpn="h3" no-default-alpn port=9000"#, #"2 . alpn="h2" port=8443"#]
        #expect(ServiceEndpoint.choose(bindings(records), port: 443, versions: .automatic)?.port == 8443)
        // Nothing usable at all: connect as if there were no record.
        #expect(ServiceEndpoint.choose(bindings([records[0]]), port: 443, versions: .automatic) == nil)
        // A request held to HTTP/1.1 cannot use an h2-only endpoint.
        #expect(
            ServiceEndpoint.choose(
                bindings([#"1 . alpn="h2" no-default-alpn"#]),
                port: 443,
                versions: .http1Only
            )
                == nil
        )
    }

    @Test func theTargetNamesWhoseAddressesAreUsed() {
        // "." is the owner: the alias's target when one was followed.
        let viaAlias = bindings([#"1 . alpn="h2""#], aliases: ["cdn.test"])
        #expect(
            ServiceEndpoint.choose(viaAlias, port: 443, versions: .automatic)?.addressName == "cdn.test"
        )
        let named = bindings([#"1 pool.cdn.test. alpn="h2""#])
        #expect(
            ServiceEndpoint.choose(named, port: 443, versions: .automatic)?.addressName == "pool.cdn.test"
        )
        // No endpoint (an alias chain that ended without one): nothing changes.
        #expect(ServiceEndpoint.choose(bindings([]), port: 443, versions: .automatic) == nil)
    }

    @Test func theRecordsAreWaitedForAFifthOfTheLookupAtMost50ms() {
        #expect(ServiceEndpoint.extraWait(afterLookupOf: .zero) == .zero)
        #expect(ServiceEndpoint.extraWait(afterLookupOf: .milliseconds(100)) == .milliseconds(10))
        #expect(ServiceEndpoint.extraWait(afterLookupOf: .seconds(2)) == .milliseconds(50))
    }

    @Test func anAddressThatCameWithoutARoundTripWaitsForNoRecords() {
        // A relaunch on a persisted (stale) answer, or a fresh cached one: connect at once.
        #expect(ServiceEndpoint.recordsWait(addressesFrom: .stale("doh"), lookupTook: .seconds(1)) == .zero)
        #expect(ServiceEndpoint.recordsWait(addressesFrom: .cache("doh"), lookupTook: .seconds(1)) == .zero)
        #expect(ServiceEndpoint.recordsWait(addressesFrom: .override, lookupTook: .seconds(1)) == .zero)
        // An answer from the network: the records that came with it count, within the bound.
        #expect(
            ServiceEndpoint.recordsWait(addressesFrom: .httpdns("doh"), lookupTook: .milliseconds(100))
                == .milliseconds(10)
        )
        #expect(ServiceEndpoint.recordsWait(addressesFrom: nil, lookupTook: .seconds(5)) == .milliseconds(50))
    }

    @Test func theWaitEndsAtItsBoundWhileTheRecordsQueryRunsOn() async {
        // A records query that answers late: the wait returns nil at its bound instead of waiting for
        // it (it used to wait for the whole query). The query finishes only after the wait is over.
        let (stream, release) = AsyncStream<Void>.makeStream()
        let late = Task<String?, Never> {
            for await _ in stream { break }
            return "late"
        }
        #expect(await ConnectionFactory.value(of: late, within: .milliseconds(10)) == nil)
        release.finish()
        #expect(await late.value == "late")
        // One that is there in time is taken.
        let prompt = Task<String?, Never> { "prompt" }
        _ = await prompt.value
        #expect(await ConnectionFactory.value(of: prompt, within: .seconds(60)) == "prompt")
    }
}
