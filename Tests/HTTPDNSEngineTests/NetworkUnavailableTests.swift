// When a failed connect means "no network" (URLSession's -1009, with the reason apps retry by) rather
// than "that server" (-1004): the rule, and the errors the POSIX transport builds with it.

import HTTPDNSCore
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
}
