// The resolver's decisions, as a plain value: the resolver (HTTPDNSLookup) tells it what happened and
// does what it answers, under its lock, and does the I/O after.
//
// Per key (network, name, family) at most one upstream query runs. A lookup:
//   - is served by the cache when it can (DNSCache decides fresh / stale / miss); when the cache asks for
//     a refresh (prefetch past 75 % of the TTL, or a stale hit) and no query for the key is running, the
//     answer says which background refresh to start: exactly one per key, however many lookups come;
//   - on a miss joins the query already running for the key, else starts one.
// A query that ends (answered or failed) releases the key: its waiters get its outcome from the task
// the resolver holds, and the next miss starts afresh. A failed refresh leaves the stale entry servable
// and lets the next stale hit try again.
//
// A connect that failed at cached addresses (`addressesFailed`) takes them out of the answer, and its
// lookup past the cache (`lookupPastCache`) joins the refresh on its way or starts a query: it is never
// served the cache.
//
// Persistence batches writes: the first store after a write schedules one, `persistInterval` later and
// never sooner than `persistInterval` after the last write; stores before it is due ride along. The
// resolver runs the timer and reports it with `persistTimerFired`; `flushPersistence` (and `shutdown`)
// write at once. Timers are numbered so a timer made stale by a flush cannot write early.
//
// Queries and timers are named by ids; the tasks that run them stay with the resolver.

import HTTPDNSCore

/// The resolver's cache, coalescing, refresh and persistence decisions. Not thread-safe by itself: the
/// owner keeps it under a lock.
struct ResolverStateMachine: Sendable {
    /// Names one upstream query (a lookup's or a background refresh's).
    struct QueryID: Hashable, Sendable, CustomStringConvertible {
        var value: Int
        var description: String { "query \(value)" }
    }

    /// Names one scheduled write of the cache.
    struct PersistTimerID: Hashable, Sendable {
        var value: Int
    }

    /// What the cache alone can do for a lookup.
    enum CacheAction: Hashable, Sendable {
        /// Answer with this hit (`.fresh` or `.stale`); when `refresh` is set, start that background
        /// query for the key.
        case serve(CacheLookup, refresh: QueryID?)
        /// The cache cannot answer.
        case miss
    }

    /// What to do for a lookup that may go upstream.
    enum LookupAction: Hashable, Sendable {
        /// Answer with this hit; when `refresh` is set, start that background query for the key.
        case serve(CacheLookup, refresh: QueryID?)
        /// Wait for the query already running for the key.
        case join(QueryID)
        /// Start this query and wait for it.
        case startQuery(QueryID)
    }

    /// What to do about writing the cache out.
    enum PersistAction: Hashable, Sendable {
        case none
        /// Start a timer for `at`; report it with `persistTimerFired(timer, now:)`.
        case schedulePersist(at: Timestamp, timer: PersistTimerID)
        /// Write the cache now (and cancel the timer, if one runs).
        case persistNow
    }

    private struct Query {
        var id: QueryID
        /// A refresh runs in the background (nobody waits on it); a lookup's query has a caller.
        var isRefresh: Bool
    }

    /// The answers. The owner may read it and use what needs no decision (restore, snapshot,
    /// `namesInUse`, `remove`); lookups and stores go through the events below.
    var cache: DNSCache
    /// Whether the cache is written out at all.
    let persists: Bool
    /// Writes are at least this far apart, and a store waits at most this long to be written.
    let persistInterval: Duration
    private var queries: [CacheKey: Query] = [:]
    private var nextQuery = 0
    private var lastPersist: Timestamp?
    private var pendingPersist: (due: Timestamp, timer: PersistTimerID)?
    private var nextTimer = 0

    init(cache: DNSCache, persists: Bool, persistInterval: Duration = .seconds(1)) {
        self.cache = cache
        self.persists = persists
        self.persistInterval = persistInterval
    }

    // MARK: Lookups

    /// A lookup that takes only what the cache has (a miss starts nothing).
    mutating func cacheLookup(_ key: CacheKey, now: Timestamp) -> CacheAction {
        let found = cache.lookup(key, now: now)
        switch found {
        case .miss:
            return .miss
        case .fresh(_, _, let refresh), .stale(_, let refresh):
            return .serve(found, refresh: refresh ? startRefresh(key) : nil)
        }
    }

    /// A lookup: the cache, else the query running for the key, else a new one.
    mutating func lookup(_ key: CacheKey, now: Timestamp) -> LookupAction {
        if case .serve(let found, let refresh) = cacheLookup(key, now: now) {
            return .serve(found, refresh: refresh)
        }
        if let running = queries[key] { return .join(running.id) }
        let id = newQuery()
        queries[key] = Query(id: id, isRefresh: false)
        return .startQuery(id)
    }

    /// An https response from `host` carried Strict-Transport-Security `value`: stored, and saved as
    /// an answer is when it changed the store.
    mutating func strictTransportSecurity(_ value: String, from host: String, now: Timestamp) -> PersistAction {
        guard cache.strictTransport.record(value, from: host, now: now) else { return .none }
        return changed(now: now)
    }

    /// A lookup past the cache, for a connect whose cached addresses failed or are slow to answer: it
    /// joins the query running for the key (a refresh already on its way), else starts one; it is
    /// never served the cached answer.
    mutating func lookupPastCache(_ key: CacheKey) -> LookupAction {
        if let running = queries[key] { return .join(running.id) }
        let id = newQuery()
        queries[key] = Query(id: id, isRefresh: false)
        return .startQuery(id)
    }

    /// Connecting to `failed` addresses of `key`'s cached answer failed: the answer loses them (and goes
    /// when none is left), so no later lookup is served them; the change is saved as a store is.
    mutating func addressesFailed(_ key: CacheKey, _ failed: Set<IPAddress>, now: Timestamp) -> PersistAction {
        guard cache.forget(failed, of: key) else { return .none }
        return changed(now: now)
    }

    /// The cache asked for a refresh: one background query, unless one for the key already runs (its
    /// answer refreshes the entry just as well).
    private mutating func startRefresh(_ key: CacheKey) -> QueryID? {
        guard queries[key] == nil else { return nil }
        let id = newQuery()
        queries[key] = Query(id: id, isRefresh: true)
        return id
    }

    private mutating func newQuery() -> QueryID {
        nextQuery += 1
        return QueryID(value: nextQuery)
    }

    /// The queries running in the background (refreshes and prefetches).
    var runningRefreshes: [QueryID] { queries.values.filter(\.isRefresh).map(\.id) }

    /// Whether `id` is still running for `key`.
    func isRunning(_ id: QueryID, for key: CacheKey) -> Bool { queries[key]?.id == id }

    // MARK: Outcomes

    /// An answer (empty addresses: a negative one) arrived for `key`, from query `id` or from elsewhere
    /// (nil: a batch pre-resolve). Stores it; the query, if it is the one running, releases the key.
    mutating func stored(
        _ key: CacheKey,
        by id: QueryID?,
        addresses: [IPAddress],
        ttl: UInt32?,
        source: String,
        clientAddress: IPAddress? = nil,
        now: Timestamp
    ) -> PersistAction {
        cache.store(key, addresses: addresses, ttl: ttl, source: source, clientAddress: clientAddress, now: now)
        if let id, queries[key]?.id == id { queries[key] = nil }
        return changed(now: now)
    }

    /// A name's HTTPS records arrived (none: it has none). Stores them; they are saved as answers are.
    mutating func storedRecords(
        _ key: RecordsKey,
        _ answer: ServiceBindingAnswer,
        source: String,
        now: Timestamp
    ) -> PersistAction {
        cache.storeRecords(key, answer, source: source, now: now)
        return changed(now: now)
    }

    /// The cache changed: a save is scheduled unless one is pending (saves are batched, at most one
    /// per `persistInterval`).
    private mutating func changed(now: Timestamp) -> PersistAction {
        guard persists, pendingPersist == nil else { return .none }
        var due = now + persistInterval
        if let last = lastPersist, due < last + persistInterval { due = last + persistInterval }
        nextTimer += 1
        let timer = PersistTimerID(value: nextTimer)
        pendingPersist = (due, timer)
        return .schedulePersist(at: due, timer: timer)
    }

    /// Query `id` for `key` failed. Releases the key (the next miss starts a new query) and lets the
    /// next stale hit start another refresh.
    mutating func failed(_ key: CacheKey, by id: QueryID) {
        guard queries[key]?.id == id else { return }
        queries[key] = nil
        cache.refreshFailed(key)
    }

    // MARK: Persistence

    /// The timer `schedulePersist` asked for has run out.
    mutating func persistTimerFired(_ timer: PersistTimerID, now: Timestamp) -> PersistAction {
        guard pendingPersist?.timer == timer else { return .none }
        return persistNow(now)
    }

    /// Write what is pending now rather than when its timer runs out.
    mutating func flushPersistence(now: Timestamp) -> PersistAction {
        pendingPersist == nil ? .none : persistNow(now)
    }

    /// The owner wrote the cache out itself (an explicit `persist()`): what is pending is written.
    mutating func persisted(now: Timestamp) {
        pendingPersist = nil
        lastPersist = now
    }

    /// The resolver is shutting down: write the cache, pending or not.
    mutating func shutdown(now: Timestamp) -> PersistAction {
        persists ? persistNow(now) : .none
    }

    private mutating func persistNow(_ now: Timestamp) -> PersistAction {
        persisted(now: now)
        return .persistNow
    }

    /// Whether a write is scheduled and not yet done.
    var persistPending: Bool { pendingPersist != nil }
}
