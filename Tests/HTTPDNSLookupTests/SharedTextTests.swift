import Testing

@testable import HTTPDNSCore
@testable import HTTPDNSLookup

/// Host:port text and the resolver URLs built on it.
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
