// HSTS (RFC 6797) as the engine and the URLSession route keep it: pure, on a set clock, and through the
// cache file a relaunch reads.

@testable import HTTPDNSCore
@testable import HTTPDNSLookup
import Testing

@Suite struct StrictTransportSecurityTests {
    static let now = Timestamp.seconds(1_700_000_000)

    @Test func aHostThatAskedIsUpgradedUntilItsMaxAgeRunsOut() {
        var sts = StrictTransportSecurity()
        do {
            let changed = sts.record("max-age=600; includeSubDomains", from: "Example.COM", now: Self.now)
            #expect(changed)
        }
        #expect(sts.upgrades("example.com", now: Self.now))
        #expect(sts.upgrades("api.example.com", now: Self.now))
        #expect(!sts.upgrades("example.com", now: Self.now + .seconds(601)))
        #expect(!sts.upgrades("other.test", now: Self.now))
        sts.record("max-age=600", from: "only.test", now: Self.now)
        #expect(sts.upgrades("only.test", now: Self.now) && !sts.upgrades("sub.only.test", now: Self.now))
        do {
            let changed = sts.record("max-age=0", from: "only.test", now: Self.now)
            #expect(changed)
        }
        #expect(!sts.upgrades("only.test", now: Self.now))
        // The same policy again within the second changes nothing to save.
        do {
            let changed = sts.record("max-age=600; includeSubDomains", from: "example.com", now: Self.now)
            #expect(!changed)
        }
    }

    @Test func malformedValuesIPLiteralsAndHugeAgesAreHandled() {
        var sts = StrictTransportSecurity()
        do {
            let changed = sts.record("includeSubDomains", from: "bad.test", now: Self.now)
            #expect(!changed)
        }
        do {
            let changed = sts.record("max-age=5; max-age=6", from: "bad.test", now: Self.now)
            #expect(!changed)
        }
        do {
            let changed = sts.record("max-age=-5", from: "bad.test", now: Self.now)
            #expect(!changed)
        }
        do {
            let changed = sts.record("max-age=1e3", from: "bad.test", now: Self.now)
            #expect(!changed)
        }
        do {
            let changed = sts.record("max-age=600", from: "10.0.0.1", now: Self.now)
            #expect(!changed)
        }
        #expect(!sts.upgrades("bad.test", now: Self.now) && !sts.upgrades("10.0.0.1", now: Self.now))
        #expect(StrictTransportSecurity.parse("max-age=\"31536000\"; preload")?.maxAge == 31_536_000)
        // A max-age no clock can add is held to ten years, not a trap.
        do {
            let changed = sts.record("max-age=99999999999999999999999999", from: "far.test", now: Self.now)
            #expect(changed)
        }
        #expect(sts.upgrades("far.test", now: Self.now + .seconds(9 * 366 * 86_400)))
    }

    @Test func theStoreRemembersABoundedNumberOfHosts() {
        var sts = StrictTransportSecurity()
        for i in 0...StrictTransportSecurity.limit {
            sts.record("max-age=\(1000 + i)", from: "h\(i).test", now: Self.now)
        }
        #expect(sts.entries.count == StrictTransportSecurity.limit)
        #expect(!sts.upgrades("h0.test", now: Self.now), "the one closest to expiry went")
    }

    @Test func itIsSavedWithTheCacheAndReadBack() throws {
        var cache = DNSCache()
        cache.strictTransport.record("max-age=600; includeSubDomains", from: "example.com", now: Self.now)
        cache.strictTransport.record("max-age=10", from: "short.test", now: Self.now)
        let bytes = try cache.snapshot(now: Self.now + .seconds(20)).fileBytes()
        let loaded = try CacheSnapshot.load(from: bytes)
        var relaunched = DNSCache()
        relaunched.restore(loaded.snapshot, now: Self.now + .seconds(30))
        #expect(relaunched.strictTransport.upgrades("api.example.com", now: Self.now + .seconds(30)))
        // Expired before it was saved: not saved.
        #expect(!relaunched.strictTransport.upgrades("short.test", now: Self.now + .seconds(5)))
    }

    @Test func aPlantedEntryWithABadHostIsDropped() throws {
        let file = """
            {"version":1,"entries":[],"hsts":[{"host":"Not A Host","expires":{"nanoseconds":9000000000000000000},\
            "includesSubdomains":true},{"host":"ok.test","expires":{"nanoseconds":9000000000000000000},\
            "includesSubdomains":false}]}
            """
        let loaded = try CacheSnapshot.load(from: Array(file.utf8))
        #expect(loaded.snapshot.strictTransport.map(\.host) == ["ok.test"])
        #expect(loaded.dropped == 1)
    }
}
