// What a change of network does to the resolver and the engines, with the route probe injected (the
// real probe and kernel notices are exercised in network namespaces by MobileNetworkTests).

@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSServer
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

@Suite struct NetworkChangeTests {
    static let dual = RouteProbe(ipv4Source: IPAddress("192.0.2.2"), ipv6Source: IPAddress("2001:db8:1:2::5"))
    static let v6Only = RouteProbe(ipv4Source: nil, ipv6Source: IPAddress("2001:db8:1:2::5"))

    func resolver(_ server: DNSServer, probe: NIOLockedValueBox<RouteProbe>, path: NetworkPath) throws
        -> HTTPDNSResolver
    {
        var config = ResolverConfiguration()
        config.policy = .all
        // Not a test of timeouts: 60 s, a bound the whole suite under ThreadSanitizer on 2 cores cannot
        // miss (10 s was missed).
        config.timeout = .seconds(60)
        config.network.watch = false
        config.network.nat64 = .off
        return HTTPDNSResolver(
            configuration: config,
            providers: [try do53(server)],
            localDNS: SystemProvider(),
            path: path,
            routeProbe: { probe.withLockedValue { $0 } },
            logger: testLogger
        )
    }

    @Test func aPathChangeSwitchesTheCacheAndReResolvesTheNamesInUseForTheNewFamilies() async throws {
        let server = try await startDNS(["93.184.216.70", "2606:2800:220:1::70"])
        defer { Task { await server.stop() } }
        let probe = NIOLockedValueBox(Self.dual)
        let path = NetworkPath()
        let resolver = try resolver(server, probe: probe, path: path)
        #expect(path.state.stack == NetworkStack(ipv4: true, ipv6: true))
        let first = try await resolver.resolve("in-use.example.com")
        #expect(first.ipv4.count == 1 && first.ipv6.count == 1)
        #expect(server.queries.udp == 2)

        // IPv4 is gone (and NAT64 is off): the name in use is asked again, AAAA only, before any caller
        // needs it, and the next lookup is served from the new network's cache.
        probe.withLockedValue { $0 = Self.v6Only }
        resolver.monitor.probeNow()
        await resolver.waitForNetworkWork()
        #expect(path.state.query == .ipv6)
        #expect(server.queries.udp == 3)
        let after = try await resolver.resolve("in-use.example.com")
        #expect(after.ipv4.isEmpty && after.ipv6 == [IPAddress("2606:2800:220:1::70")!])
        #expect(after.source.description.hasPrefix("cache("))
        #expect(server.queries.udp == 3)

        // Back on the first network: its cache partition is still there.
        probe.withLockedValue { $0 = Self.dual }
        resolver.monitor.probeNow()
        await resolver.waitForNetworkWork()
        #expect(try await resolver.resolve("in-use.example.com").source.description.hasPrefix("cache("))
        await resolver.shutdown()
    }
}
