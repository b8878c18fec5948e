import Testing

@testable import HTTPDNSCore

/// The pieces of logic several modules share through Core: host:port text, CNAME chains, the RFC 8305
/// address order.
@Suite struct HostPortTests {
    @Test(arguments: [
        ("::1", 443, "[::1]:443"),
        ("2001:db8::1", 8443, "[2001:db8::1]:8443"),
        ("127.0.0.1", 443, "127.0.0.1:443"),
        ("example.com", 80, "example.com:80"),
    ])
    func anIPv6LiteralIsBracketedBeforeItsPort(_ host: String, _ port: Int, _ text: String) {
        #expect(formatAuthority(host: host, port: port) == text)
    }

    @Test func withoutAPortOnlyIPv6GetsBrackets() {
        #expect(formatAuthority(host: "::1", port: nil) == "[::1]")
        #expect(formatAuthority(host: "example.com", port: nil) == "example.com")
        #expect(formatAuthority(host: "192.0.2.1", port: nil) == "192.0.2.1")
    }

    @Test func formattedAuthoritiesSplitBackIntoHostAndPort() throws {
        for (host, port) in [("::1", 443), ("192.0.2.1", 53), ("a.test", 8080)] {
            let text = formatAuthority(host: host, port: port)
            let split = try #require(splitHostPort(text[...]))
            #expect(split.host == host[...])
            #expect(split.port.flatMap(parsePort) == port)
        }
    }

    @Test func splittingKeepsWhatIsMissingApart() throws {
        let bare = try #require(splitHostPort("a.test"))
        #expect(bare.host == "a.test" && bare.port == nil)
        let bracketed = try #require(splitHostPort("[::1]"))
        #expect(bracketed.host == "::1" && bracketed.port == nil)
        let emptyPort = try #require(splitHostPort("a.test:"))
        #expect(emptyPort.host == "a.test" && emptyPort.port == "")
        #expect(splitHostPort("[::1") == nil)
        #expect(splitHostPort("[::1]443") == nil)
    }

    @Test(arguments: ["0", "65536", "+443", "-1", "44 3", "", "000443", "0x1BB"])
    func portsAreOneToFiveDigitsInRange(_ text: String) {
        #expect(parsePort(text) == nil)
    }

    @Test func portBoundsAndLeadingZeros() {
        #expect(parsePort("1") == 1)
        #expect(parsePort("65535") == 65535)
        #expect(parsePort("00443") == 443)
    }

    @Test func dnsSpecsAndResolverURLsPrintIPv6InBrackets() throws {
        #expect(ResolverSpec.dns(IPAddress("::1")!, port: 53).description == "dns:[::1]:53")
        #expect(ResolverSpec.dns(IPAddress("127.0.0.1")!, port: 5353).description == "dns:127.0.0.1:5353")
        let endpoint = try ResolverEndpoint(url: "https://[::1]:8443/dns-query?x=1")
        #expect(endpoint.description == "https://[::1]:8443/dns-query?x=1")
        #expect(try ResolverEndpoint(url: endpoint.description) == endpoint)
    }

    @Test func resolverURLsParseLikeEveryOtherURL() throws {
        let e = try ResolverEndpoint(url: "HTTPS://DoH.Example:8443/dns-query?")
        #expect(e.scheme == "https" && e.host == "doh.example" && e.port == 8443)
        #expect(e.path == "/dns-query" && e.query == nil)
        #expect(try ResolverEndpoint(url: "http://192.0.2.1").port == 80)
        #expect(try ResolverEndpoint(url: "http://192.0.2.1").path == "/")
        #expect(try ResolverEndpoint(url: "https://a.test/q?a=1&b=2").query == "a=1&b=2")
    }

    @Test(arguments: ["https://u:p@1.2.3.4/q", "https://u@1.2.3.4/q", "https://a.test/\t", "https://a.test/\0x"])
    func resolverURLsRefuseCredentialsAndControlCharacters(_ text: String) {
        #expect(throws: (any Error).self) { try ResolverEndpoint(url: text) }
    }

    @Test func theSharedURLParserDropsCredentialsUnlessToldToRefuseThem() throws {
        #expect(try HTTPURLParts.parse("http://u:p@a.test/").host == "a.test")
        let error = try #require(
            #expect(throws: URLParseError.self) {
                try HTTPURLParts.parse("http://u:p@a.test/", refusingCredentials: true)
            }
        )
        #expect(error.problem == .credentials)
    }
}

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
