// The HTTPDNS server: every format, answered to our own resolver (every provider kind), to real DoH
// clients (curl --doh-url, dig +https), forwarding to a real upstream (kresd), and hostile input.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

@Suite(.enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct ServerPeerTests {
    func tlsService(_ peers: Peers, upstream: Bool = false) async throws -> HTTPDNSService {
        let dir = URL(fileURLWithPath: peers.ca).deletingLastPathComponent().path
        return try await startService {
            $0.tls = try! .load(certificate: dir + "/doh.pem", key: dir + "/doh.key")
            $0.staticHosts["a.test"] = [IPAddress("127.0.0.1")!]
            if upstream { $0.upstream = .dns(peers.kresdDNS.0, port: peers.kresdDNS.1) }
        }
    }

    @Test func curlDohURLResolvesThroughOurServer() async throws {
        let peers = try Peers.require()
        let service = try await tlsService(peers)
        defer { Task { await service.stop() } }
        let r = try await runProcess(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "5", "--cacert", peers.ca, "--doh-url",
                "https://127.0.0.1:\(service.ports[0])/dns-query", "https://a.test:\(peers.nginxTLS)/whoami",
            ]
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("host=a.test sni=a.test"))
    }

    @Test func digHTTPSGetsTheRightBytes() async throws {
        let peers = try Peers.require()
        let service = try await tlsService(peers)
        defer { Task { await service.stop() } }
        let r = try await runProcess(
            "/usr/bin/dig",
            ["@127.0.0.1", "-p", "\(service.ports[0])", "+https", "+tries=1", "+time=3", "a.example.com", "AAAA"]
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("status: NOERROR"))
        #expect(r.stdout.contains("a.example.com.\t\t90\tIN\tAAAA\t2606:4700::1"), "\(r.stdout)")
        let nx = try await runProcess(
            "/usr/bin/dig",
            ["@127.0.0.1", "-p", "\(service.ports[0])", "+https", "+tries=1", "+time=3", "nope.example.com"]
        )
        #expect(nx.stdout.contains("status: NXDOMAIN"))
    }

    @Test func ourResolverOverH2ToOurTLSServer() async throws {
        let peers = try Peers.require()
        let service = try await tlsService(peers)
        defer { Task { await service.stop() } }
        var config = ResolverConfiguration(providers: [
            try ResolverSpec(parsing: "doh:https://doh.test:\(service.ports[0])/dns-query")
        ])
        config.policy = .all
        config.fallbackToLocalDNS = false
        config.bootstrap = ["doh.test": [IPAddress("127.0.0.1")!]]
        // Not a test of timeouts: a bound a starved 2-core machine cannot miss.
        config.timeout = .seconds(60)
        let resolver = try HTTPDNSResolver(configuration: config, engine: try peers.engine(), logger: testLogger)
        #expect(try await resolver.resolve("a.example.com").ipv6 == [IPAddress("2606:4700::1")!])
    }

    /// The `"ttl"` of a JSON answer, -1 when it has none.
    func ttl(_ json: String) -> Int {
        guard let at = json.range(of: "\"ttl\":", options: .backwards) else { return -1 }
        return Int(json[at.upperBound...].prefix { $0.isNumber }) ?? -1
    }

    @Test func forwardsToKresdWithTTLsCountingDown() async throws {
        let peers = try Peers.require()
        let service = try await tlsService(peers, upstream: true)
        defer { Task { await service.stop() } }
        let engine = try peers.engine()
        defer { engine.shutdown() }
        let url = "https://127.0.0.1:\(service.ports[0])/resolve?host=b.test&query=4,6"
        let first = try await rawGet(engine, url).1
        #expect(first.contains("\"ips\":[\"127.0.0.1\"]"), "\(first)")
        #expect(first.contains("\"ipsv6\":[\"::1\"]"))
        #expect(first.contains("\"ttl\":5"))  // kresd's hints TTL
        // Time passing is the scenario (the server's resolver runs on the real clock): ask until the
        // cached answer's TTL has counted down by two, never going up on the way, and is not yet expired.
        var served = [ttl(first)]
        var last = first
        try await eventually("the served TTL counts down from 5 to 3", pollEvery: .milliseconds(100)) {
            last = try await rawGet(engine, url).1
            served.append(ttl(last))
            return served.last! <= 3
        }
        #expect(served == served.sorted(by: >), "TTLs served, in order: \(served)")
        #expect(ttl(last) >= 1, "\(last)")
        // Names kresd does not know are NXDOMAIN on the wire.
        let nx = try await engine.execute(
            try HTTPEngineRequest(
                url: "https://127.0.0.1:\(service.ports[0])/dns-query?dns="
                    + base64url(try DNSMessage.query(name: "x.nx.test", type: .a))
            )
        )
        #expect(try DNSMessage(parsing: try await nx.body.collect(upTo: 4096).readableBytesView).rcode == .nameError)
    }
}
