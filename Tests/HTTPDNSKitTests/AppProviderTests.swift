// A resolver the app brings (`HTTPDNSProvider`), through the front door: its answers are connected to,
// cached, and failed over like a built-in provider's.

import HTTPDNSKit
import NIOConcurrencyHelpers
import Testing
@testable import HTTPDNSTestSupport

@Suite struct AppProviderTests {
    /// Answers from a table (each family from its own addresses) and counts what it was asked.
    struct TableProvider: HTTPDNSProvider {
        var name = "table"
        let table: [String: [IPAddress]]
        let asked = NIOLockedValueBox<[String]>([])

        struct NotFound: Error {}

        func resolve(_ name: String, family: AddressFamily, deadline: ContinuousClock.Instant) async throws
            -> HTTPDNSProviderAnswer
        {
            asked.withLockedValue { $0.append("\(name) \(family.rawValue)") }
            guard let found = table[name] else { throw NotFound() }
            return HTTPDNSProviderAnswer(addresses: found.filter { $0.isIPv6 == (family == .ipv6) }, ttl: .seconds(60))
        }
    }

    /// Never answers: it throws.
    struct DownProvider: HTTPDNSProvider {
        let name = "down"
        struct Down: Error {}
        func resolve(_ name: String, family: AddressFamily, deadline: ContinuousClock.Instant) async throws
            -> HTTPDNSProviderAnswer
        { throw Down() }
    }

    /// Answers only when cancelled: it reports the cancellation through `cancelled`.
    struct HangingProvider: HTTPDNSProvider {
        let name = "hanging"
        let cancelled: AsyncStream<Void>.Continuation
        func resolve(_ name: String, family: AddressFamily, deadline: ContinuousClock.Instant) async throws
            -> HTTPDNSProviderAnswer
        {
            // Hangs (an hour) until the resolver gives up on it and cancels the call.
            do {
                try await Task.sleep(for: .seconds(3600))
            } catch {
                cancelled.yield()
                throw error
            }
            return HTTPDNSProviderAnswer(addresses: [])
        }
    }

    /// `lookupTimeout`: 60 s unless the test is about the deadline, a bound that plain `swift test` on a
    /// busy 2-core machine cannot miss (5 s was missed).
    func makeHTTPDNS(_ providers: [any HTTPDNSProvider], lookupTimeout: Duration = .seconds(60)) throws -> HTTPDNS {
        var configuration = HTTPDNS.Configuration(resolvers: [], policy: try HostPolicy(only: ["*.test"]))
        configuration.timeouts.lookup = lookupTimeout
        configuration.providers = providers
        configuration.fallbackToLocalDNS = false
        configuration.network.watchesChanges = false
        return try HTTPDNS(configuration)
    }

    @Test func aRequestGoesToTheAddressTheAppsProviderGave() async throws {
        let origin = try await HTTPFixtureServer.start { _, _, headers in
            (.ok, "text/plain", Array("host=\(headers.first(name: "host") ?? "")".utf8))
        }
        defer { Task { await origin.stop() } }
        let provider = TableProvider(table: ["app.test": [IPAddress("127.0.0.1")!]])
        let httpdns = try makeHTTPDNS([provider])
        do {
            let response = try await httpdns.engine.send(try HTTPEngineRequest(url: "http://APP.test:\(origin.port)/"))
            let body = try await response.body.collect(upTo: 1 << 16)
            #expect(String(buffer: body) == "host=app.test:\(origin.port)")
            #expect(response.metrics.dnsSource == .httpdns("table"))
            #expect(provider.asked.withLockedValue { $0 }.contains("app.test ipv4"))
        } catch {
            Issue.record(error)
        }
        await httpdns.shutdown()
    }

    @Test func itsAnswerIsCachedLikeABuiltInOne() async throws {
        let provider = TableProvider(table: ["app.test": [IPAddress("192.0.2.7")!]])
        let httpdns = try makeHTTPDNS([provider])
        let first = try await httpdns.resolver.resolve("app.test", .ipv4)
        let second = try await httpdns.resolver.resolve("app.test", .ipv4)
        #expect(first.ipv4 == [IPAddress("192.0.2.7")!])
        #expect(first.source == .httpdns("table"))
        #expect(second.source == .cache("table"))
        #expect(provider.asked.withLockedValue { $0 } == ["app.test ipv4"])
        await httpdns.shutdown()
    }

    @Test func aProviderThatFailsPassesTheNameToTheNext() async throws {
        let provider = TableProvider(table: ["app.test": [IPAddress("192.0.2.7")!]])
        let httpdns = try makeHTTPDNS([DownProvider(), provider])
        let resolution = try await httpdns.resolver.resolve("app.test", .ipv4)
        #expect(resolution.ipv4 == [IPAddress("192.0.2.7")!])
        #expect(resolution.source == .httpdns("table"))
        await httpdns.shutdown()
    }

    @Test func whenEveryProviderFailsTheErrorSaysSo() async throws {
        let httpdns = try makeHTTPDNS([DownProvider()])
        await #expect(throws: ResolverError.self) { _ = try await httpdns.resolver.resolve("app.test", .ipv4) }
        await httpdns.shutdown()
    }

    @Test func aProviderThatNeverAnswersIsCancelledAtTheLookupsDeadline() async throws {
        let (cancellations, cancelled) = AsyncStream<Void>.makeStream()
        let httpdns = try makeHTTPDNS([HangingProvider(cancelled: cancelled)], lookupTimeout: .milliseconds(200))
        await #expect(throws: ResolverError.self) { _ = try await httpdns.resolver.resolve("app.test", .ipv4) }
        // The provider's call was cancelled, not left running: wait for the event.
        var iterator = cancellations.makeAsyncIterator()
        #expect(await iterator.next() != nil)
        await httpdns.shutdown()
    }
}
