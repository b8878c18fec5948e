// HTTPS records (RFC 9460) from a real authoritative server: BIND 9.18 serving svcb.test
// (Tests/Fixtures/peers/https.zone), asked over Do53 and over its DoH listener, through the library and
// through `httpdns resolve --type https`.

@testable import HTTPDNSTestSupport
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
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

    @Test func anAliasIsFollowedToItsTargetsEndpoints() async throws {
        let peers = try Peers.require()
        let r = try resolver(specs(peers)[1], peers: peers)
        let alias = try await r.serviceBindings(for: "alias.svcb.test")
        #expect(alias.aliases == ["a.svcb.test"])
        #expect(alias.owner == "a.svcb.test")
        #expect(alias.endpoints.first?.port == 8443)
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
