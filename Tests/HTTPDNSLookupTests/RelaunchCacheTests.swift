// What a relaunch needs from the cache file (issue 63): negative answers beside a family's addresses and
// HTTPS records are kept, saved, read back and served stale while one refresh runs, as addresses are.
// Pure: the cache and the file's bytes on a clock the test sets.

import Foundation
import Testing

@testable import HTTPDNSCore
@testable import HTTPDNSLookup

@Suite struct RelaunchCacheTests {
    let t0 = Timestamp.seconds(1_000_000)
    let a = CacheKey(network: "wifi-1", name: "a.test", family: .ipv4)
    let aaaa = CacheKey(network: "wifi-1", name: "a.test", family: .ipv6)
    let records = RecordsKey(network: "wifi-1", name: "a.test")
    let web: ServiceBindingAnswer = {
        var endpoint = ServiceBinding(priority: 1, target: ".")
        endpoint.alpn = ["h2"]
        endpoint.port = 8443
        endpoint.ipv4Hints = [IPAddress("192.0.2.7")!]
        return ServiceBindingAnswer(bindings: [endpoint], ttl: 300)
    }()

    /// A cache for an app that keeps answers for a day past their TTL (cold start).
    func cache() -> DNSCache {
        var c = CacheConfiguration()
        c.serveExpired = .seconds(86_400)
        return DNSCache(configuration: c)
    }

    /// `c` saved as the file's bytes and loaded into a new cache at `now`, as a relaunch does.
    func relaunch(_ c: DNSCache, savedAt saved: Timestamp, now: Timestamp) throws -> DNSCache {
        let bytes = try c.snapshot(now: saved).fileBytes()
        var next = cache()
        next.restore(try CacheSnapshot.load(from: bytes).snapshot, now: now)
        return next
    }

    @Test func anAOnlyHostsMissingAAAAIsSavedAndServedStaleAfterARelaunch() throws {
        var c = cache()
        c.store(a, addresses: [IPAddress("192.0.2.1")!], ttl: 60, source: "doh", now: t0)
        c.store(aaaa, addresses: [], ttl: 30, source: "doh", now: t0)
        let hourLater = t0 + .seconds(3600)
        var next = try relaunch(c, savedAt: t0 + .seconds(1), now: hourLater)
        guard case .stale(let none, refresh: true) = next.lookup(aaaa, now: hourLater) else {
            Issue.record("the negative AAAA answer was not served stale with its refresh"); return
        }
        #expect(none.isNegative)
        guard case .stale(_, refresh: true) = next.lookup(a, now: hourLater) else {
            Issue.record("the A answer was not served stale"); return
        }
        // The second lookup while the refresh runs starts none.
        guard case .stale(_, refresh: false) = next.lookup(aaaa, now: hourLater) else {
            Issue.record("a second refresh was asked for"); return
        }
    }

    @Test func aNameWithNoAddressAtAllIsAskedAgainNotServedStale() throws {
        var c = cache()
        c.store(a, addresses: [], ttl: 30, source: "doh", now: t0)
        c.store(aaaa, addresses: [], ttl: 30, source: "doh", now: t0)
        // Within the negative TTL: both fresh, saved, and read back.
        var next = try relaunch(c, savedAt: t0, now: t0 + .seconds(10))
        guard case .fresh(let hit, _, _) = next.lookup(a, now: t0 + .seconds(10)) else {
            Issue.record("a fresh negative answer was not restored"); return
        }
        #expect(hit.isNegative)
        // Past it: a miss, so the lookup asks (a stale "no such name" would fail the request at once).
        #expect(next.lookup(aaaa, now: t0 + .seconds(31)) == .miss)
        #expect(next.lookup(a, now: t0 + .seconds(31)) == .miss)
    }

    @Test func aNegativeAnswerKeepsTheNegativeTTLAfterARelaunch() throws {
        var c = cache()
        c.store(a, addresses: [IPAddress("192.0.2.1")!], ttl: 600, source: "doh", now: t0)
        c.store(aaaa, addresses: [], ttl: 3600, source: "doh", now: t0)
        var file = c.snapshot(now: t0)
        // A file that says an hour (an older version, an edited file) is held to the negative TTL.
        for i in file.entries.indices where file.entries[i].key == aaaa {
            file.entries[i].entry.ttl = 3600
            file.entries[i].entry.expiresAt = t0 + .seconds(3600)
        }
        var next = cache()
        next.restore(file, now: t0 + .seconds(31))
        guard case .stale = next.lookup(aaaa, now: t0 + .seconds(31)) else {
            Issue.record("the negative answer outlived the negative TTL"); return
        }
    }

    @Test func httpsRecordsAreFreshThenStaleWithOneRefreshThenGone() {
        var c = cache()
        c.storeRecords(records, web, source: "doh", now: t0)
        #expect(c.lookupRecords(records, now: t0 + .seconds(299)) == .fresh(c.freshRecords(records, now: t0)!))
        guard case .stale(let entry, refresh: true) = c.lookupRecords(records, now: t0 + .seconds(301)) else {
            Issue.record("expected stale records with the refresh"); return
        }
        #expect(entry.answer == web)
        guard case .stale(_, refresh: false) = c.lookupRecords(records, now: t0 + .seconds(302)) else {
            Issue.record("a second refresh was asked for"); return
        }
        c.recordsRefreshFailed(records)
        guard case .stale(_, refresh: true) = c.lookupRecords(records, now: t0 + .seconds(303)) else {
            Issue.record("a failed refresh may be tried again"); return
        }
        #expect(c.lookupRecords(records, now: t0 + .seconds(300 + 86_400)) == .miss)
        #expect(c.lookupRecords(RecordsKey(network: "cell", name: "a.test"), now: t0) == .miss)
    }

    @Test func noRecordsIsAnAnswerKeptForTheNegativeTTL() {
        var c = cache()
        let none = c.storeRecords(records, ServiceBindingAnswer(bindings: [], ttl: nil), source: "doh", now: t0)
        #expect(none.expiresAt == t0 + .seconds(30))
        // A TTL over a day is held to a day, one under the floor raised to it.
        let long = c.storeRecords(
            records,
            ServiceBindingAnswer(bindings: web.bindings, ttl: 900_000),
            source: "doh",
            now: t0
        )
        #expect(long.expiresAt == t0 + .seconds(86_400))
        let short = c.storeRecords(
            records,
            ServiceBindingAnswer(bindings: web.bindings, ttl: 0),
            source: "doh",
            now: t0
        )
        #expect(short.expiresAt == t0 + .seconds(10))
    }

    @Test func httpsRecordsAreSavedAsRDATAAndReadBackAfterARelaunch() throws {
        var c = cache()
        c.storeRecords(records, web, source: "doh:https://dns.test/dns-query", now: t0)
        let bare = RecordsKey(network: "wifi-1", name: "plain.test")
        c.storeRecords(bare, ServiceBindingAnswer(bindings: [], ttl: nil), source: "doh", now: t0)
        let hourLater = t0 + .seconds(3600)
        var next = try relaunch(c, savedAt: t0 + .seconds(1), now: hourLater)
        guard case .stale(let entry, refresh: true) = next.lookupRecords(records, now: hourLater) else {
            Issue.record("the saved records were not served stale with their refresh"); return
        }
        #expect(entry.answer == web)
        #expect(entry.source == "doh:https://dns.test/dns-query")
        guard case .stale(let nothing, _) = next.lookupRecords(bare, now: hourLater) else {
            Issue.record("the saved \"no records\" answer was lost"); return
        }
        #expect(nothing.answer.bindings.isEmpty)
        // Network-scoped and forgotten with the name.
        next.remove(name: "a.test")
        #expect(next.lookupRecords(records, now: hourLater) == .miss)
    }

    @Test func aRecordThatDoesNotReadIsDroppedAndCountedTheRestKept() throws {
        var c = cache()
        c.store(a, addresses: [IPAddress("192.0.2.1")!], ttl: 60, source: "doh", now: t0)
        c.storeRecords(records, web, source: "doh", now: t0)
        c.storeRecords(RecordsKey(network: "wifi-1", name: "b.test"), web, source: "doh", now: t0)
        var json = try #require(
            try JSONSerialization.jsonObject(with: Data(c.snapshot(now: t0).fileBytes())) as? [String: Any]
        )
        var items = try #require(json["records"] as? [[String: Any]])
        #expect(items.count == 2)
        items[0]["rdata"] = ["AAE="]  // a record cut short: a priority and no target
        items[1]["rdata"] = ["not base64!"]
        items.append(["key": ["network": "wifi-1", "name": "Not A Name"], "rdata": []])
        json["records"] = items
        let loaded = try CacheSnapshot.load(from: Array(try JSONSerialization.data(withJSONObject: json)))
        #expect(loaded.snapshot.records.isEmpty)
        #expect(loaded.dropped == 3)
        #expect(loaded.snapshot.entries.count == 1, "the addresses were kept")
    }

    @Test func aFileFromBeforeRecordsWereKeptStillLoads() throws {
        let old = #"{"version":1,"entries":[]}"#
        let loaded = try CacheSnapshot.load(from: Array(old.utf8))
        #expect(loaded.snapshot.records.isEmpty)
        #expect(loaded.dropped == 0)
    }

    @Test func storingRecordsSchedulesASaveAsAnAnswerDoes() {
        var machine = ResolverStateMachine(cache: cache(), persists: true)
        guard case .schedulePersist = machine.storedRecords(records, web, source: "doh", now: t0) else {
            Issue.record("records stored without a save scheduled"); return
        }
        #expect(machine.persistPending)
    }
}
