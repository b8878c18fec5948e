// Against real peers started by scripts/test.sh: knot-resolver (DoH h2, legacy DoH over HTTP/1.1,
// Do53) as the trusted resolver and dnsmasq as the hijacking LocalDNS.

@testable import HTTPDNSTestSupport
import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
import NIOCore
import NIOHTTP1
import Testing

@Suite(.enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct PeerTests {
    func resolver(_ specs: [String], peers: Peers, _ tweak: (inout ResolverConfiguration) -> Void = { _ in }) throws
        -> HTTPDNSResolver
    {
        var config = ResolverConfiguration(providers: try specs.map { try ResolverSpec(parsing: $0) })
        config.policy = .all
        config.fallbackToLocalDNS = false
        config.timeout = .seconds(4)
        config.localDNS = .dns(peers.hijacker.0, port: peers.hijacker.1)
        tweak(&config)
        return try HTTPDNSResolver(configuration: config, engine: try peers.engine(), logger: testLogger)
    }

    @Test(arguments: ["doh", "doh-post"])
    func dohOverHTTP2AgainstKresd(_ kind: String) async throws {
        let peers = try Peers.require()
        let r = try await resolver(["\(kind):https://127.0.0.1:\(peers.doh2Port)/dns-query"], peers: peers).resolve(
            "a.test"
        )
        #expect(r.ipv4 == [IPAddress("127.0.0.1")!])
        #expect(r.ipv6 == [IPAddress("::1")!])
        // kresd's hints TTL, 5, raised to the cache's minTTL (10): the first answer says what the cache keeps.
        #expect(r.ttl == 10)
    }

    @Test func engineNegotiatesH2WithDoh2AndHTTP1WithLegacyDoH() async throws {
        let peers = try Peers.require()
        let engine = try peers.engine()
        let query = try DNSMessage.query(name: "b.test", type: .a, id: 0)
        let headers = HTTPHeaders([("accept", "application/dns-message"), ("content-type", "application/dns-message")])
        func post(_ port: Int, _ versions: HTTPVersionPolicy) async throws -> HTTPEngineResponse {
            var request = HTTPEngineRequest(
                method: .POST,
                url: HTTPURL(scheme: "https", host: "127.0.0.1", port: port, target: "/dns-query"),
                headers: headers,
                body: .bytes(query)
            )
            request.versions = versions
            request.timeout = .seconds(4)
            return try await engine.execute(request)
        }
        for (port, versions, expected) in [
            (peers.doh2Port, HTTPVersionPolicy.automatic, HTTPVersionUsed.http2),
            (peers.dohLegacyPort, .http1Only, .http1),
            (peers.dohLegacyPort, .automatic, .http2),
        ] {
            let response = try await post(port, versions)
            #expect(response.status == .ok)
            #expect(response.version == expected, "port \(port) \(versions)")
            let message = try DNSMessage(parsing: try await response.body.collect(upTo: 65536).readableBytesView)
            #expect(message.addresses(for: .a).addresses == [IPAddress("127.0.0.1")!])
        }
        // An h2-only server cannot be reached by an HTTP/1.1-only client (what such a client would see).
        await #expect(throws: HTTPEngineError.self) { _ = try await post(peers.doh2Port, .http1Only) }
        engine.shutdown()
    }

    @Test(arguments: ["doh", "doh-post"])
    func dohOverHTTP1LegacyEndpoint(_ kind: String) async throws {
        let peers = try Peers.require()
        let r = try await resolver(["\(kind):https://127.0.0.1:\(peers.dohLegacyPort)/doh"], peers: peers).resolve(
            "c.test",
            .ipv4
        )
        #expect(r.ipv4 == [IPAddress("127.0.0.1")!])
    }

    @Test func classicDNSAgainstKresd() async throws {
        let peers = try Peers.require()
        let r = try await resolver(["dns:127.0.0.1:\(peers.kresdDNS.1)"], peers: peers).resolve("b.test")
        #expect(Set(r.addresses) == [IPAddress("127.0.0.1")!, IPAddress("::1")!])
    }

    @Test func resolverNamedByHostnameIsReachedThroughItsBootstrapIPAndVerifiedByName() async throws {
        let peers = try Peers.require()
        let r = try await resolver(["doh:https://doh.test:\(peers.doh2Port)/dns-query"], peers: peers) {
            $0.bootstrap = ["doh.test": [IPAddress("127.0.0.1")!]]
        }.resolve("a.test", .ipv4)
        #expect(r.ipv4 == [IPAddress("127.0.0.1")!])
    }

    @Test func ipv6OnlyPathToTheResolver() async throws {
        let peers = try Peers.require()
        let r = try await resolver(["doh:https://[::1]:\(peers.doh2Port)/dns-query"], peers: peers).resolve(
            "v6only.test"
        )
        #expect(r.ipv6 == [IPAddress("::1")!])
        #expect(r.ipv4.isEmpty)
    }

    @Test func untrustedCertificateIsRefusedWithAClearError() async throws {
        let peers = try Peers.require()
        var config = ResolverConfiguration(providers: [
            try ResolverSpec(parsing: "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query")
        ])
        config.policy = .all
        config.fallbackToLocalDNS = false
        let noCA = try HTTPDNSResolver(configuration: config, engine: try HTTPEngine(), logger: testLogger)
        do {
            _ = try await noCA.resolve("a.test", .ipv4)
            Issue.record("resolved through a server whose certificate is not trusted")
        } catch let e as ResolverError {
            #expect(e.description.contains("not trusted"))
            // The provider's own error is kept as a value, with the specific TLS code.
            #expect(e.failures.contains { ($0.error as? HTTPEngineError)?.code == .untrustedCertificate })
        }
        // A name the certificate does not carry is refused too, even with the CA trusted.
        let wrongName = try resolver(["doh:https://wrong.test:\(peers.doh2Port)/dns-query"], peers: peers) {
            $0.bootstrap = ["wrong.test": [IPAddress("127.0.0.1")!]]
        }
        do {
            _ = try await wrongName.resolve("a.test", .ipv4)
            Issue.record("accepted a certificate without wrong.test in it (its IP SAN must not count for a name)")
        } catch let e as ResolverError {
            #expect(e.description.contains("not valid for wrong.test"))
            #expect(e.failures.contains { ($0.error as? HTTPEngineError)?.code == .certificateNameMismatch })
        }
    }

    @Test func deadFirstResolverFailsOverToKresd() async throws {
        let peers = try Peers.require()
        let t0 = ContinuousClock.now
        let r = try await resolver(
            ["doh:https://127.0.0.1:1/dns-query", "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query"],
            peers: peers
        ) { $0.timeout = .seconds(30) }.resolve("a.test", .ipv4)
        let took = ContinuousClock.now - t0
        #expect(r.ipv4 == [IPAddress("127.0.0.1")!])
        // A refused connection fails over at once; waiting out the dead resolver's share of the timeout
        // would take 15 s. 10 s tells the two apart without being a speed target for a loaded machine.
        #expect(took < .seconds(10), "failover took \(took)")
    }

    @Test func hijackingLocalDNSIsDetected() async throws {
        let peers = try Peers.require()
        let resolver = try resolver(["doh:https://127.0.0.1:\(peers.doh2Port)/dns-query"], peers: peers)
        let report = await resolver.compare("a.test")
        #expect(report.hijacked)
        #expect(try report.localDNS.get().ipv4 == [IPAddress("127.0.0.66")!])
        #expect(try report.httpdns.get().ipv4 == [IPAddress("127.0.0.1")!])
        // c.test is answered the same by both: no hijack.
        #expect(await resolver.compare("c.test", .ipv4).hijacked == false)
    }

    @Test func nxdomainFromKresdIsNoAddress() async throws {
        let peers = try Peers.require()
        do {
            _ = try await resolver(["doh:https://127.0.0.1:\(peers.doh2Port)/dns-query"], peers: peers).resolve(
                "www.nx.test"
            )
            Issue.record("resolved an NXDOMAIN name")
        } catch let e as ResolverError {
            #expect(e.code == .noAddress)
        }
    }
}
