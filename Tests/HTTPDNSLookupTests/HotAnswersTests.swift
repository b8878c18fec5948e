// The resolver's hot memo and its providers' time shares, as values: time is a number the test picks.

@testable import HTTPDNSLookup
import HTTPDNSCore
import Testing

@Suite struct HotAnswersTests {
    static let second: Int64 = 1_000_000_000
    static let t0: Int64 = 1_700_000_000 * second

    func answer(_ name: String = "a.test", ttl: UInt32 = 60) -> Resolution {
        Resolution(
            name: name,
            ipv4: [IPAddress("192.0.2.1")!],
            ipv6: [],
            ttl: ttl,
            source: .cache("doh"),
            elapsed: .zero
        )
    }

    /// Remembers `name`'s answer at t0, `left` before it expires, served as it is until `until`.
    func remember(
        _ memo: inout HotAnswers,
        _ name: String = "a.test",
        _ query: AddressQuery = .ipv4,
        left: Int64 = 60 * HotAnswersTests.second,
        until: Int64 = .max
    ) {
        memo.remember(name, query, answer(name), now: Self.t0, servedAsIsUntil: until, expiresAt: Self.t0 + left)
    }

    @Test func anAnswerIsServedForTheWindowAtMostThenTheCacheSeesTheNameAgain() throws {
        var memo = HotAnswers(capacity: 10)
        // 1.5 s left: the TTL served stays 1 to the end, so only the window ends the entry.
        remember(&memo, left: 3 * Self.second / 2)
        #expect(memo.entry("a.test", .ipv4, now: Self.t0 + HotAnswers.window - 1) != nil)
        #expect(memo.entry("a.test", .ipv4, now: Self.t0 + HotAnswers.window) == nil)
    }

    @Test func anAnswerIsNotServedPastThePointWhereTheCacheWouldRefreshIt() {
        var memo = HotAnswers(capacity: 10)
        let prefetch = Self.t0 + Self.second / 4
        remember(&memo, left: 60 * Self.second + Self.second / 2, until: prefetch)
        #expect(memo.entry("a.test", .ipv4, now: prefetch - 1) != nil)
        #expect(memo.entry("a.test", .ipv4, now: prefetch) == nil)
    }

    @Test func theTTLServedIsTheTimeLeftAndAnotherQueryShapeIsAMiss() throws {
        var memo = HotAnswers(capacity: 10)
        // 30.5 s left: TTL 30, which reads 29 once 0.5 s more have passed, so the entry ends there.
        remember(&memo, left: 30 * Self.second + Self.second / 2)
        let entry = try #require(memo.entry("a.test", .ipv4, now: Self.t0 + Self.second / 2))
        #expect(entry.resolution.ttl == 30)
        #expect(entry.resolution.elapsed == .zero)
        #expect(memo.entry("a.test", .ipv4, now: Self.t0 + Self.second / 2 + 1) == nil)
        // Never 0 while served: a TTL of 0 means "do not cache" to whoever reads it.
        remember(&memo, "b.test", left: Self.second / 2)
        #expect(memo.entry("b.test", .ipv4, now: Self.t0 + Self.second / 4)?.resolution.ttl == 1)
        #expect(memo.entry("a.test", .both, now: Self.t0) == nil)
        #expect(memo.entry("c.test", .ipv4, now: Self.t0) == nil)
    }

    /// Names whose hashes share their low 6 bits, found by trying names under a fixed key: their probes
    /// start at the same slot in any table of up to 64 slots.
    func colliding(_ hasher: NameHash, count: Int) -> [String] {
        var byHome: [UInt64: [String]] = [:]
        for i in 0... {
            let name = "n\(i).test"
            byHome[hasher.hash(name) & 63, default: []].append(name)
            if let found = byHome.values.first(where: { $0.count == count }) { return found }
        }
        return []
    }

    @Test func namesThatCollideAreAllFoundAndForgettingOneKeepsTheOthersReachable() {
        var memo = HotAnswers(capacity: 8, hasher: NameHash(key: 42))
        let names = colliding(NameHash(key: 42), count: 4)
        for name in names {
            remember(&memo, name)
        }
        #expect(names.allSatisfy { memo.entry($0, .ipv4, now: Self.t0)?.resolution.name == $0 })
        // The first of the run goes: the others move back and stay reachable.
        memo.forget(names[0])
        memo.forget(names[2])
        #expect(memo.entry(names[0], .ipv4, now: Self.t0) == nil)
        #expect(memo.entry(names[2], .ipv4, now: Self.t0) == nil)
        #expect(memo.entry(names[1], .ipv4, now: Self.t0)?.resolution.name == names[1])
        #expect(memo.entry(names[3], .ipv4, now: Self.t0)?.resolution.name == names[3])
        #expect(memo.count == 2)
    }

    @Test func aNameWhoseProbeIsTooLongIsNotKept() {
        // 9 names: the table has grown from 16 to 32 slots by the last, and they still collide.
        var memo = HotAnswers(capacity: 64, hasher: NameHash(key: 7))
        let names = colliding(NameHash(key: 7), count: HotAnswers.maxProbes + 1)
        for name in names {
            remember(&memo, name)
        }
        #expect(names.dropLast().allSatisfy { memo.entry($0, .ipv4, now: Self.t0) != nil })
        // The cache answers it instead; nobody waits on a longer probe.
        #expect(memo.entry(names.last!, .ipv4, now: Self.t0) == nil)
        #expect(memo.count == HotAnswers.maxProbes)
    }

    @Test func manyNamesRememberedAndHalfForgottenLeaveExactlyTheOtherHalf() {
        var memo = HotAnswers(capacity: 300, hasher: NameHash(key: 3))
        let names = (0..<300).map { "host-\($0).example.com" }
        for name in names {
            remember(&memo, name, .both)
        }
        let kept = names.filter { memo.entry($0, .both, now: Self.t0) != nil }
        // At most half full, a probe of eight keeps nearly every name.
        #expect(kept.count > 290)
        for (i, name) in kept.enumerated() where i % 2 == 0 { memo.forget(name) }
        for (i, name) in kept.enumerated() {
            #expect((memo.entry(name, .both, now: Self.t0) != nil) == (i % 2 == 1), "\(name)")
        }
        #expect(memo.count == kept.count / 2)
    }

    @Test func theHashReadsTheBytesWhateverTheStringIsMadeOf() {
        let hash = NameHash(key: 1)
        let long = "a-rather-long-name.example.com"
        // A small string, a heap string and one cut from a larger one: the same bytes, the same hash.
        #expect(hash.hash("a.test") == hash.hash(String("xa.test".dropFirst())))
        #expect(hash.hash(long) == hash.hash(String("." + long).dropFirst().description))
        // Every length up to 24 bytes, and one byte changed anywhere, gives another hash here.
        let names = (0...24).map { String(repeating: "a", count: $0) }
        #expect(Set(names.map(hash.hash)).count == names.count)
        let changed = long.indices.map { i in
            var bytes = Array(long.utf8)
            bytes[long.utf8.distance(from: long.startIndex, to: i)] ^= 1
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(Set(changed.map(hash.hash)).count == changed.count)
        #expect(!changed.map(hash.hash).contains(hash.hash(long)))
        #expect(NameHash(key: 2).hash(long) != hash.hash(long))
    }

    @Test func forgettingAndTheCapacityBoundDropAnswers() {
        var memo = HotAnswers(capacity: 2)
        for name in ["a.test", "b.test"] {
            remember(&memo, name, left: Self.second)
        }
        memo.forget("a.test")
        #expect(memo.entry("a.test", .ipv4, now: Self.t0) == nil)
        #expect(memo.count == 1)
        remember(&memo, "c.test", left: Self.second)
        remember(&memo, "d.test", left: Self.second)
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

@Suite struct ResolutionStorageTests {
    @Test func aCopyChangedLeavesTheOriginalAsItWasAndEqualityReadsTheFields() {
        let original = Resolution(
            name: "a.test",
            ipv4: [IPAddress("192.0.2.1")!],
            ipv6: [],
            ttl: 60,
            source: .cache("doh"),
            elapsed: .zero
        )
        var copy = original
        #expect(copy == original)
        copy.ttl = 59
        copy.ipv6 = [IPAddress("2001:db8::1")!]
        #expect(original.ttl == 60 && original.ipv6.isEmpty)
        #expect(copy.ttl == 59 && copy.ipv6.count == 1 && copy.name == "a.test")
        #expect(copy != original)
        // Built apart with the same fields: equal, and hashed alike.
        var again = copy
        again.ttl = 60
        again.ipv6 = []
        #expect(again == original)
        #expect(again.hashValue == original.hashValue)
        #expect(Set([original, again, copy]).count == 2)
    }
}
