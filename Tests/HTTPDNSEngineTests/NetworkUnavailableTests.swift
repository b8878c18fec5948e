// When a failed connect means "no network" (URLSession's -1009, with the reason apps retry by) rather
// than "that server" (-1004): the rule, and the errors the POSIX transport builds with it.

@testable import HTTPDNSCore
import NIOCore
import Testing

@testable import HTTPDNSEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite struct NetworkUnavailableTests {
    let lowDataOff = NetworkAccess(allowsConstrained: false)

    @Test func theSystemsPathDecidesWhereThereIsOne() {
        // No network at all, whatever the socket said.
        #expect(
            NetworkUnavailable.judge(errnos: [ECONNREFUSED], path: PathFacts(satisfied: false), access: .unrestricted)
                == NetworkUnavailable()
        )
        // A network the request's rules forbid: which rule, so the app can retry without it.
        let lowData = PathFacts(satisfied: true, constrained: true)
        #expect(NetworkUnavailable.judge(errnos: [], path: lowData, access: lowDataOff)?.reason == .constrained)
        let cellular = PathFacts(satisfied: true, cellular: true, expensive: true)
        #expect(
            NetworkUnavailable.judge(errnos: [], path: cellular, access: NetworkAccess(allowsCellular: false))?.reason
                == .cellular
        )
        #expect(
            NetworkUnavailable.judge(errnos: [], path: cellular, access: NetworkAccess(allowsExpensive: false))?.reason
                == .expensive
        )
        // A usable network and a server that refused: not a network problem.
        #expect(NetworkUnavailable.judge(errnos: [ECONNREFUSED], path: lowData, access: .unrestricted) == nil)
        #expect(NetworkUnavailable.judge(errnos: [ECONNREFUSED], path: cellular, access: lowDataOff) == nil)
    }

    @Test func withoutThePathEveryAttemptMustHaveFoundNoNetwork() {
        #expect(NetworkUnavailable.judge(errnos: [ENETUNREACH, ENETDOWN], path: nil, access: .unrestricted) != nil)
        // One address family unreachable, the other refused: the server's side, not the device's.
        #expect(NetworkUnavailable.judge(errnos: [ENETUNREACH, ECONNREFUSED], path: nil, access: .unrestricted) == nil)
        #expect(NetworkUnavailable.judge(errnos: [], path: nil, access: .unrestricted) == nil)
        #expect(NetworkUnavailable.judge(errnos: [ETIMEDOUT], path: nil, access: .unrestricted) == nil)
    }

    @Test func thePosixTransportsConnectErrorsCarryTheVerdict() {
        let unreachable = describeConnectFailure(
            IOError(errnoCode: ENETUNREACH, reason: "connect"),
            host: "a.test",
            port: 443,
            timeout: .seconds(1)
        )
        #expect(unreachable.code == .connectFailed && unreachable.networkUnavailable == NetworkUnavailable())
        let refused = describeConnectFailure(
            IOError(errnoCode: ECONNREFUSED, reason: "connect"),
            host: "a.test",
            port: 443,
            timeout: .seconds(1)
        )
        #expect(refused.code == .connectFailed && refused.networkUnavailable == nil)
    }

    /// A lookup failure keeping each provider's error, as the resolver's does.
    struct Lookup: ProviderFailures {
        var providerErrors: [any Error]
    }

    @Test func aLookupThatFoundNoNetworkIsNoNetworkNotAnUnknownHost() {
        let unreachable = describeConnectFailure(
            IOError(errnoCode: ENETUNREACH, reason: "connect"),
            host: "doh.test",
            port: 443,
            timeout: .seconds(1)
        )
        let udpDown = IOError(errnoCode: ENETDOWN, reason: "sendmsg")
        func judge(_ error: any Error, stack: NetworkStack? = nil, path: PathFacts? = nil) -> NetworkUnavailable? {
            NetworkUnavailable.judge(lookupFailure: error, stack: stack, path: path)
        }
        // Airplane mode: every provider (DoH, then LocalDNS over UDP) found no network.
        #expect(judge(Lookup(providerErrors: [unreachable, udpDown])) == NetworkUnavailable())
        // The system's path, or a stack probed with no route at all, says so whatever the providers said.
        let refused = HTTPEngineError(.connectFailed, "refused")
        #expect(judge(Lookup(providerErrors: [refused]), path: PathFacts(satisfied: false)) == NetworkUnavailable())
        #expect(
            judge(Lookup(providerErrors: [refused]), stack: NetworkStack(ipv4: false, ipv6: false))
                == NetworkUnavailable()
        )
        // A provider that was reached (or failed otherwise): the name's problem, not the network's.
        #expect(judge(Lookup(providerErrors: [unreachable, refused])) == nil)
        #expect(judge(Lookup(providerErrors: [])) == nil)
        #expect(judge(refused, stack: NetworkStack(ipv4: true, ipv6: false), path: PathFacts(satisfied: true)) == nil)
    }

    @Test func anEngineLookupOnAPathWithNoRouteFailsAsNoNetwork() async throws {
        // The engine's own path says no route of either family (airplane mode): a name no source has
        // fails with the no-network verdict, which URLSession reports as -1009.
        let path = NetworkPath(NetworkPathState(id: "offline", stack: NetworkStack(ipv4: false, ipv6: false)))
        let engine = try HTTPEngine(addressSource: StaticAddressSource([:]), path: path)
        defer { engine.shutdown() }
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: "https://uncached.test/"))
            Issue.record("resolved a name nobody has")
        } catch let error as HTTPEngineError {
            #expect(error.code == .nameNotResolved && error.networkUnavailable == NetworkUnavailable(), "\(error)")
        }
        let online = try HTTPEngine(
            addressSource: StaticAddressSource([:]),
            path: NetworkPath(NetworkPathState(id: "online", stack: NetworkStack(ipv4: true, ipv6: true)))
        )
        defer { online.shutdown() }
        do {
            _ = try await online.execute(try HTTPEngineRequest(url: "https://uncached.test/"))
        } catch let error as HTTPEngineError {
            #expect(error.code == .nameNotResolved && error.networkUnavailable == nil, "\(error)")
        }
    }
}
