// HTTPS records (RFC 9460) from a real authoritative server: BIND 9.18 serving svcb.test
// (Tests/Fixtures/peers/https.zone), asked over Do53 and over its DoH listener, through the library and
// through `httpdns resolve --type https`.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOCore
import Testing

@Suite(.enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct ServiceBindingPeerTests {
    func resolver(_ spec: String, peers: Peers) throws -> HTTPDNSResolver {
        var config = ResolverConfiguration(providers: [try ResolverSpec(parsing: spec)])
        config.policy = .all
        config.fallbackToLocalDNS = false
        config.timeout = .seconds(5)
        return try HTTPDNSResolver(configuration: config, engine: try peers.engine(), logger: testLogger)
    }

    func specs(_ peers: Peers) -> [String] {
        [
            "dns:\(peers.bindDNS.0):\(peers.bindDNS.1)",
            "doh:https://127.0.0.1:\(peers.bindDoHPort)/dns-query",
            "doh-post:https://127.0.0.1:\(peers.bindDoHPort)/dns-query",
        ]
    }

    @Test func bindsRecordsReadTheSameOverDo53AndDoH() async throws {
        let peers = try Peers.require()
        for spec in specs(peers) {
            let r = try resolver(spec, peers: peers)
            let a = try await r.serviceBindings(for: "a.svcb.test")
            #expect(a.source == .httpdns(spec), "\(spec)")
            #expect(a.endpoints.map(\.description) == [#"1 . alpn="h2" port=8443 ipv4hint=127.0.0.1 ipv6hint=::1"#])
            // Asked again within the TTL: the resolver's table answers.
            #expect(try await r.serviceBindings(for: "a.svcb.test").source.description.hasPrefix("cache("))
            let multi = try await r.serviceBindings(for: "multi.svcb.test")
            #expect(multi.endpoints.map(\.port) == [8443, 8444], "\(spec): priority order, whatever BIND's")
            let ech = try await r.serviceBindings(for: "ech.svcb.test")
            #expect(ech.endpoints.first?.ech?.count == 71, "\(spec)")
            #expect(try await r.serviceBindings(for: "plain.svcb.test").endpoints.isEmpty)
        }
    }

    @Test func serveInFrontOfBINDPassesItsRecordsOn() async throws {
        let peers = try Peers.require()
        let upstream = try ResolverSpec(parsing: "dns:\(peers.bindDNS.0):\(peers.bindDNS.1)")
        let service = try await startService { $0.upstream = upstream }
        defer { Task { await service.stop() } }
        for kind in ["doh", "doh-post", "doh-json"] {
            let r = try resolver("\(kind):http://127.0.0.1:\(service.ports[0])/dns-query", peers: peers)
            let a = try await r.serviceBindings(for: "a.svcb.test")
            #expect(a.endpoints.map(\.description) == [#"1 . alpn="h2" port=8443 ipv4hint=127.0.0.1 ipv6hint=::1"#])
            // The alias comes through as BIND has it, and the client follows it through serve.
            let alias = try await r.serviceBindings(for: "alias.svcb.test")
            #expect(alias.aliases == ["a.svcb.test"], "\(kind)")
            #expect(alias.endpoints.first?.port == 8443, "\(kind)")
            #expect(try await r.serviceBindings(for: "multi.svcb.test").endpoints.map(\.port) == [8443, 8444])
            #expect(try await r.serviceBindings(for: "ech.svcb.test").endpoints.first?.ech?.count == 71, "\(kind)")
            #expect(try await r.serviceBindings(for: "plain.svcb.test").endpoints.isEmpty, "\(kind)")
            // The addresses still come from the same upstream.
            #expect(try await r.resolve("plain.svcb.test", .ipv4).ipv4 == [IPAddress("127.0.0.1")!])
        }
    }

    @Test func anAliasIsFollowedToItsTargetsEndpoints() async throws {
        let peers = try Peers.require()
        let r = try resolver(specs(peers)[1], peers: peers)
        let alias = try await r.serviceBindings(for: "alias.svcb.test")
        #expect(alias.aliases == ["a.svcb.test"])
        #expect(alias.owner == "a.svcb.test")
        #expect(alias.endpoints.first?.port == 8443)
    }

    /// An engine resolving through BIND: https://NAME/ (port 443) reaches nginx's TLS port only if the
    /// record's port is followed.
    func engine(_ peers: Peers, records: Bool = true) throws -> (HTTPEngine, HTTPDNSResolver) {
        var config = HTTPEngine.Configuration()
        config.tls = HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: peers.ca))
        config.http.usesHTTPSRecords = records
        let resolver = try resolver("dns:\(peers.bindDNS.0):\(peers.bindDNS.1)", peers: peers)
        let engine = try HTTPEngine(
            configuration: config,
            addressSource: resolver,
            path: resolver.path,
            logger: testLogger
        )
        return (engine, resolver)
    }

    func get(_ engine: HTTPEngine, _ url: String) async throws -> (String, RequestMetrics) {
        let response = try await engine.send(try HTTPEngineRequest(url: url))
        return (String(buffer: try await response.body.collect(upTo: 1 << 16)), response.metrics)
    }

    @Test func theEngineConnectsWhereTheRecordSaysKeepingTheName() async throws {
        let peers = try Peers.require()
        let (engine, resolver) = try engine(peers)
        defer { engine.shutdown() }
        // Pre-resolved, as an app does at launch: the records are at hand with the addresses. (A cold
        // connect waits for them only a fifth of the addresses' lookup beyond it, so whether a first
        // connect uses them depends on which answer comes first.)
        await resolver.preResolve(["web.svcb.test", "hinted.svcb.test", "webalias.svcb.test", "h1web.svcb.test"])
        // The record's port and ALPN; SNI, the certificate and Host stay the origin's.
        let (web, metrics) = try await get(engine, "https://web.svcb.test/")
        #expect(web == "server=web.svcb.test host=web.svcb.test sni=web.svcb.test proto=HTTP/2.0\n")
        #expect(metrics.port == peers.nginxTLS)
        // No A or AAAA record: the hint is the address.
        let (hinted, hintedMetrics) = try await get(engine, "https://hinted.svcb.test/")
        #expect(hinted.hasPrefix("server=web.svcb.test host=hinted.svcb.test sni=hinted.svcb.test"))
        #expect(hintedMetrics.ip == "127.0.0.1")
        // An alias: the target's record and addresses, the alias's name everywhere else.
        let (alias, _) = try await get(engine, "https://webalias.svcb.test/")
        #expect(alias.hasPrefix("server=web.svcb.test host=webalias.svcb.test sni=webalias.svcb.test proto=HTTP/2.0"))
        // The record offers only http/1.1: ALPN offers nginx no h2.
        let (h1, h1Metrics) = try await get(engine, "https://h1web.svcb.test/")
        #expect(h1.hasSuffix("proto=HTTP/1.1\n") && h1Metrics.httpVersion == .http1)
    }

    @Test func withRecordsOffANameWithoutAddressIsNotReached() async throws {
        let peers = try Peers.require()
        let (engine, resolver) = try engine(peers, records: false)
        defer { engine.shutdown() }
        _ = try await resolver.serviceBindings(for: "hinted.svcb.test")
        await #expect(throws: HTTPEngineError.self) { try await get(engine, "https://hinted.svcb.test/") }
    }

    @Test func resolveTypeHTTPSPrintsTheRecords() async throws {
        let peers = try Peers.require()
        let dns = "dns:\(peers.bindDNS.0):\(peers.bindDNS.1)"
        let r = try await runCLI(["resolve", "--type", "https", "alias.svcb.test", "h3.svcb.test", "--resolver", dns])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(
            r.stdout == """
                ;; alias.svcb.test -> a.svcb.test HTTPS source=\(dns)
                1 . alpn="h2" port=8443 ipv4hint=127.0.0.1 ipv6hint=::1
                ;; h3.svcb.test HTTPS source=\(dns)
                1 . alpn="h3,h2" no-default-alpn ipv4hint=127.0.0.2

                """
        )
        let json = try await runCLI(["resolve", "--type", "https", "--json", "plain.svcb.test", "--resolver", dns])
        #expect(json.stdout.contains(#""records":[]"#), "\(json.stdout)")
        let mixed = try await runCLI(["resolve", "--type", "https", "--compare", "a.svcb.test", "--resolver", dns])
        #expect(mixed.status == 64 && mixed.stderr.contains("--compare"), "\(mixed.stderr)")
    }
}
