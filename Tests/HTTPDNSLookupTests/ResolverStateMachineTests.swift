// The resolver's decisions without sockets or tasks: events in, actions out, time given by hand.

import Testing
@testable import HTTPDNSCore
@testable import HTTPDNSLookup

@Suite struct ResolverStateMachineTests {
    typealias Machine = ResolverStateMachine
    let key = CacheKey(network: "wifi-1", name: "a.test", family: .ipv4)
    let ips = [IPAddress("192.0.2.1")!]
    let t0 = Timestamp.seconds(1_000_000)

    func machine(persists: Bool = false) -> Machine {
        var c = CacheConfiguration()
        c.minTTL = 1
        c.serveExpired = .seconds(30)
        return Machine(cache: DNSCache(configuration: c), persists: persists)
    }

    /// The query a lookup started (nil, recorded as an issue, for any other action).
    func started(_ action: Machine.LookupAction, sourceLocation: SourceLocation = #_sourceLocation)
        -> Machine.QueryID?
    {
        guard case .startQuery(let id) = action else {
            Issue.record("expected a new query, got \(action)", sourceLocation: sourceLocation)
            return nil
        }
        return id
    }

    /// Answers `key` through query `id` (nil: a batch) at `now`, TTL 100 s.
    func answer(_ m: inout Machine, _ id: Machine.QueryID?, at now: Timestamp) -> Machine.PersistAction {
        m.stored(key, by: id, addresses: ips, ttl: 100, source: "p", now: now)
    }

    @Test func concurrentLookupsOfAColdNameJoinOneQuery() throws {
        var m = machine()
        let id = try #require(started(m.lookup(key, now: t0)))
        #expect(m.lookup(key, now: t0) == .join(id))
        #expect(m.lookup(key, now: t0 + .seconds(1)) == .join(id))
        // The other family is a query of its own.
        let v6 = CacheKey(network: "wifi-1", name: "a.test", family: .ipv6)
        #expect(started(m.lookup(v6, now: t0)) != id)
        #expect(m.runningRefreshes.isEmpty, "a lookup's query is not background work")
        _ = answer(&m, id, at: t0 + .seconds(1))
        #expect(!m.isRunning(id, for: key))
        guard case .serve(.fresh, refresh: nil) = m.lookup(key, now: t0 + .seconds(2)) else {
            Issue.record("the answer was not cached"); return
        }
    }

    @Test func aMissOnlyLooksAtTheCache() {
        var m = machine()
        #expect(m.cacheLookup(key, now: t0) == .miss)
        // Nothing was started: the next lookup starts the query.
        #expect(started(m.lookup(key, now: t0)) != nil)
    }

    @Test func aFailedQueryReleasesItsWaitersAndTheNextLookupStartsAnother() throws {
        var m = machine()
        let first = try #require(started(m.lookup(key, now: t0)))
        #expect(m.lookup(key, now: t0) == .join(first))
        m.failed(key, by: first)
        #expect(!m.isRunning(first, for: key))
        let second = try #require(started(m.lookup(key, now: t0)))
        #expect(second != first)
        // A late report from the first query changes nothing about the second.
        m.failed(key, by: first)
        #expect(m.lookup(key, now: t0) == .join(second))
    }

    @Test func aStaleHitIsServedAndStartsExactlyOneRefresh() throws {
        var m = machine()
        _ = answer(&m, nil, at: t0)
        let stale = t0 + .seconds(101)
        guard case .serve(.stale, let refresh?) = m.lookup(key, now: stale) else {
            Issue.record("expected a stale answer and a refresh"); return
        }
        #expect(m.runningRefreshes == [refresh])
        // More stale hits while it runs: served, nothing more started, by either kind of lookup.
        guard case .serve(.stale, refresh: nil) = m.lookup(key, now: stale + .seconds(1)),
            case .serve(.stale, refresh: nil) = m.cacheLookup(key, now: stale + .seconds(2))
        else {
            Issue.record("a second stale hit started another refresh"); return
        }
        // The refresh answers: fresh again, no background work left.
        _ = answer(&m, refresh, at: stale + .seconds(3))
        #expect(m.runningRefreshes.isEmpty)
        guard case .serve(.fresh, refresh: nil) = m.lookup(key, now: stale + .seconds(4)) else {
            Issue.record("expected the refreshed answer"); return
        }
    }

    @Test func aFailedRefreshKeepsTheStaleAnswerAndTheNextStaleHitTriesAgain() throws {
        var m = machine()
        _ = answer(&m, nil, at: t0)
        let stale = t0 + .seconds(101)
        guard case .serve(.stale, let refresh?) = m.lookup(key, now: stale) else {
            Issue.record("expected a refresh"); return
        }
        m.failed(key, by: refresh)
        #expect(m.runningRefreshes.isEmpty)
        guard case .serve(.stale, let again?) = m.lookup(key, now: stale + .seconds(1)) else {
            Issue.record("expected another refresh after the failure"); return
        }
        #expect(again != refresh)
        // Past TTL + serveExpired the answer is gone and a lookup must wait for a query of its own: the
        // refresh still running for the key is it.
        #expect(m.lookup(key, now: t0 + .seconds(131)) == .join(again))
    }

    @Test func anAnswerInUseIsPrefetchedAt75PercentOfItsTTLAndNotBefore() throws {
        var m = machine()
        _ = answer(&m, nil, at: t0)
        guard case .serve(.fresh, refresh: nil) = m.lookup(key, now: t0 + .seconds(74)) else {
            Issue.record("prefetched before 75 % of the TTL"); return
        }
        guard case .serve(.fresh, let prefetch?) = m.lookup(key, now: t0 + .seconds(75)) else {
            Issue.record("no prefetch at 75 % of the TTL"); return
        }
        #expect(m.runningRefreshes == [prefetch])
        guard case .serve(.fresh, refresh: nil) = m.lookup(key, now: t0 + .seconds(80)) else {
            Issue.record("a second prefetch started"); return
        }
        _ = answer(&m, prefetch, at: t0 + .seconds(81))
        // The new answer counts from when it arrived: no prefetch until 75 s after that.
        guard case .serve(.fresh, refresh: nil) = m.lookup(key, now: t0 + .seconds(155)) else {
            Issue.record("prefetched the new answer too early"); return
        }
        guard case .serve(.fresh, _?) = m.lookup(key, now: t0 + .seconds(156)) else {
            Issue.record("the new answer was not prefetched"); return
        }
    }

    @Test func aHitWhileTheKeysQueryRunsStartsNoRefresh() throws {
        var m = machine()
        let id = try #require(started(m.lookup(key, now: t0)))
        // A batch answer arrives while the lookup's query is still out, and ages.
        _ = answer(&m, nil, at: t0)
        guard case .serve(.fresh, refresh: nil) = m.lookup(key, now: t0 + .seconds(90)) else {
            Issue.record("a refresh started beside the running query"); return
        }
        #expect(m.isRunning(id, for: key), "a batch answer does not end the query")
        _ = answer(&m, id, at: t0 + .seconds(91))
        #expect(!m.isRunning(id, for: key))
    }

    @Test func storesWithinASecondShareOnePersist() {
        var m = machine(persists: true)
        guard case .schedulePersist(let due, let timer) = answer(&m, nil, at: t0) else {
            Issue.record("the first store scheduled no save"); return
        }
        #expect(due == t0 + .seconds(1))
        #expect(answer(&m, nil, at: t0 + .milliseconds(500)) == .none)
        #expect(m.persistPending)
        #expect(m.persistTimerFired(timer, now: due) == .persistNow)
        #expect(!m.persistPending)
        // The timer reporting twice writes once.
        #expect(m.persistTimerFired(timer, now: due) == .none)
    }

    @Test func writesAreAtLeastASecondApart() {
        var m = machine(persists: true)
        _ = answer(&m, nil, at: t0)
        // Flushed early (a barrier in a test, say) at t0 + 0.2 s: the next save waits a second from then.
        #expect(m.flushPersistence(now: t0 + .milliseconds(200)) == .persistNow)
        #expect(m.flushPersistence(now: t0 + .milliseconds(300)) == .none, "nothing was pending")
        guard case .schedulePersist(let due, _) = answer(&m, nil, at: t0 + .milliseconds(250)) else {
            Issue.record("the store scheduled no save"); return
        }
        #expect(due == t0 + .milliseconds(1250))
    }

    @Test func aTimerMadeStaleByAFlushDoesNotWrite() {
        var m = machine(persists: true)
        guard case .schedulePersist(_, let old) = answer(&m, nil, at: t0) else {
            Issue.record("no save scheduled"); return
        }
        #expect(m.flushPersistence(now: t0 + .milliseconds(100)) == .persistNow)
        guard case .schedulePersist(_, let new) = answer(&m, nil, at: t0 + .seconds(2)) else {
            Issue.record("no save scheduled"); return
        }
        #expect(m.persistTimerFired(old, now: t0 + .seconds(2)) == .none)
        #expect(m.persistTimerFired(new, now: t0 + .seconds(3)) == .persistNow)
    }

    @Test func anExplicitSaveTakesThePendingOne() {
        var m = machine(persists: true)
        guard case .schedulePersist(_, let timer) = answer(&m, nil, at: t0) else {
            Issue.record("no save scheduled"); return
        }
        m.persisted(now: t0 + .milliseconds(10))
        #expect(!m.persistPending)
        #expect(m.persistTimerFired(timer, now: t0 + .seconds(1)) == .none)
    }

    @Test func withoutPersistenceNothingIsEverSaved() {
        var m = machine(persists: false)
        #expect(answer(&m, nil, at: t0) == .none)
        #expect(m.flushPersistence(now: t0) == .none)
        #expect(m.shutdown(now: t0) == .none)
    }

    @Test func shutdownSavesWhetherOrNotASaveWasPending() {
        var m = machine(persists: true)
        #expect(m.shutdown(now: t0) == .persistNow)
        guard case .schedulePersist(_, let timer) = answer(&m, nil, at: t0) else {
            Issue.record("no save scheduled"); return
        }
        #expect(m.shutdown(now: t0 + .milliseconds(10)) == .persistNow)
        // The pending save was that one: its timer does not write again.
        #expect(m.persistTimerFired(timer, now: t0 + .seconds(1)) == .none)
    }
}
