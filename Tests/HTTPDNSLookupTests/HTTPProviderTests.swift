// The HTTP formats no real peer here speaks (DNSPod text, Alibaba-style JSON, JSON DoH) against a
// loopback fixture server, through the real engine and providers.

@testable import HTTPDNSTestSupport
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import NIOHTTP1
import Testing

@Suite struct HTTPProviderTests {
    static let table: [String: (v4: [String], v6: [String])] = [
        "a.example.com": (["198.41.0.1", "198.41.0.2"], ["2606:4700::1"]),
        "b.example.com": (["198.41.0.3"], []),
        "c.example.com": (["198.41.0.4"], ["2606:4700::4"]),
    ]

    static func answer(_ name: String, v6: Bool) -> FamilyAnswer {
        guard let row = table[name] else { return .empty }
        return FamilyAnswer(addresses: (v6 ? row.v6 : row.v4).map { IPAddress($0)! }, ttl: 120)
    }

    /// Speaks all three formats on one port: /d (DNSPod), /resolve (Alibaba), /dns-query (JSON DoH).
    static func startServer() async throws -> HTTPFixtureServer {
        try await HTTPFixtureServer.start { path, query, headers in
            switch path {
            case "/d":
                let names = (query["dn"] ?? "").split(separator: ",").map(String.init)
                let v6 = query["type"] == "aaaa"
                let q: AddressQuery = v6 ? .ipv6 : .ipv4
                let lines = names.map { name -> String in
                    let host = HostAnswer(ipv4: answer(name, v6: false), ipv6: answer(name, v6: true))
                    let text = DNSPodFormat.format(host, query: q, withTTL: query["ttl"] == "1")
                    return names.count > 1 ? "\(name).:\(text)" : text
                }
                return (.ok, "text/plain", Array(lines.joined(separator: "\n").utf8))
            case "/resolve":
                guard let host = query["host"] else { return (.badRequest, "text/plain", Array("missing host".utf8)) }
                let q = query["query"] ?? "4"
                let body = AlibabaJSONFormat.format(
                    host: host,
                    answer: HostAnswer(
                        ipv4: q.contains("4") ? answer(host, v6: false) : nil,
                        ipv6: q.contains("6") ? answer(host, v6: true) : nil
                    )
                )
                return (.ok, "application/json", body)
            case "/dns-query":
                guard headers["accept"].first == "application/dns-json", let name = query["name"] else {
                    return (.badRequest, "text/plain", Array("want accept: application/dns-json".utf8))
                }
                let type: DNSRecordType = query["type"] == "AAAA" ? .aaaa : .a
                let exists = table[name] != nil
                return (
                    .ok, "application/dns-json",
                    DoHJSONFormat.format(
                        name: name,
                        type: type,
                        rcode: exists ? .noError : .nameError,
                        answer: answer(name, v6: type == .aaaa)
                    )
                )
            case "/broken":
                return (.ok, "text/html", Array("<html>captive portal</html>".utf8))
            default:
                return (.notFound, "text/plain", [])
            }
        }
    }

    func resolver(_ spec: String, _ tweak: (inout ResolverConfiguration) -> Void = { _ in }) throws -> HTTPDNSResolver {
        var config = ResolverConfiguration(providers: [try ResolverSpec(parsing: spec)])
        config.policy = .all
        config.fallbackToLocalDNS = false
        // Not a test of timeouts: 60 s, a bound plain `swift test` on 2 cores with busy loops beside it
        // cannot miss (10 s was missed).
        config.timeout = .seconds(60)
        tweak(&config)
        return try HTTPDNSResolver(configuration: config, engine: try HTTPEngine(), logger: testLogger)
    }

    @Test(arguments: ["dnspod", "json", "doh-json"])
    func resolvesDualStackThroughEachHTTPFormat(_ kind: String) async throws {
        let server = try await Self.startServer()
        defer { Task { await server.stop() } }
        let path = ["dnspod": "/d", "json": "/resolve", "doh-json": "/dns-query"][kind]!
        let r = try await resolver("\(kind):http://127.0.0.1:\(server.port)\(path)").resolve("a.example.com")
        #expect(r.ipv4 == ["198.41.0.1", "198.41.0.2"].map { IPAddress($0)! })
        #expect(r.ipv6 == [IPAddress("2606:4700::1")!])
        #expect(r.ttl == 120)
        #expect(r.source.description.hasPrefix("\(kind):"))
    }

    @Test(arguments: ["dnspod", "json", "doh-json"])
    func unknownNameIsNoAddress(_ kind: String) async throws {
        let server = try await Self.startServer()
        defer { Task { await server.stop() } }
        let path = ["dnspod": "/d", "json": "/resolve", "doh-json": "/dns-query"][kind]!
        do {
            _ = try await resolver("\(kind):http://127.0.0.1:\(server.port)\(path)").resolve("missing.example.com")
            Issue.record("resolved a missing name")
        } catch let e as ResolverError {
            #expect(e.code == .noAddress)
        }
    }

    @Test func dnspodPreResolveBatchesNamesIntoOneRequestPerFamily() async throws {
        let server = try await Self.startServer()
        defer { Task { await server.stop() } }
        // A failed batch falls back to one request per name: give the batch time on a loaded machine.
        let r = try resolver("dnspod:http://127.0.0.1:\(server.port)/d")
        await r.preResolve(["a.example.com", "b.example.com", "c.example.com"], .ipv4)
        #expect(server.requestLog.count == 1)
        #expect(server.requestLog.first?.contains("dn=a.example.com,b.example.com,c.example.com") == true)
        let b = try await r.resolve("b.example.com", .ipv4)
        #expect(b.source.description.hasPrefix("cache("))
        #expect(server.requestLog.count == 1)
    }

    @Test func hostileAnswersAreRejectedWithAClearError() async throws {
        let server = try await Self.startServer()
        defer { Task { await server.stop() } }
        for spec in [
            "dnspod:http://127.0.0.1:\(server.port)/broken", "json:http://127.0.0.1:\(server.port)/broken",
            "dnspod:http://127.0.0.1:\(server.port)/nowhere",
        ] {
            do {
                _ = try await resolver(spec).resolve("a.example.com", .ipv4)
                Issue.record("accepted a hostile answer from \(spec)")
            } catch let e as ResolverError {
                #expect(e.code == .allProvidersFailed)
                #expect(e.description.contains("127.0.0.1"))
            }
        }
    }

    @Test func endpointNamedByHostnameNeedsABootstrapAddress() async throws {
        #expect(throws: HTTPDNSConfigurationError(.invalidResolverSpec, "")) {
            try resolver("doh:https://dns.example.net/dns-query")
        }
        let server = try await Self.startServer()
        defer { Task { await server.stop() } }
        let r = try resolver("json:http://httpdns.example.net:\(server.port)/resolve") {
            $0.bootstrap = ["httpdns.example.net": [IPAddress("127.0.0.1")!]]
        }
        #expect(try await r.resolve("b.example.com", .ipv4).ipv4 == [IPAddress("198.41.0.3")!])
    }
}
