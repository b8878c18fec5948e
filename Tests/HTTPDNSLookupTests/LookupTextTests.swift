import HTTPDNSCore
import Testing

@testable import HTTPDNSLookup

/// Text the resolver reads: CNAME chains, strict UTF-8, the bootstrap table.

@Suite struct CNAMEChainTests {
    @Test func followsAliasesInAnyOrderAndKeepsTheSmallestAliasTTL() {
        let chain = CNAMEChain(
            from: "WWW.A.test.",
            aliases: [
                ("e1.cdn.test.", "e2.cdn.test", 30), ("www.a.test", "E1.cdn.test.", 300), ("x.test", "y.test", 1),
            ]
        )
        #expect(chain.names == ["www.a.test", "e1.cdn.test", "e2.cdn.test"])
        #expect(chain.ttl == 30)
        #expect(chain.answers("E2.CDN.TEST."))
        #expect(!chain.answers("y.test"))
    }

    @Test func aLoopEndsAndNoAliasMeansNoTTL() {
        let loop = CNAMEChain(from: "a.test", aliases: [("a.test", "b.test", 5), ("b.test", "a.test", 5)])
        #expect(loop.names == ["a.test", "b.test"])
        #expect(CNAMEChain(from: "a.test", aliases: []).ttl == nil)
    }

    @Test func dohJSONAnswersAreNoFresherThanTheirAliases() throws {
        let body = Array(
            #"""
            {"Status":0,"Answer":[{"name":"www.a.test.","type":5,"TTL":7,"data":"edge.cdn.test."},
                                  {"name":"edge.cdn.test.","type":1,"TTL":60,"data":"192.0.2.9"}]}
            """#.utf8
        )
        let answer = try DoHJSONFormat.parse(body, name: "www.a.test", type: .a)
        #expect(answer == FamilyAnswer(addresses: [IPAddress("192.0.2.9")!], ttl: 7))
        // An alias alone is no address, and so no TTL.
        #expect(try DoHJSONFormat.parse(body, name: "www.a.test", type: .aaaa) == .empty)
    }
}

/// `String(strictUTF8:)`, the portable stand-in for `String(validating:as:)` (iOS 18+): it must refuse
/// what that refuses, never repair.
@Suite struct StrictUTF8Tests {
    @Test func wellFormedTextIsKeptAsItIs() {
        #expect(String(strictUTF8: Array("a.test,b.test".utf8)) == "a.test,b.test")
        #expect(String(strictUTF8: Array("腾讯云 ✓ 🚀".utf8)) == "腾讯云 ✓ 🚀")
        #expect(String(strictUTF8: [UInt8]()) == "")
        #expect(String(strictUTF8: Array("abc".utf8)[1...]) == "bc")
    }

    @Test(
        arguments: [
            [0xC0, 0x80],  // overlong NUL
            [0xE2, 0x82],  // truncated three-byte sequence
            [0x61, 0x80, 0x62],  // lone continuation byte
            [0xED, 0xA0, 0x80],  // UTF-16 surrogate encoded in UTF-8
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xFF],
            [0xEF, 0xBF, 0xBD, 0xFF],  // a real U+FFFD, then a bad byte
        ] as [[UInt8]]
    )
    func malformedBytesAreRefusedNotRepaired(_ bytes: [UInt8]) {
        #expect(String(strictUTF8: bytes) == nil)
    }

    @Test func aRealReplacementCharacterIsText() {
        #expect(String(strictUTF8: [0xEF, 0xBF, 0xBD]) == "\u{FFFD}")
    }
}

/// The bootstrap table is read one way by the providers and by the CLI's check (the CLI
/// looked names up as typed, the providers normalized).
@Suite struct BootstrapLookupTests {
    @Test func aHostnameEndpointFindsItsEntryWhateverItsCaseOrTrailingDot() throws {
        let table = ["doh.test": [IPAddress("192.0.2.53")!]]
        for text in [
            "doh:https://doh.test/dns-query", "doh:https://DoH.Test/dns-query", "doh:https://doh.test./dns-query",
        ] {
            let endpoint = try #require(try ResolverSpec(parsing: text).endpoint)
            #expect(endpoint.bootstrapAddresses(in: table) == [IPAddress("192.0.2.53")!], "\(text)")
        }
    }

    @Test func anIPEndpointNeedsNoEntryAndAMissingOneIsEmpty() throws {
        let ip = try #require(try ResolverSpec(parsing: "doh:https://192.0.2.1/dns-query").endpoint)
        #expect(ip.bootstrapAddresses(in: [:]) == nil)
        let name = try #require(try ResolverSpec(parsing: "doh:https://other.test/dns-query").endpoint)
        #expect(name.bootstrapAddresses(in: ["doh.test": [IPAddress("192.0.2.53")!]]) == [])
    }
}
