// A connection made to a stale answer's address while its refresh runs (serve-expired, pre-connect at
// launch) is retired when the refresh gives other addresses: the next request goes to the new one.
// Hermetic: a classic DNS server whose answer the test changes, our service listening on two loopback
// addresses, and a clock the test moves.

@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import Testing

@Suite struct StaleConnectionTests {
    @Test func aConnectionToAStaleAddressIsRetiredWhenTheRefreshMovesTheAnswer() async throws {
        // The server keeps an idle connection far longer than the test runs: only the retirement closes it.
        // The same port on another loopback address: where the record moves to.
        let (old, new) = try await onOnePort(
            { port in
                try await startService {
                    $0.listen = [("127.0.0.1", port)]
                    $0.limits.requestTimeout = .seconds(600)
                    $0.limits.idleTimeout = .seconds(600)
                }
            },
            port: { $0.ports[0] },
            { port in try await startService { $0.listen = [("127.0.0.2", port)] } },
            release: { await $0.stop() }
        )
        let port = old.ports[0]
        let answer = NIOLockedValueBox([IPAddress("127.0.0.1")!])
        let dns = try await DNSServer.start { _, _ in
            DNSServer.Answer(addresses: answer.withLockedValue { $0 }, ttl: 10)
        }
        let clock = ManualClock()
        let resolver = makeResolver([try do53(dns)], clock: clock) { $0.cache.serveExpired = .seconds(3600) }
        let engine = try HTTPEngine(addressSource: resolver, path: resolver.path)
        let url = try HTTPURL("http://moved.test:\(port)/healthz")

        // The answer the app had (a persisted one, at launch), now expired; the record has moved.
        _ = try await resolver.resolve("moved.test", .ipv4)
        clock.advance(.seconds(11))
        answer.withLockedValue { $0 = [IPAddress("127.0.0.2")!] }

        // The pre-connect uses the stale address at once; its refresh runs meanwhile.
        try await engine.preconnect(url)
        await resolver.waitForBackgroundWork()
        // The refresh gave another address: the stale connection is retired, and closes (it is idle).
        try await eventually("the stale connection closed", within: .seconds(60)) { engine.openConnections == 0 }
        let response = try await engine.execute(HTTPEngineRequest(url: url))
        _ = try await response.body.collect(upTo: 1 << 16)
        #expect(response.status == .ok)
        #expect(response.metrics.ip == "127.0.0.2")
        #expect(!response.metrics.reused)

        engine.shutdown()
        await dns.stop()
        await old.stop()
        await new.stop()
    }
}
