import Testing

@testable import HTTPDNSCore
@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy

@Suite struct HTTPURLPartsTests {
    @Test func splitsAURLIntoWhoAndWhat() throws {
        let p = try HTTPURLParts.parse("HTTPS://WWW.Example.com:8443/a%20b/c?q=1&r=%2F#frag")
        #expect(p == HTTPURLParts(scheme: "https", host: "www.example.com", port: 8443, target: "/a%20b/c?q=1&r=%2F"))
        #expect(p.effectivePort == 8443)
        #expect(p.text == "https://www.example.com:8443/a%20b/c?q=1&r=%2F")
    }

    @Test func defaultsAndEmptyPath() throws {
        let p = try HTTPURLParts.parse("http://a.test")
        #expect(p.port == nil)
        #expect(p.effectivePort == 80)
        #expect(p.target == "/")
        #expect(try HTTPURLParts.parse("https://a.test?x").target == "/?x")
        #expect(try HTTPURLParts.parse("https://a.test").effectivePort == 443)
    }

    @Test(arguments: ["http://bücher.example/", "http://xn--bcher-kva.example/", "http://BÜCHER.example/"])
    func internationalNamesBecomePunycode(_ text: String) throws {
        // Foundation's `host` would give "bücher.example" for all three, which no DNS query can carry.
        let p = try HTTPURLParts.parse(text)
        #expect(p.host == "xn--bcher-kva.example")
        #expect(try HTTPURLParts.parse(p.text) == p)
        #expect(try ResolverEndpoint(url: text).host == "xn--bcher-kva.example")
    }

    @Test(arguments: ["http://%61.com/", "http://a%2Eb.com/", "http://a%00b.com/"])
    func percentEscapesInTheHostAreRefused(_ text: String) {
        #expect(throws: URLParseError.self) { try HTTPURLParts.parse(text) }
        #expect(throws: (any Error).self) { try ResolverEndpoint(url: text) }
    }

    @Test func ipv6LiteralLosesItsBracketsAndKeepsItsText() throws {
        let p = try HTTPURLParts.parse("http://[2001:DB8::1]:8080/")
        #expect(p.host == "2001:DB8::1")
        #expect(p.text == "http://[2001:DB8::1]:8080/")
        #expect(try HTTPURLParts.parse(p.text) == p)
    }

    @Test(arguments: [
        ("not a url", "\"not a url\" is not a URL (expected http://host/path or https://host/path)"),
        ("ftp://a.test/", "\"ftp://a.test/\": only http and https URLs are supported"),
        ("http:///path", "\"http:///path\" has no host"),
        ("http://a.test:0/", "\"http://a.test:0/\": port 0 is outside 1-65535"),
        ("http://a.test:70000/", "\"http://a.test:70000/\": port 70000 is outside 1-65535"),
        (
            "http://a.test:99999999999999999999/",
            "\"http://a.test:99999999999999999999/\": port 99999999999999999999 is outside 1-65535"
        ),
        (
            "http://a b.test/", "\"http://a b.test/\" is not a URL (expected http://host/path or https://host/path)"
        ),
    ])
    func saysWhatIsWrong(_ text: String, _ reason: String) {
        #expect(parseError(text)?.reason == reason)
    }

    @Test func badHostNamesTheProblem() throws {
        let error = try #require(parseError("http://exa_mple!.com/"))
        guard case .badHost = error.problem else {
            Issue.record("\(error.problem)")
            return
        }
        #expect(error.reason.hasPrefix("\"http://exa_mple!.com/\""))
    }

    @Test(arguments: ["http://a.test/\r\nHost: evil", "http://a.test/\0", "http://a.test/\u{7F}", "\thttp://a.test/"])
    func refusesControlCharacters(_ text: String) throws {
        let error = try #require(parseError(text))
        guard case .controlCharacter = error.problem else {
            Issue.record("\(error.problem)")
            return
        }
        #expect(error.reason.contains("control character 0x"))
        #expect(!error.reason.contains("\r") && !error.reason.contains("\n") && !error.reason.contains("\0"))
    }

    @Test func quotedReasonIsCutAndEscaped() throws {
        let long = "ftp://" + String(repeating: "a", count: 300) + "/"
        let error = try #require(parseError(long))
        let short = error.reason(quotingAtMost: 100)
        #expect(short == "\"ftp://" + String(repeating: "a", count: 94) + "…\": only http and https URLs are supported")
        #expect(error.reason.count > 300)
        #expect(escapedForEcho("a\u{1B}[31mb\u{85}", limit: 100) == "a\\x1B[31mb\\x85")
    }

    /// The error parsing `text` throws; an issue is recorded (and nil returned) when it parses.
    func parseError(_ text: String) -> URLParseError? {
        #expect(throws: URLParseError.self, "\(text.debugDescription) was accepted") { try HTTPURLParts.parse(text) }
    }
}

@Suite struct ProxyRequestTargetTests {
    @Test(arguments: [
        ("www.Example.com:443", "www.example.com", 443),
        ("93.184.216.34:8443", "93.184.216.34", 8443),
        ("[2001:DB8:0::1]:443", "2001:db8::1", 443),
        ("[::ffff:1.2.3.4]:443", "::ffff:1.2.3.4", 443),
        ("a.test.:1", "a.test", 1),
    ])
    func connectOpensATunnelToANormalizedHost(_ uri: String, _ host: String, _ port: Int) {
        #expect(ProxyRequestTarget.parse(method: "CONNECT", uri: uri) == .tunnel(host: host, port: port))
    }

    @Test(arguments: [
        "example.com", "example.com:", "example.com:0", "example.com:65536", "example.com:+443", "example.com:44 3",
        ":443", "[::1]", "[::1]443", "::1:443", "[a.test]:443", "[1.2.3.4]:443", "bad_name!:443",
        "example.com:0443443",
    ])
    func connectWithoutAUsableHostAndPortIsInvalid(_ uri: String) {
        #expect(
            ProxyRequestTarget.parse(method: "CONNECT", uri: uri)
                == .invalid("CONNECT needs host:port, got \"\(uri)\"")
        )
    }

    @Test func absoluteHTTPIsForwardedWithThePortFilledIn() {
        #expect(
            ProxyRequestTarget.parse(method: "GET", uri: "http://Example.com/a?b=c")
                == .forward(HTTPURLParts(scheme: "http", host: "example.com", port: 80, target: "/a?b=c"))
        )
        #expect(
            ProxyRequestTarget.parse(method: "POST", uri: "http://[::1]:8080")
                == .forward(HTTPURLParts(scheme: "http", host: "::1", port: 8080, target: "/"))
        )
    }

    @Test func absoluteHTTPSMustUseConnect() {
        #expect(
            ProxyRequestTarget.parse(method: "GET", uri: "https://example.com/")
                == .invalid("https:// URLs go through CONNECT, not as absolute-form requests")
        )
    }

    @Test func badAbsoluteURLSaysWhyAndQuotesAtMost100Characters() {
        let uri = "http://a.test:99999/" + String(repeating: "x", count: 200)
        guard case .invalid(let reason) = ProxyRequestTarget.parse(method: "GET", uri: uri) else {
            Issue.record("not invalid")
            return
        }
        #expect(reason.hasSuffix("…\": port 99999 is outside 1-65535"))
        #expect(reason.count < 140)
    }

    @Test func pacOnlyForGet() {
        #expect(ProxyRequestTarget.parse(method: "GET", uri: "/proxy.pac") == .pac)
        #expect(ProxyRequestTarget.parse(method: "POST", uri: "/proxy.pac") == .invalid(Self.notAProxyRequest))
        #expect(ProxyRequestTarget.parse(method: "GET", uri: "/proxy.pac?x") == .invalid(Self.notAProxyRequest))
    }

    static let notAProxyRequest =
        "this is a proxy: send CONNECT host:port or an absolute http:// URL (or GET /proxy.pac)"

    @Test(arguments: ["/", "*", "example.com:443", "HTTP://a.test/", ""])
    func anythingElseIsInvalid(_ uri: String) {
        #expect(ProxyRequestTarget.parse(method: "GET", uri: uri) == .invalid(Self.notAProxyRequest))
    }

    @Test func echoedInputIsCutAndHasNoControlCharacters() {
        let uri = "\u{1B}]0;pwned\u{07}" + String(repeating: "a", count: 300)
        guard case .invalid(let reason) = ProxyRequestTarget.parse(method: "CONNECT", uri: uri) else {
            Issue.record("not invalid")
            return
        }
        #expect(reason.hasPrefix("CONNECT needs host:port, got \"\\x1B]0;pwned\\x07aaa"))
        #expect(reason.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F })
        #expect(reason.count < 150)
    }
}

@Suite struct DNSNamePresentationTests {
    /// A question whose first label is `a.b` (one label holding a dot), then `test`.
    static let dottedLabelQuery: [UInt8] =
        [0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0] + [3, 0x61, 0x2E, 0x62, 4] + Array("test".utf8) + [
            0, 0, 1, 0, 1,
        ]

    @Test func aDotInsideALabelIsEscapedNotMistakenForASeparator() throws {
        let m = try DNSMessage(parsing: Self.dottedLabelQuery)
        #expect(m.questionName == "a\\.b.test")
        #expect(throws: AnswerFormatError.self) { try validatedHostname(m.questionName) }
        // Written back, it is the same one label.
        let response = try DNSMessage.response(to: m, addresses: [IPAddress("192.0.2.1")!])
        #expect(Array(response[12..<(12 + 11)]) == Array(Self.dottedLabelQuery[12..<(12 + 11)]))
        #expect(try DNSMessage(parsing: response).questionName == "a\\.b.test")
    }

    @Test func oddBytesAreWrittenAsDecimalEscapesAndBack() throws {
        var bytes: [UInt8] = [0, 0, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
        bytes += [4, 0x00, 0xFF, 0x5C, 0x20] + [0, 0, 1, 0, 1]
        let m = try DNSMessage(parsing: bytes)
        #expect(m.questionName == "\\000\\255\\\\\\032")
        let query = try DNSMessage.query(name: m.questionName, type: .a, edns: false)
        #expect(query == bytes)
    }

    @Test func namesOfExactly255WireBytesAreTheLimit() throws {
        // 3 labels of 63 + one of 61: 64*3 + 62 + 1 (root) = 255 bytes.
        let name =
            [String](repeating: String(repeating: "a", count: 63), count: 3).joined(separator: ".") + "."
            + String(repeating: "b", count: 61)
        let query = try DNSMessage.query(name: name, type: .a, edns: false)
        #expect(try DNSMessage(parsing: query).questionName == name)
        #expect(throws: DNSWireError.self) { try DNSMessage.query(name: name + "b", type: .a) }
        // A 256-byte name on the wire is refused by the reader too, not only by the writer.
        var long = Array(query[0..<12]) + [63] + Array(repeating: 0x61, count: 63)
        long += [63] + Array(repeating: 0x61, count: 63) + [63] + Array(repeating: 0x61, count: 63)
        long += [62] + Array(repeating: 0x62, count: 62) + [0, 0, 1, 0, 1]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: long) }
    }

    @Test(arguments: ["a..b", ".a", "a\\", "a\\256.b"])
    func malformedTextNamesAreRefused(_ name: String) {
        #expect(throws: DNSWireError.self) { try DNSMessage.query(name: name, type: .a) }
    }

    @Test(arguments: [("", 0), (".", 0), ("a.", 1), ("a\\.", 1), ("a\\..b", 2)])
    func rootAndTrailingDots(_ name: String, _ labels: Int) throws {
        let bytes = try DNSMessage.query(name: name, type: .a, edns: false)
        var count = 0
        var i = 12
        while bytes[i] != 0 {
            count += 1
            i += Int(bytes[i]) + 1
        }
        #expect(count == labels)
    }
}
