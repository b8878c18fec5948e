// The pure-core halves of the hardening against hostile input: addresses that hide an IPv4 address, text that is not an address,
// answers too large to de-duplicate naively, answers for another name, impossible DoH JSON statuses.

import Testing

@testable import HTTPDNSCore
@testable import HTTPDNSServer
@testable import HTTPDNSLookup

@Suite struct AddressValidationTests {
    @Test(arguments: [
        ("64:ff9b::7f00:1", true),  // NAT64 of 127.0.0.1
        ("64:ff9b::a00:1", true),  // NAT64 of 10.0.0.1
        ("64:ff9b::101:101", false),  // NAT64 of 1.1.1.1: what a DNS64 LocalDNS legitimately answers
        ("::7f00:1", true),  // IPv4-compatible 127.0.0.1
        ("::101:101", false),  // IPv4-compatible 1.1.1.1
        ("2002:7f00:1::1", true),  // 6to4 of 127.0.0.1
        ("2002:c0a8:101::1", true),  // 6to4 of 192.168.1.1
        ("2002:101:101::1", false),  // 6to4 of 1.1.1.1
        ("::ffff:10.1.2.3", true),  // v4-mapped private
        ("fec0::1", true),  // site-local
        ("2606:4700::1111", false),
    ])
    func embeddedIPv4IsJudgedByTheAddressInside(_ text: String, _ nonGlobal: Bool) throws {
        let ip = try #require(IPAddress(text))
        #expect(ip.isNonGlobal == nonGlobal, "\(text)")
    }

    @Test(arguments: ["1.2.3.4\u{0}junk", "1.2.3.4 ", " 1.2.3.4", "1.2.3.4\n", "::1%lo", "1.2.3.4/8", "١.2.3.4"])
    func textThatIsNotExactlyAnAddressIsRefused(_ text: String) {
        #expect(IPAddress(text) == nil, "\(text.debugDescription)")
    }

    @Test func aPublicNameAnsweredWithDisguisedLoopbackIsRejected() {
        let validator = AnswerValidator(policy: .all)
        let outcome = validator.validate(
            FamilyAnswer(addresses: [IPAddress("64:ff9b::7f00:1")!, IPAddress("64:ff9b::101:101")!], ttl: 60),
            for: "example.com"
        )
        #expect(outcome.answer.addresses == [IPAddress("64:ff9b::101:101")!])
    }
}

@Suite struct AnswerBoundsTests {
    @Test func aHugeDNSPodAnswerKeepsSixtyFourDistinctAddresses() throws {
        let many = (0..<20_000).map { "1.0.\($0 / 256).\($0 % 256)" }.joined(separator: ";") + ",60"
        // Parsing stops at the limit (it was quadratic: about 21 s of CPU for 22k addresses).
        let answer = try DNSPodFormat.parse(many, names: ["a.com"], query: .ipv4)
        #expect(answer["a.com"]?.ipv4?.addresses.count == AddressCollector.limit)
    }

    @Test func duplicatesAreDroppedInOrder() throws {
        let r = try DNSPodFormat.parse("1.1.1.1;2.2.2.2;1.1.1.1;3.3.3.3;2.2.2.2", names: ["a.com"], query: .ipv4)
        #expect(r["a.com"]?.ipv4?.addresses.map(\.description) == ["1.1.1.1", "2.2.2.2", "3.3.3.3"])
    }

    @Test func aHostsFileOverItsLimitIsRefused() {
        let big = String(
            repeating: "# padding padding padding padding padding padding padding padding\n",
            count: 300_000
        )
        #expect(throws: HostsFile.ParseError.self) { try HostsFile.parse(big) }
    }

    @Test func aHostsNameKeepsAtMostSixtyFourAddresses() throws {
        let text = (0..<1000).map { "1.0.\($0 / 256).\($0 % 256) many.test" }.joined(separator: "\n")
        #expect(try HostsFile.parse(text)["many.test"]?.count == AddressCollector.limit)
    }

    @Test func anAlibabaAnswerForAnotherNameIsRefused() throws {
        let body = Array(#"{"host":"evil.com","ips":["1.2.3.4"],"ttl":60}"#.utf8)
        #expect(throws: AnswerFormatError.self) { try AlibabaJSONFormat.parse(body, query: .ipv4, host: "a.com") }
        #expect(try AlibabaJSONFormat.parse(body, query: .ipv4, host: "EVIL.com.").ipv4?.addresses.count == 1)
    }

    @Test(arguments: [-1, 65536, 4096, Int.min])
    func aDoHJSONStatusThatIsNoResponseCodeIsAnError(_ status: Int) {
        let body = Array(#"{"Status":\#(status),"Answer":[{"name":"a.com.","type":1,"TTL":60,"data":"1.2.3.4"}]}"#.utf8)
        #expect(throws: AnswerFormatError.self) { try DoHJSONFormat.parse(body, name: "a.com", type: .a) }
    }
}
