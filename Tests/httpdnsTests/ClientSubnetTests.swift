// Client subnet: the CLI asks every kind of resolver on behalf of a subnet only when told to,
// against a peer this project did not write (Tests/Fixtures/vendors/ecs_peer.py: DNS parsed with struct,
// AES from Python's cryptography), which answers a.b.c.N for the ECS option a.b.c.d/N it saw and a.b.c.99
// for a vendor's ip=a.b.c.d; and `httpdns serve` passes a request's subnet (ip=, a DoH query's own ECS,
// or the client's address) on to its upstream, that same peer.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOPosix
import Testing

@Suite(.serialized) struct ClientSubnetTests {
    static let aesKey = "0123456789abcdef"
    static let aliSecret = "9f8e7d6c5b4a39281716054433221100"
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The Python peer, its UDP and HTTP ports, and the file its query lines go to.
    struct Peer {
        let process: ChildProcess
        let udp: Int
        let http: Int
        let log: String
        let dir: String

        /// `v2Key`: the AES key (hex) of v2's encrypted modes. `serviceIPs`: what its scheduling endpoints
        /// list (comma-separated, or "disable").
        static func start(skew: Int = 0, v2Key: String? = nil, serviceIPs: String? = nil) async throws -> Peer {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-ecs-\(UUID())").path
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try (ClientSubnetTests.aesKey + "\n").write(toFile: dir + "/aes.key", atomically: true, encoding: .utf8)
            try ClientSubnetTests.aliSecret.write(toFile: dir + "/ali.secret", atomically: true, encoding: .utf8)
            let (process, line) = try await startInBackground(
                "/usr/bin/python3",
                [
                    root.appendingPathComponent("Tests/Fixtures/vendors/ecs_peer.py").path, aesKey, "139450",
                    aliSecret, "\(skew)", v2Key ?? "-",
                ] + (serviceIPs.map { [$0] } ?? []),
                stderr: dir + "/peer.log"
            )
            // A peer that could not start printed nothing and said why on its stderr.
            func port(_ key: String) throws -> Int {
                let stderr = (try? String(contentsOfFile: dir + "/peer.log", encoding: .utf8)) ?? ""
                let why = "printed \"\(line)\"; its stderr: \(stderr)"
                let range = try #require(line.range(of: key + "="), "\(why)")
                return try #require(Int(line[range.upperBound...].prefix { $0.isNumber }), "\(why)")
            }
            return Peer(
                process: process,
                udp: try port("udp"),
                http: try port("http"),
                log: dir + "/peer.log",
                dir: dir
            )
        }

        /// Stops it before the test returns (a Task started in a `defer` may never run: the test
        /// process can exit first, leaving the peer behind).
        func stop() {
            process.stopNow()
            try? FileManager.default.removeItem(atPath: dir)
        }

        /// A resolver asking the peer's Alibaba endpoint at `path` (`/139450/d`, `/v2/d?id=139450`), signed
        /// with the account's secret, encrypted with `encryption` when given.
        func alibabaResolver(
            _ path: String,
            encryption: AlibabaEncryption? = nil,
            _ configure: (inout ResolverConfiguration) -> Void = { _ in }
        ) throws -> HTTPDNSResolver {
            var config = ResolverConfiguration(providers: [
                .json(
                    try ResolverEndpoint(url: "http://127.0.0.1:\(http)\(path)"),
                    secret: ResolverSecret(ClientSubnetTests.aliSecret),
                    encryption: encryption
                )
            ])
            config.policy = .all
            config.fallbackToLocalDNS = false
            // Not a test of timeouts: 60 s, a bound the whole suite under ThreadSanitizer on 2 cores
            // cannot miss (10 s was missed). Tests of a deadline set their own in `configure`.
            config.timeout = .seconds(60)
            configure(&config)
            return try HTTPDNSResolver(configuration: config, engine: try HTTPEngine(), logger: testLogger)
        }

        /// What the peer saw, one line per query: "FORM NAME subnet=…".
        var seen: [String] {
            (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
        }

        /// The resolver flags of one kind against this peer (or a server on `port`).
        func flags(_ kind: String, port: Int? = nil) -> [String] {
            let http = port ?? self.http
            switch kind {
            case "dns": return ["--resolver", "dns:127.0.0.1:\(port ?? udp)"]
            case "doh": return ["--resolver", "doh:http://127.0.0.1:\(http)/dns-query"]
            case "dnspod": return ["--resolver", "dnspod:http://127.0.0.1:\(http)/d"]
            case "dnspod-aes":
                return [
                    "--resolver", "dnspod:http://127.0.0.1:\(http)/d", "--dnspod-id", "1001", "--dnspod-key-file",
                    dir + "/aes.key",
                ]
            case "alibaba":
                return [
                    "--resolver", "json:http://127.0.0.1:\(http)/139450/d", "--alibaba-secret-file",
                    dir + "/ali.secret",
                ]
            default:
                return [
                    "--resolver", "json:http://127.0.0.1:\(http)/v2/d?id=139450", "--alibaba-secret-file",
                    dir + "/ali.secret",
                ]
            }
        }
    }

    static let kinds = ["dns", "doh", "dnspod", "dnspod-aes", "alibaba", "alibaba-v2"]

    func resolve(_ flags: [String], _ extra: [String] = []) async throws -> String {
        let r = try await runCLI(["resolve", "a.test", "--no-fallback", "--timeout", "5"] + flags + extra)
        #expect(r.status == 0, "\(flags): \(r.stderr)")
        return r.stdout.split(separator: "\n").last.map(String.init) ?? ""
    }

    @Test func everyResolverKindIsAskedForTheSubnetOnlyWhenConfigured() async throws {
        let peer = try await Peer.start()
        defer { peer.stop() }
        for kind in Self.kinds {
            // Privacy: nothing is sent unless configured.
            #expect(try await resolve(peer.flags(kind)) == "192.0.2.1", "\(kind)")
            // ECS in DoH and Do53 (the peer answers with the prefix it saw), ip= to the vendors.
            let expected = kind == "dns" || kind == "doh" ? "203.0.113.24" : "203.0.113.99"
            #expect(try await resolve(peer.flags(kind), ["--client-subnet", "203.0.113.77/24"]) == expected, "\(kind)")
        }
        // An address alone is cut to the recommended /24; IPv6 to /56 (the peer sees it as the option says).
        #expect(try await resolve(peer.flags("dns"), ["--client-subnet", "198.51.100.200"]) == "198.51.100.24")
        #expect(try await resolve(peer.flags("doh"), ["--client-subnet", "2001:db8:1:2:3::9"]) == "192.0.2.56")
        let seen = peer.seen
        #expect(seen.contains("doh a.test subnet=2001:db8:1::/56"), "\(seen)")
        #expect(
            seen.contains("dnspod-aes a.test type=a subnet=203.0.113.0"),
            "the ip= of the AES form decrypts: \(seen)"
        )
        #expect(seen.filter { $0.hasSuffix("subnet=none") }.count >= 6, "\(seen)")
    }

    @Test func badSubnetsAreUsageErrors() async throws {
        for bad in ["203.0.113.0/33", "2001:db8::/129", "not-an-address", "10.0.0.0/x", "1.2.3.4/24/8"] {
            let r = try await runCLI(["resolve", "a.test", "--resolver", "dns:127.0.0.1:9", "--client-subnet", bad])
            #expect(r.status == 64, "\(bad): \(r.stderr)")
            #expect(r.stderr.contains("--client-subnet"), "\(bad): \(r.stderr)")
        }
    }

    @Test func theServerPassesEachRequestsSubnetUpstream() async throws {
        let peer = try await Peer.start()
        defer { peer.stop() }
        let (server, line) = try await startInBackground(
            httpdnsBinary,
            [
                "serve", "--listen", "127.0.0.1:0", "--upstream", "dns:127.0.0.1:\(peer.udp)", "--client-subnet",
                "client", "--dnspod-account", "1001:aes:\(peer.dir)/aes.key", "--alibaba-account",
                "139450:\(peer.dir)/ali.secret",
            ],
            stderr: peer.dir + "/serve.log"
        )
        defer {
            server.stopNow()
        }
        let afterHost = try #require(line.range(of: "127.0.0.1:"), "\(line)")
        let port = try #require(Int(line[afterHost.upperBound...].prefix { $0.isNumber }), "\(line)")
        for kind in ["doh", "dnspod", "dnspod-aes", "alibaba", "alibaba-v2"] {
            // The request's own subnet (ECS in the DoH query, ip= elsewhere, decrypted for AES) goes on.
            let asked = try await resolve(peer.flags(kind, port: port), ["--client-subnet", "198.51.100.9/24"])
            #expect(asked == "198.51.100.24", "\(kind)")
            // None in the request: the client's own address (127.0.0.1), cut to /24, as configured.
            #expect(try await resolve(peer.flags(kind, port: port)) == "127.0.0.24", "\(kind)")
        }
        // Answers for a subnet are the subnet's: asked again, not served from another subnet's cache.
        let seen = peer.seen.filter { $0.hasPrefix("do53 a.test") }
        #expect(seen.filter { $0.hasSuffix("198.51.100.0/24") }.count >= 5, "\(seen)")
        #expect(seen.filter { $0.hasSuffix("127.0.0.0/24") }.count >= 5, "\(seen)")
    }

    @Test func subnetsAndTheirOptionFollowRFC7871() throws {
        let v4 = try ClientSubnet("192.0.2.77/20")
        #expect(v4.description == "192.0.0.0/20")
        // FAMILY 1, SOURCE 20, SCOPE 0, and only the 3 bytes the prefix covers.
        #expect(v4.ednsOption == [0, 8, 0, 7, 0, 1, 20, 0, 192, 0, 0])
        let v6 = try ClientSubnet("2001:db8:abcd:12ff::1")
        #expect(v6.description == "2001:db8:abcd:1200::/56")
        #expect(v6.ednsOption.count == 4 + 4 + 7)
        #expect(try ClientSubnet("10.1.2.3/0").ednsOption == [0, 8, 0, 4, 0, 1, 0, 0])
        // A query carries it in its OPT record, and a server reads it back.
        let query = try DNSMessage.query(name: "a.test", type: .a, id: 7, clientSubnet: v4)
        #expect(try DNSMessage(parsing: query).clientSubnet == v4)
        #expect(try DNSMessage(parsing: try DNSMessage.query(name: "a.test", type: .a)).clientSubnet == nil)
        for bad in ["1.2.3.4/33", "::/129", "x", "1.2.3.4/-1", ""] {
            #expect(throws: HTTPDNSConfigurationError.self, "\(bad)") { try ClientSubnet(bad) }
        }
        // A hostile option never crashes: a prefix longer than the address, bytes past it, a bad family.
        for options in [
            [0, 8, 0, 5, 0, 1, 40, 0, 1], [0, 8, 0, 9, 0, 1, 8, 0, 1, 2, 3, 4, 5], [0, 8, 0, 4, 0, 3, 8, 0],
            [0, 8, 0, 200, 0, 1], [0, 8],
        ] as [[UInt8]] {
            #expect(DNSMessage.clientSubnet(inOptions: options) == nil, "\(options)")
        }
    }
}
