// The DoH server's query-string and base64url decoding, on the bytes (Foundation's string search is
// kept off this path); what they accept and refuse.

@testable import HTTPDNSCore
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

@Suite struct QueryDecodingTests {
    @Test func formDecodingUndoesEscapesAndPlusOnlyWhereAsked() {
        #expect(formDecoded("a.test", plusIsSpace: true) == "a.test")
        #expect(formDecoded("a%2Eb+c", plusIsSpace: true) == "a.b c")
        #expect(formDecoded("a+b", plusIsSpace: false) == "a+b")
        #expect(formDecoded("%E4%B8%AD", plusIsSpace: true) == "中")
        #expect(formDecoded("%e4%b8%ad", plusIsSpace: true) == "中")
    }

    @Test(arguments: ["%", "%4", "%zz", "a%2", "%FF", "%C3"])
    func malformedEscapesOrBytesThatAreNotUTF8AreRefused(_ text: String) {
        #expect(formDecoded(Substring(text), plusIsSpace: true) == nil)
    }

    @Test func base64URLDecodesWithOrWithoutPaddingLengthAndRefusesOtherAlphabets() {
        // RFC 8484 section 4.1.1's example query for www.example.com.
        let query = "AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA2NvbQAAAQAB"
        #expect(decodeBase64URL(query)?.count == 33)
        #expect(decodeBase64URL("-_8") == [0xFB, 0xFF])
        #expect(decodeBase64URL("+/8") == nil)  // standard base64's alphabet is not base64url
        #expect(decodeBase64URL("AAA=") == nil)  // padding is left off in DoH
        #expect(decodeBase64URL("ä") == nil)
        #expect(decodeBase64URL(String(repeating: "A", count: 4100)) == nil)
        #expect(decodeBase64URL("A") == nil)  // one character is no byte
    }
}

@Suite struct QuerySplittingTests {
    let core = RoutingDecisionTests().core()

    @Test func thePathAndEveryParameterComeApartOnTheBytes() {
        let (path, query) = core.split("/d?dn=a.test&type=aaaa&&flag&ttl=1&dn=b%2Etest&q=4+6")
        #expect(path == "/d")
        // Empty pairs are skipped, a name without "=" has an empty value, the last repeat wins, and
        // escapes are decoded ("+" as a space in values only).
        #expect(query == ["dn": "b.test", "type": "aaaa", "flag": "", "ttl": "1", "q": "4 6"])
        #expect(core.split("/healthz").0 == "/healthz" && core.split("/healthz").1.isEmpty)
        #expect(core.split("/x?").0 == "/x" && core.split("/x?").1.isEmpty)
        #expect(core.split("/x?a=b=c").1 == ["a": "b=c"])
        // A malformed escape is kept as it came.
        #expect(core.split("/x?%zz=%4").1 == ["%zz": "%4"])
    }
}

@Suite struct DoHAnswerMemoTests {
    /// A core whose clock reads `second`.
    func core(hosts: [String: [IPAddress]], second: NIOLockedValueBox<Int>) -> ServiceCore {
        var configuration = HTTPDNSService.Configuration()
        configuration.unixTime = { second.withLockedValue { $0 } }
        return ServiceCore(
            hosts: NIOLockedValueBox(HTTPDNSService.Hosts(table: hosts, stamp: "")),
            resolver: nil,
            subnetUpstream: nil,
            configuration: configuration,
            logger: Logger(label: "test"),
            readiness: ServiceReadiness(hasUpstream: false),
            upstreamLookups: UpstreamLookups(limit: 8)
        )
    }

    func doh(_ name: String) throws -> ListenerRequest {
        RoutingDecisionTests().get("/dns-query?dns=" + base64url(try DNSMessage.query(name: name, type: .a)))
    }

    func respond(
        _ core: ServiceCore,
        _ request: ListenerRequest,
        known: [String: ServiceCore.Lookup]
    ) -> ListenerResponse? {
        let decision = core.decide(request, known: { known[$0.name] ?? core.immediateLookup($0.name) })
        guard case .respond(let response) = decision else { return nil }
        return response
    }

    @Test func anAnswerIsMadeOnceASecondAndANewTableOrSecondMakesItAgain() throws {
        let second = NIOLockedValueBox(1_000)
        let core = core(hosts: ["a.test": [IPAddress("192.0.2.1")!]], second: second)
        let first = try #require(respond(core, try doh("a.test"), known: [:]))
        #expect(core.hosts.withLockedValue { $0.dohAnswers.count } == 1)
        // Within the second the memo answers: the table edited in place (a reload replaces it) is not read.
        core.hosts.withLockedValue { $0.table["a.test"] = [IPAddress("192.0.2.5")!] }
        let again = try #require(respond(core, try doh("a.test"), known: [:]))
        #expect(again.body == first.body)
        // A new hosts table starts a new memo: the next answer is the new address at once.
        let newTable = HTTPDNSService.Hosts(table: ["a.test": [IPAddress("192.0.2.9")!]], stamp: "2")
        core.hosts.withLockedValue { $0 = newTable }
        let reloaded = try #require(respond(core, try doh("a.test"), known: [:]))
        #expect(reloaded.body != first.body)
        #expect(
            try DNSMessage(parsing: reloaded.body.readableBytesView).addresses(for: .a).addresses
                == [IPAddress("192.0.2.9")!]
        )
        // The next second empties the memo before it keeps anything new (b.test: NXDOMAIN, kept too).
        second.withLockedValue { $0 += 1 }
        _ = try #require(respond(core, try doh("b.test"), known: [:]))
        #expect(core.hosts.withLockedValue { $0.dohAnswers.count } == 1)
    }

    @Test func aNameStillBeingAskedForIsNeverAnsweredFromTheMemo() throws {
        let core = core(hosts: [:], second: NIOLockedValueBox(1_000))
        // Not at hand: the pass collects it, and the stand-in failure built meanwhile is not kept.
        guard case .lookUp(let names) = core.decide(try doh("up.test"), known: { _ in nil }) else {
            Issue.record("answered a name it does not have")
            return
        }
        #expect(names.map(\.name) == ["up.test"])
        guard case .lookUp = core.decide(try doh("up.test"), known: { _ in nil }) else {
            Issue.record("the stand-in SERVFAIL was kept and served")
            return
        }
        #expect(core.hosts.withLockedValue { $0.dohAnswers.count } == 0)
        // Once answered it is kept like any other.
        let answer = ServiceCore.Lookup.found(
            ipv4: FamilyAnswer(addresses: [IPAddress("192.0.2.7")!], ttl: 30),
            ipv6: FamilyAnswer(addresses: [], ttl: 30)
        )
        _ = try #require(respond(core, try doh("up.test"), known: ["up.test": answer]))
        #expect(core.hosts.withLockedValue { $0.dohAnswers.count } == 1)
    }

    @Test func theTableHoldsAtMostItsCapacity() {
        var table = DoHAnswerTable()
        let response = ListenerResponse(status: .ok, text: "x")
        for i in 0..<(DoHAnswerTable.capacity + 10) {
            table.remember(response, for: .init(dns: "q\(i)", subnet: nil), at: 5)
        }
        #expect(table.count == DoHAnswerTable.capacity)
        #expect(table.answer(.init(dns: "q0", subnet: nil), at: 5) != nil)
        #expect(table.answer(.init(dns: "q0", subnet: nil), at: 6) == nil)
    }
}
