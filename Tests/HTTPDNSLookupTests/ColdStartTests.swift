// Serve-expired for cold start: an app relaunched an hour after its last run connects at
// once to the last good answer from its cache file, and one refresh runs behind it. Time is an injected
// clock; the upstream is an in-process provider that counts its queries (round trips).

@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
import Foundation
import HTTPDNSCore
import Testing

@Suite struct ColdStartTests {
    let name = "app.example.com"

    /// A resolver as an app makes one: a cache file, its own network name, `window` of serve-expired.
    func app(_ provider: FixedProvider, _ clock: ManualClock, _ path: String, window: Duration) -> HTTPDNSResolver {
        makeResolver([provider], clock: clock) {
            $0.persistencePath = path
            $0.network.networkID = "wifi-home"
            $0.cache.serveExpired = window
            $0.fallbackToLocalDNS = false
            // Not a test of timeouts (a failing provider fails at once): a bound a starved machine
            // cannot miss.
            $0.timeout = .seconds(60)
        }
    }

    @Test func aRelaunchAnHourLaterAnswersAtOnceFromTheFileAndRefreshesOnce() async throws {
        let path = CachePersistenceTests.temporaryPath("cold")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let clock = ManualClock()
        let yesterday = FixedProvider(["93.184.216.60"], ttl: 60)
        let first = app(yesterday, clock, path, window: .seconds(86_400))
        _ = try await first.resolve(name, .ipv4)
        try first.persist()

        clock.advance(.seconds(3600))
        let today = FixedProvider(["93.184.216.61"], ttl: 60)
        let relaunched = app(today, clock, path, window: .seconds(86_400))
        let answer = try await relaunched.resolve(name, .ipv4)
        // The last good answer, with no round trip before it: the refresh starts behind it.
        #expect(answer.ipv4 == [IPAddress("93.184.216.60")!])
        #expect(answer.source == .stale("fixed"))
        #expect(answer.expiredFor == .seconds(3600 - 60))
        for _ in 0..<20 { _ = try await relaunched.resolve(name, .ipv4) }
        await relaunched.waitForBackgroundWork()
        #expect(today.calls == 1, "exactly one refresh")
        // The refreshed answer replaces it.
        let refreshed = try await relaunched.resolve(name, .ipv4)
        #expect(refreshed.ipv4 == [IPAddress("93.184.216.61")!])
        #expect(refreshed.source == .cache("fixed"))
        #expect(refreshed.expiredFor == nil)
    }

    @Test func withoutTheWindowTheSameRelaunchWaitsForARoundTrip() async throws {
        let path = CachePersistenceTests.temporaryPath("cold-off")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let clock = ManualClock()
        let first = app(FixedProvider(["93.184.216.62"], ttl: 60), clock, path, window: .seconds(86_400))
        _ = try await first.resolve(name, .ipv4)
        try first.persist()
        clock.advance(.seconds(3600))
        let today = FixedProvider(["93.184.216.63"], ttl: 60)
        // The default grace of 60 s: an hour-old answer is not loaded, the lookup waits for HTTPDNS.
        let relaunched = app(today, clock, path, window: .seconds(60))
        let answer = try await relaunched.resolve(name, .ipv4)
        #expect(answer.ipv4 == [IPAddress("93.184.216.63")!])
        #expect(answer.source == .httpdns("fixed"))
        #expect(today.calls == 1)
    }

    @Test func aFailedRefreshLeavesTheExpiredAnswerUntilTheWindowEnds() async throws {
        let path = CachePersistenceTests.temporaryPath("cold-fail")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let clock = ManualClock()
        let provider = FixedProvider(["93.184.216.64"], ttl: 60)
        let resolver = app(provider, clock, path, window: .seconds(7200))
        _ = try await resolver.resolve(name, .ipv4)
        provider.setFailing(true)
        clock.advance(.seconds(3600))
        #expect(try await resolver.resolve(name, .ipv4).source == .stale("fixed"))
        await resolver.waitForBackgroundWork()  // the refresh failed
        #expect(provider.calls == 2)
        let again = try await resolver.resolve(name, .ipv4)
        #expect(again.ipv4 == [IPAddress("93.184.216.64")!])
        #expect(again.source == .stale("fixed"))
        await resolver.waitForBackgroundWork()
        clock.advance(.seconds(3661))  // 7,261 s after storing: TTL (60) + window (7,200) passed
        await #expect(throws: ResolverError.self) { try await resolver.resolve(name, .ipv4) }
    }

    @Test func clearingOneNameForgetsItOnEveryNetwork() async throws {
        let provider = FixedProvider(["93.184.216.65"])
        let resolver = makeResolver([provider])
        _ = try await resolver.resolve(name, .ipv4)
        _ = try await resolver.resolve("other.example.com", .ipv4)
        resolver.clearCache("APP.example.com.")
        #expect(try await resolver.resolve(name, .ipv4).source == .httpdns("fixed"))
        #expect(try await resolver.resolve("other.example.com", .ipv4).source == .cache("fixed"))
        #expect(provider.calls == 3)
    }
}
