import Testing
@testable import HTTPDNSCore
@testable import HTTPDNSLookup

@Suite struct DNSCacheTests {
    let key = CacheKey(network: "wifi-1", name: "a.test", family: .ipv4)
    let ips = [IPAddress("192.0.2.1")!]
    let t0 = Timestamp.seconds(1_000_000)

    func cache(_ tweak: (inout CacheConfiguration) -> Void = { _ in }) -> DNSCache {
        var c = CacheConfiguration()
        c.minTTL = 1
        c.serveExpired = .seconds(30)
        tweak(&c)
        return DNSCache(configuration: c)
    }

    @Test func freshThenPrefetchAt75PercentOnce() {
        var c = cache()
        c.store(key, addresses: ips, ttl: 100, source: "p", now: t0)
        guard case .fresh(_, _, false) = c.lookup(key, now: t0 + .seconds(74)) else {
            Issue.record("expected plain hit"); return
        }
        guard case .fresh(_, let left, true) = c.lookup(key, now: t0 + .seconds(75)) else {
            Issue.record("expected prefetch"); return
        }
        #expect(left == .seconds(25))
        // The refresh is running: nobody else is told to start one.
        guard case .fresh(_, _, false) = c.lookup(key, now: t0 + .seconds(80)) else {
            Issue.record("expected no second prefetch"); return
        }
    }

    @Test func staleWithinMaxStaleStartsExactlyOneRefresh() {
        var c = cache()
        c.store(key, addresses: ips, ttl: 10, source: "p", now: t0)
        guard case .stale(_, true) = c.lookup(key, now: t0 + .seconds(11)) else {
            Issue.record("expected stale + refresh"); return
        }
        guard case .stale(_, false) = c.lookup(key, now: t0 + .seconds(12)) else {
            Issue.record("expected stale only"); return
        }
        c.refreshFailed(key)
        guard case .stale(_, true) = c.lookup(key, now: t0 + .seconds(13)) else {
            Issue.record("a failed refresh may be retried"); return
        }
    }

    @Test func staleIsBoundedByMaxStale() {
        var c = cache()
        c.store(key, addresses: ips, ttl: 10, source: "p", now: t0)
        #expect(c.lookup(key, now: t0 + .seconds(40)) == .miss)
        #expect(c.count == 0)
    }

    @Test func ttlIsClamped() {
        var c = cache {
            $0.minTTL = 30
            $0.maxTTL = 600
        }
        #expect(c.store(key, addresses: ips, ttl: 0, source: "p", now: t0).ttl == 30)
        #expect(c.store(key, addresses: ips, ttl: 86400, source: "p", now: t0).ttl == 600)
        #expect(c.store(key, addresses: ips, ttl: nil, source: "p", now: t0).ttl == 30)
    }

    @Test func negativeAnswersExpireAndAreNeverStale() {
        var c = cache { $0.negativeTTL = 5 }
        let e = c.store(key, addresses: [], ttl: 3600, source: "p", now: t0)
        #expect(e.ttl == 5)
        guard case .fresh(let hit, _, false) = c.lookup(key, now: t0 + .seconds(4)) else {
            Issue.record("expected negative hit"); return
        }
        #expect(hit.isNegative)
        #expect(c.lookup(key, now: t0 + .seconds(6)) == .miss)
    }

    @Test func networksDoNotShareAnswers() {
        var c = cache()
        c.store(key, addresses: ips, ttl: 100, source: "p", now: t0)
        #expect(c.lookup(CacheKey(network: "cellular", name: "a.test", family: .ipv4), now: t0) == .miss)
        #expect(c.lookup(CacheKey(network: "wifi-1", name: "A.TEST.", family: .ipv4), now: t0) != .miss)
    }

    @Test func capacityEvictsTheLeastRecentlyUsed() {
        var c = cache { $0.capacity = 2 }
        let k2 = CacheKey(network: "n", name: "b.test", family: .ipv4)
        let k3 = CacheKey(network: "n", name: "c.test", family: .ipv4)
        c.store(key, addresses: ips, ttl: 100, source: "p", now: t0)
        c.store(k2, addresses: ips, ttl: 100, source: "p", now: t0 + .seconds(1))
        _ = c.lookup(key, now: t0 + .seconds(2))  // key is now more recent than k2
        c.store(k3, addresses: ips, ttl: 100, source: "p", now: t0 + .seconds(3))
        #expect(c.count == 2)
        #expect(c.lookup(k2, now: t0 + .seconds(3)) == .miss)
        #expect(c.lookup(key, now: t0 + .seconds(3)) != .miss)
    }

    @Test func snapshotRestoresOnlyLiveEntries() {
        var c = cache()
        let k2 = CacheKey(network: "n", name: "old.test", family: .ipv6)
        c.store(key, addresses: ips, ttl: 100, source: "p", now: t0)
        c.store(k2, addresses: [IPAddress("::1")!], ttl: 10, source: "p", now: t0)
        let snap = c.snapshot(now: t0 + .seconds(5))
        #expect(snap.entries.count == 2)
        var restored = cache()
        restored.restore(snap, now: t0 + .seconds(50))  // k2 is past expiry + serveExpired (10 + 30)
        #expect(restored.count == 1)
        guard case .fresh(let e, let left, _) = restored.lookup(key, now: t0 + .seconds(50)) else {
            Issue.record("expected restored entry"); return
        }
        #expect(e.addresses == ips)
        #expect(left == .seconds(50))
    }

    @Test func aTTLOverrideReplacesTheServicesTTLAndTheClamps() {
        var c = cache {
            $0.maxTTL = 600
            $0.ttlOverrides = ["a.test": 5, "*.test": 7200, "*.b.test": 40]
        }
        #expect(c.store(key, addresses: ips, ttl: 300, source: "p", now: t0).ttl == 5)  // exact wins
        let other = CacheKey(network: "wifi-1", name: "other.test", family: .ipv4)
        #expect(c.store(other, addresses: ips, ttl: 300, source: "p", now: t0).ttl == 7200)  // past maxTTL
        let deeper = CacheKey(network: "wifi-1", name: "x.b.test", family: .ipv4)
        #expect(c.store(deeper, addresses: ips, ttl: 300, source: "p", now: t0).ttl == 40)  // longer wildcard
        let elsewhere = CacheKey(network: "wifi-1", name: "a.example", family: .ipv4)
        #expect(c.store(elsewhere, addresses: ips, ttl: 3000, source: "p", now: t0).ttl == 600)  // clamped
        // Negative answers keep the negative TTL.
        #expect(c.store(other, addresses: [], ttl: nil, source: "p", now: t0).ttl == 30)
    }

    @Test func serveExpiredForHoursServesAndPersistsTheAnswerPerNetwork() {
        var c = cache { $0.serveExpired = .seconds(7200) }
        let elsewhere = CacheKey(network: "cell", name: "a.test", family: .ipv4)
        c.store(key, addresses: ips, ttl: 60, source: "p", now: t0)
        c.store(elsewhere, addresses: [IPAddress("192.0.2.9")!], ttl: 60, source: "p", now: t0)
        let snap = c.snapshot(now: t0 + .seconds(3600))
        #expect(snap.entries.count == 2)
        var relaunched = cache { $0.serveExpired = .seconds(7200) }
        relaunched.restore(snap, now: t0 + .seconds(3600))
        guard case .stale(let e, true) = relaunched.lookup(key, now: t0 + .seconds(3600)) else {
            Issue.record("expected the expired answer, with the one refresh"); return
        }
        #expect(e.addresses == ips)
        guard case .stale(let other, true) = relaunched.lookup(elsewhere, now: t0 + .seconds(3601)) else {
            Issue.record("expected the other network's own answer, with its own refresh"); return
        }
        #expect(other.addresses == [IPAddress("192.0.2.9")!])
        // Past TTL + the window: gone, and not persisted.
        #expect(relaunched.lookup(key, now: t0 + .seconds(60 + 7200)) == .miss)
        #expect(c.snapshot(now: t0 + .seconds(60 + 7200)).entries.isEmpty)
        // The default 60 s grace would have loaded nothing an hour later.
        var short = cache { $0.serveExpired = .seconds(60) }
        short.restore(snap, now: t0 + .seconds(3600))
        #expect(short.count == 0)
    }

    @Test func aServeExpiredWindowOfZeroNeverServesAnExpiredAnswer() {
        var c = cache { $0.serveExpired = .zero }
        c.store(key, addresses: ips, ttl: 10, source: "p", now: t0)
        #expect(c.lookup(key, now: t0 + .seconds(10)) == .miss)
    }

    @Test func unusableCacheSettingsSayWhy() {
        func problem(_ tweak: (inout CacheConfiguration) -> Void) -> String? {
            var c = CacheConfiguration()
            tweak(&c)
            return c.problem
        }
        #expect(problem { _ in } == nil)
        #expect(
            problem {
                $0.minTTL = 100; $0.maxTTL = 10
            }?.contains("above maxTTL") == true
        )
        #expect(problem { $0.serveExpired = .seconds(8 * 24 * 3600) }?.contains("0 to 7 days") == true)
        #expect(problem { $0.serveExpired = .seconds(-1) }?.contains("0 to 7 days") == true)
        #expect(problem { $0.ttlOverrides = ["a*b.test": 5] }?.contains("a*b.test") == true)
        #expect(problem { $0.ttlOverrides = ["a.test": 0] }?.contains("TTL of 0") == true)
        #expect(problem { $0.prefetchFraction = 0 }?.contains("prefetchFraction 0.0 is outside (0, 1]") == true)
        #expect(problem { $0.prefetchFraction = 1.5 }?.contains("outside (0, 1]") == true)
        #expect(problem { $0.prefetchFraction = .nan }?.contains("outside (0, 1]") == true)
        #expect(problem { $0.prefetchFraction = 1 } == nil)
        #expect(problem { $0.capacity = 0 }?.contains("capacity 0 keeps no name") == true)
        #expect(problem { $0.negativeTTL = 0 } == nil)
    }
}

@Suite struct ProviderHealthTests {
    @Test func failingProvidersGoLastWithGrowingBackoff() {
        var h = ProviderHealth()
        let t0 = Timestamp.seconds(100)
        #expect(h.order(count: 3, now: t0) == [0, 1, 2])
        h.failed(0, now: t0)
        #expect(h.order(count: 3, now: t0 + .milliseconds(500)) == [1, 2, 0])
        #expect(h.order(count: 3, now: t0 + .seconds(2)) == [0, 1, 2])  // 1 s back-off over
        h.failed(0, now: t0 + .seconds(2))
        #expect(h.isDown(0, now: t0 + .seconds(3)))  // 2 s now
        #expect(!h.isDown(0, now: t0 + .seconds(4)))
        h.succeeded(0)
        #expect(!h.isDown(0, now: t0 + .seconds(2)))
    }
}
