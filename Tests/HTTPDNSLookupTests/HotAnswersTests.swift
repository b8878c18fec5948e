// The resolver's hot memo and its providers' time shares, as values: time is a number the test picks.

@testable import HTTPDNSLookup
import HTTPDNSCore
import Testing

@Suite struct HotAnswersTests {
    static let second: Int64 = 1_000_000_000
    static let t0: Int64 = 1_700_000_000 * second

    func answer(_ name: String = "a.test", ttl: UInt32 = 60) -> Resolution {
        Resolution(name: name, ipv4: [IPAddress("192.0.2.1")!], ipv6: [], ttl: ttl, source: .cache("doh"), elapsed: .zero)
    }

    @Test func anAnswerIsServedForTheWindowAtMostThenTheCacheSeesTheNameAgain() throws {
        var memo = HotAnswers(capacity: 10)
        memo.remember("a.test", .ipv4, answer(), now: Self.t0, servedAsIsUntil: .max, expiresAt: Self.t0 + 60 * Self.second)
        #expect(memo.entry("a.test", .ipv4, now: Self.t0 + Self.second / 2) != nil)
        #expect(memo.entry("a.test", .ipv4, now: Self.t0 + HotAnswers.window) == nil)
    }

    @Test func anAnswerIsNotServedPastThePointWhereTheCacheWouldRefreshIt() {
        var memo = HotAnswers(capacity: 10)
        let prefetch = Self.t0 + Self.second / 4
        memo.remember("a.test", .ipv4, answer(), now: Self.t0, servedAsIsUntil: prefetch, expiresAt: Self.t0 + 60 * Self.second)
        #expect(memo.entry("a.test", .ipv4, now: prefetch - 1) != nil)
        #expect(memo.entry("a.test", .ipv4, now: prefetch) == nil)
    }

    @Test func theTTLServedIsTheTimeLeftAndAnotherQueryShapeIsAMiss() throws {
        var memo = HotAnswers(capacity: 10)
        memo.remember("a.test", .ipv4, answer(), now: Self.t0, servedAsIsUntil: .max, expiresAt: Self.t0 + 30 * Self.second)
        let entry = try #require(memo.entry("a.test", .ipv4, now: Self.t0 + Self.second / 2))
        #expect(entry.resolution(at: Self.t0 + Self.second / 2).ttl == 29)
        // Never 0 while served: a TTL of 0 means "do not cache" to whoever reads it.
        #expect(entry.resolution(at: Self.t0 + 30 * Self.second).ttl == 1)
        #expect(memo.entry("a.test", .both, now: Self.t0) == nil)
        #expect(memo.entry("b.test", .ipv4, now: Self.t0) == nil)
    }

    @Test func forgettingAndTheCapacityBoundDropAnswers() {
        var memo = HotAnswers(capacity: 2)
        for name in ["a.test", "b.test"] {
            memo.remember(name, .ipv4, answer(name), now: Self.t0, servedAsIsUntil: .max, expiresAt: Self.t0 + Self.second)
        }
        memo.forget("a.test")
        #expect(memo.entry("a.test", .ipv4, now: Self.t0) == nil)
        #expect(memo.count == 1)
        memo.remember("c.test", .ipv4, answer("c.test"), now: Self.t0, servedAsIsUntil: .max, expiresAt: Self.t0 + Self.second)
        memo.remember("d.test", .ipv4, answer("d.test"), now: Self.t0, servedAsIsUntil: .max, expiresAt: Self.t0 + Self.second)
        // Full at 2: the memo started again rather than grow.
        #expect(memo.count == 1)
        #expect(memo.entry("d.test", .ipv4, now: Self.t0) != nil)
        memo.removeAll()
        #expect(memo.count == 0)
    }
}

@Suite struct QueryBudgetTests {
    @Test func eachProviderGetsAnEqualPartOfWhatIsLeftWithOneKeptForLocalDNS() {
        let withFallback = QueryBudget(reserveForFallback: true)
        // 3 s, two providers and LocalDNS after them: 1 s each.
        #expect(withFallback.share(of: 3_000, position: 0, of: 2) == 1_000)
        // The first answered fast (2.9 s left): the second gets half, LocalDNS keeps the other half.
        #expect(withFallback.share(of: 2_900, position: 1, of: 2) == 1_450)
        let strict = QueryBudget(reserveForFallback: false)
        #expect(strict.share(of: 3_000, position: 0, of: 2) == 1_500)
        #expect(strict.share(of: 3_000, position: 1, of: 2) == 3_000)
    }

    @Test func localDNSGetsAtLeastOnePartOfTheTimeoutAfterEveryProviderFailed() {
        #expect(QueryBudget.fallbackShare(timeout: 5_000, providers: 4) == 1_000)
        #expect(QueryBudget.fallbackShare(timeout: 5_000, providers: 0) == 5_000)
    }
}
