// The routes into HTTPDNS through the front door, hermetic: the loopback proxy the proxy configurations
// point at (started once, on the same port again after the system takes its listener, moved and
// reported only when that port is taken) and what Linux says of the Apple-only routes.

import Foundation
@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct RoutesTests {
    @Test func theLoopbackProxyStartsOnceOnFirstUse() async throws {
        try await withHTTPDNS { httpdns in
            #expect((try httpdns.proxyKeeper()).current == nil)
            async let first = httpdns.loopbackProxy()
            async let second = httpdns.loopbackProxy()
            let (a, b) = try await (first, second)
            #expect(a === b)
            #expect(a.port > 0)
            #expect(try await httpdns.loopbackProxy() === a)
        }
    }

    /// Whether the proxy came back on `port`, or, the port having been taken meanwhile (by any other
    /// process binding an ephemeral port, as the parallel suite does), moved and said so.
    func cameBack(on port: Int, as again: HTTPDNSProxy, moves: NIOLockedValueBox<[(Int, Int)]>) -> Bool {
        again.port == port || moves.withLockedValue { $0.contains { $0 == (port, again.port) } }
    }

    @Test func aLostListenerStartsAgainOnTheSamePort() async throws {
        try await withHTTPDNS { httpdns in
            let moves = NIOLockedValueBox<[(Int, Int)]>([])
            httpdns.onLoopbackProxyMoved { from, to in moves.withLockedValue { $0.append((from, to)) } }
            let first = try await httpdns.loopbackProxy()
            let port = first.port
            // In the foreground: the close notice starts it again at once, on the same port.
            await first.closeListener()
            try await eventually("the proxy listens again") { (try httpdns.proxyKeeper()).current != nil }
            let again = try await httpdns.loopbackProxy()
            #expect(again !== first)
            #expect(cameBack(on: port, as: again, moves: moves))
            #expect(again.isListening)
        }
    }

    @Test func aListenerLostInTheBackgroundStartsAgainInTheForeground() async throws {
        try await withHTTPDNS { httpdns in
            let moves = NIOLockedValueBox<[(Int, Int)]>([])
            httpdns.onLoopbackProxyMoved { from, to in moves.withLockedValue { $0.append((from, to)) } }
            let first = try await httpdns.loopbackProxy()
            let port = first.port
            httpdns.applicationDidEnterBackground()
            await first.closeListener()
            try await first.listenerClosed.get()
            // Suspended apps start nothing: the proxy waits for the foreground.
            #expect((try httpdns.proxyKeeper()).current == nil)
            await httpdns.applicationWillEnterForeground()
            let again = try #require((try httpdns.proxyKeeper()).current)
            #expect(cameBack(on: port, as: again, moves: moves))
            #expect(try await httpdns.loopbackProxy() === again)
        }
    }

    @Test func aTakenPortMovesTheProxyAndTheMoveIsReported() async throws {
        // The proxy's port is free while the app is away, so a test running beside this one may take it
        // before the squatter does (EADDRINUSE in 1 of 3 plain `swift test` runs): then the scenario runs
        // again on a new instance, up to 20 times, so the squatter always holds the port itself.
        var squatted = false
        for _ in 0..<20 where !squatted {
            squatted = try await takenPortScenario()
        }
        #expect(squatted, "another process held the proxy's freed port in 20 tries out of 20")
    }

    /// One run of the taken-port scenario; false when the freed port was gone before the squatter
    /// could take it (nothing checked).
    private func takenPortScenario() async throws -> Bool {
        var squatted = false
        try await withHTTPDNS { httpdns in
            let moves = NIOLockedValueBox<[(Int, Int)]>([])
            httpdns.onLoopbackProxyMoved { from, to in moves.withLockedValue { $0.append((from, to)) } }
            // An owner configured again (a web view's data store) keeps one handler, the last one.
            let owner = NSObject()
            let ownerMoves = NIOLockedValueBox(0)
            for _ in 0..<5 {
                (try httpdns.proxyKeeper()).onMove(for: ObjectIdentifier(owner)) { _, _ in
                    ownerMoves.withLockedValue { $0 += 1 }
                }
            }
            #expect((try httpdns.proxyKeeper()).moveHandlerCount == 2)
            let first = try await httpdns.loopbackProxy()
            let port = first.port
            httpdns.applicationDidEnterBackground()
            await first.closeListener()
            try await first.listenerClosed.get()
            // Another listener takes the port while the app is away.
            let squatter: any Channel
            do {
                squatter = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .bind(host: "127.0.0.1", port: port).get()
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                return
            }
            squatted = true
            await httpdns.applicationWillEnterForeground()
            let moved = try #require((try httpdns.proxyKeeper()).current)
            #expect(moved.port != port)
            let reported = moves.withLockedValue { $0 }
            #expect(reported.count == 1)
            #expect(reported.first?.0 == port)
            #expect(reported.first?.1 == moved.port)
            #expect(ownerMoves.withLockedValue { $0 } == 1)
            try await squatter.close()
        }
        return squatted
    }

    @Test func afterShutdownTheProxyIsNotStartedAgain() async throws {
        let dns = try await startDNS(["127.0.0.1"])
        let httpdns = try HTTPDNS(resolvers: ["dns:127.0.0.1:\(dns.port)"], only: ["*.test"])
        let proxy = try await httpdns.loopbackProxy()
        await httpdns.shutdown()
        #expect(!proxy.isListening)
        await #expect(throws: (any Error).self) { try await httpdns.loopbackProxy() }
        await dns.stop()
    }

    @Test func theURLProtocolRouteEnablesAndTheAppleOnlyRoutesSaySoHere() async throws {
        try await withHTTPDNS { httpdns in
            let configuration = URLSessionConfiguration.ephemeral
            try await httpdns.configure(configuration, via: .urlProtocol)
            #expect(configuration.protocolClasses?.first is HTTPDNSURLProtocol.Type)
            // What the proxy route does first on Apple platforms: the URLProtocol goes.
            configuration.disableHTTPDNS()
            #expect(configuration.protocolClasses?.contains { $0 is HTTPDNSURLProtocol.Type } == false)
            // A configuration with a proxy of its own is left to it.
            let proxied = URLSessionConfiguration.ephemeral
            proxied.connectionProxyDictionary = ["HTTPEnable": 1, "HTTPProxy": "127.0.0.1", "HTTPPort": 3128]
            try await httpdns.configure(proxied, via: .urlProtocol)
            #expect(proxied.protocolClasses?.contains { $0 is HTTPDNSURLProtocol.Type } != true)
            #if !canImport(Darwin)
                await #expect(throws: HTTPDNSConfigurationError(.unavailableOnPlatform, "")) {
                    try await httpdns.configure(URLSessionConfiguration.ephemeral, via: .proxy)
                }
                #expect(throws: HTTPDNSConfigurationError(.unavailableOnPlatform, "")) {
                    try httpdns.enableSystemEncryptedDNS(
                        EncryptedDNSSettings(url: URL(string: "https://127.0.0.1/dns-query"))
                    )
                }
            #endif
        }
    }
}
