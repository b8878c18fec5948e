// The resolver: host policy, then cache, then HTTPDNS providers in order, then LocalDNS as fallback.
//
// Per name and family (A and AAAA are looked up in parallel and cached apart):
//   1. the cache answers if it can (fresh, or stale within `maxStale`); a hit past 75% of the TTL, or a
//      stale hit, starts one background refresh; a whole answer the cache gave is kept for the name
//      and served again as it is while nothing would change it (`HotAnswer`: the fast path);
//   2. on a miss, concurrent lookups of the same key share one upstream query (coalescing);
//   3. providers are tried in order, skipping ones that failed recently (ProviderHealth); each attempt
//      gets an even share of the time left so a dead first provider cannot eat the whole timeout;
//      when LocalDNS may be the fallback it counts as one more attempt, so the whole lookup, fallback
//      included, ends within `configuration.timeout` of the upstream query's start (the fallback is
//      never left less than its share, even when the query started late on a busy task pool);
//   4. answers are validated (AnswerValidator) and cached, negative ones too.
// When every provider fails the name falls back to LocalDNS unless it is strict or fallback is off.
// The decisions (cache, coalescing, one refresh per name, batched saves) are ResolverStateMachine's
// (HTTPDNSCore): this class holds it and the tasks it names in one NIOLockedValueBox, and runs the
// queries and writes it asks for. No lock is held across an await; tasks are created under the lock
// (creating one does no I/O) so a task is always on record before it can finish and remove itself.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Resolves hostnames through HTTPDNS with caching, coalescing, prefetch, persistence and fallback.
///
/// Thread-safe; share one instance. Call `shutdown()` to save the cache before the process exits.
public final class HTTPDNSResolver: Sendable {
    package let configuration: ResolverConfiguration
    let providers: [any DNSProvider]
    let localDNS: any DNSProvider
    let clock: any WallClock
    let logger: Logger
    let validator: AnswerValidator
    let metrics: ResolverMetrics
    let state: NIOLockedValueBox<State>
    /// The network path the engines connect on; the families asked for follow it.
    package let path: NetworkPath
    /// Keeps `path` current and tells `pathChanged(from:to:)` when the device changes network.
    package let monitor: NetworkMonitor

    typealias QueryID = ResolverStateMachine.QueryID

    struct State {
        var machine: ResolverStateMachine
        var network: String
        var health = ProviderHealth()
        /// The tasks running the machine's queries (lookups and background refreshes), until they end.
        var queries: [QueryID: Task<FamilyResult, any Error>] = [:]
        /// The delayed save the machine scheduled, if one is pending.
        var persistTimer: Task<Void, Never>?
        var statistics = ResolverStatistics()
        /// Re-resolving the names in use after a network change.
        var reResolving: Task<Void, Never>?
        /// Whole answers the cache gave lately, served again without its rules (see `HotAnswer`).
        var hot: [String: HotAnswer] = [:]
    }

    /// A whole answer (every family asked for) the cache gave, kept so the next lookups of the name are
    /// one dictionary read: no key per family, no rules run, no `Resolution` built. It is served only
    /// while the cache itself would serve the same addresses without starting anything: until the
    /// first family's prefetch point (or its expiry, once a refresh runs), and for at most a second,
    /// so the cache still sees each name in use (its LRU order, the names re-resolved after a network
    /// change). Storing an answer for the name, a network change and `clearCache()` drop it.
    /// A class, so reading one out of the table is one retain.
    final class HotAnswer: Sendable {
        let query: AddressQuery
        let resolution: Resolution
        /// Wall-clock nanoseconds: served before this.
        let until: Int64
        /// When the first family with addresses expires (for the TTL served).
        let expiresAt: Int64

        init(query: AddressQuery, resolution: Resolution, until: Int64, expiresAt: Int64) {
            self.query = query
            self.resolution = resolution
            self.until = until
            self.expiresAt = expiresAt
        }
    }

    /// How long a hot answer is served before the cache sees the name again.
    static let hotWindow: Int64 = 1_000_000_000

    /// Counters, for benchmarks and diagnostics.
    package struct ResolverStatistics: Hashable, Sendable {
        /// Queries sent to HTTPDNS providers (one per family per name per attempt).
        package var upstreamQueries = 0
        package var cacheHits = 0
        package var staleServed = 0
        package var prefetches = 0
        package var fallbacks = 0
        package var coalesced = 0
    }

    struct FamilyResult: Sendable {
        var answer: FamilyAnswer
        var source: String
    }

    /// Builds the providers from `configuration`. Throws `HTTPDNSConfigurationError` with code
    /// `.invalidResolverSpec` for a provider that cannot be reached as configured (e.g. a hostname
    /// endpoint without a bootstrap address).
    package convenience init(
        configuration: ResolverConfiguration,
        engine: HTTPEngine,
        clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "httpdns.resolver")
    ) throws {
        let providers = try configuration.providers.map {
            try ProviderFactory.make($0, engine: engine, bootstrap: configuration.bootstrap)
        }
        let local = try ProviderFactory.make(configuration.localDNS, engine: engine, bootstrap: configuration.bootstrap)
        self.init(
            configuration: configuration,
            providers: providers,
            localDNS: local,
            path: engine.path,
            clock: clock,
            logger: logger
        )
    }

    /// Uses the given providers as they are (tests, custom providers); `configuration.providers` and
    /// `configuration.localDNS` are ignored.
    ///
    /// `path` is the one the engines connect on (the resolver's own engine's); `routeProbe` stands in for
    /// the real route probe in tests.
    package init(
        configuration: ResolverConfiguration,
        providers: [any DNSProvider],
        localDNS: any DNSProvider,
        path: NetworkPath = NetworkPath(),
        routeProbe: @escaping @Sendable () -> RouteProbe = { RouteProbe.current() },
        clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "httpdns.resolver")
    ) {
        self.configuration = configuration
        self.providers = providers
        self.localDNS = localDNS
        self.clock = clock
        self.logger = logger
        self.validator = AnswerValidator(policy: configuration.policy)
        self.metrics = ResolverMetrics(providers: providers.map(\.name))
        var cache = DNSCache(configuration: configuration.cache)
        if let path = configuration.persistencePath,
            let snapshot = CachePersistence.load(path: path, capacity: configuration.cache.capacity, logger: logger)
        {
            cache.restore(snapshot, now: clock.now())
            logger.debug("cache restored", metadata: ["entries": "\(cache.count)"])
        }
        self.path = path
        self.monitor = NetworkMonitor(
            path: path,
            settings: configuration.network,
            localDNS: localDNS,
            discoveryTimeout: configuration.timeout,
            probe: routeProbe,
            logger: logger
        )
        let machine = ResolverStateMachine(cache: cache, persists: configuration.persistencePath != nil)
        self.state = NIOLockedValueBox(State(machine: machine, network: configuration.network.networkID ?? "local"))
        monitor.start { [weak self] old, new in self?.pathChanged(from: old, to: new) }
        let network = path.state.id
        state.withLockedValue { $0.network = network }
    }

    package var statistics: ResolverStatistics { state.withLockedValue { $0.statistics } }

    // MARK: Resolving

    /// Resolves `host` to addresses of the families asked: by default those the network can use (A and
    /// AAAA on a dual-stack network or when unsure, A alone where IPv6 has no route, AAAA alone on an
    /// IPv6-only network without NAT64).
    ///
    /// IP literals come back at once; names outside the policy go to LocalDNS; the rest through the cache
    /// and HTTPDNS as described at the top of this file. Throws `ResolverError`.
    public func resolve(_ host: String, _ query: AddressQuery? = nil) async throws -> Resolution {
        let query = query ?? path.query
        metrics.lookups.increment()
        // Hot path: a name in normal form that the cache answers needs no parsing, validation or policy
        // (only names routed through HTTPDNS are ever cached, and the policy does not change).
        if isNormalizedHostname(host) {
            if let hot = hotResolution(host, query) { return hot }
            if let cached = cachedResolution(host, query, started: .now) { return cached }
        }
        let started = ContinuousClock.now
        if let ip = IPAddress(host) {
            return .literal(host, ip)
        }
        let name: String
        do {
            name = try validatedHostname(host)
        } catch {
            throw ResolverError(.invalidName, name: host, "\(error)")
        }
        // One deadline for the whole lookup, the fallback included (see the top of this file).
        let deadline = NIODeadline.now() + .nanoseconds(configuration.timeout.nanoseconds)
        switch configuration.policy.route(for: name) {
        case .literal(let ip):
            return .literal(host, ip)
        case .localDNS:
            return try await resolveLocally(
                name,
                query,
                started: started,
                deadline: deadline,
                fallback: false,
                reason: nil
            )
        case .httpdns(let strict):
            if let cached = cachedResolution(name, query, started: started) { return cached }
            let mayFallBack = !strict && configuration.fallbackToLocalDNS
            do {
                return try await resolveThroughHTTPDNS(name, query, started: started, reserveForFallback: mayFallBack)
            } catch let error as ResolverError
                where mayFallBack && (error.code == .allProvidersFailed || error.code == .timeout)
            {
                state.withLockedValue { $0.statistics.fallbacks += 1 }
                metrics.fallbacks.increment()
                logger.debug("falling back to LocalDNS", metadata: ["name": "\(name)"])
                let share = TimeAmount.nanoseconds(configuration.timeout.nanoseconds / Int64(providers.count + 1))
                return try await resolveLocally(
                    name,
                    query,
                    started: started,
                    deadline: max(deadline, .now() + share),
                    fallback: true,
                    reason: error
                )
            }
        }
    }

    /// Resolves `host` through HTTPDNS whatever the policy says (no fallback), and through LocalDNS,
    /// and compares the two.
    public func compare(_ host: String, _ query: AddressQuery? = nil) async -> HijackReport {
        let query = query ?? path.query
        let started = ContinuousClock.now
        let deadline = NIODeadline.now() + .nanoseconds(configuration.timeout.nanoseconds)
        async let trusted = captured(host, otherwise: .invalidName) {
            try await self.resolveThroughHTTPDNS(
                try validatedHostname(host),
                query,
                started: started,
                reserveForFallback: false
            )
        }
        async let local = captured(host, otherwise: .invalidName) {
            try await self.resolveLocally(
                try validatedHostname(host),
                query,
                started: started,
                deadline: deadline,
                fallback: false,
                reason: nil
            )
        }
        let report = HijackReport(name: host, httpdns: await trusted, localDNS: await local)
        if report.hijacked { metrics.hijacks.increment() }
        return report
    }

    /// The lookup `body` does for `host`, as a result: a cancelled one is `.cancelled`, and an error
    /// other than a `ResolverError` gets the code `otherwise`.
    func captured(
        _ host: String,
        otherwise code: ResolverError.Code,
        _ body: () async throws -> Resolution
    ) async -> Result<Resolution, ResolverError> {
        do {
            return .success(try await body())
        } catch let error as ResolverError {
            return .failure(error)
        } catch is CancellationError {
            return .failure(ResolverError(.cancelled, name: host, "\(host): the lookup was cancelled"))
        } catch {
            return .failure(ResolverError(code, name: host, "\(error)"))
        }
    }

    /// Resolves many names ahead of use (e.g. at app start), batching where the first provider can.
    /// Failures are logged, not thrown.
    package func preResolve(_ hosts: [String], _ query: AddressQuery? = nil) async {
        let query = query ?? path.query
        let names = hosts.compactMap { try? validatedHostname($0) }.filter {
            if case .httpdns = configuration.policy.route(for: $0) { return true }
            return false
        }
        guard !names.isEmpty else { return }
        let families = AddressFamily.allCases.filter { $0 == .ipv4 ? query.wantsIPv4 : query.wantsIPv6 }
        if let first = providers.first, first.maximumBatch > 1 {
            let deadline = NIODeadline.now() + .nanoseconds(configuration.timeout.nanoseconds)
            for family in families {
                for chunk in stride(from: 0, to: names.count, by: first.maximumBatch).map({
                    Array(names[$0..<min($0 + first.maximumBatch, names.count)])
                }) {
                    do {
                        state.withLockedValue { $0.statistics.upstreamQueries += 1 }
                        metrics.upstreamQueries[0].increment()
                        let answers = try await first.resolveBatch(chunk, family: family, deadline: deadline)
                        for (name, answer) in answers {
                            store(name: name, family: family, answer: answer, source: first.name)
                        }
                    } catch {
                        metrics.upstreamFailures[0].increment()
                        logger.debug(
                            "batch pre-resolve failed",
                            metadata: ["provider": "\(first.name)", "error": "\(error)"]
                        )
                    }
                }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for name in names {
                group.addTask { _ = try? await self.resolve(name, query) }
            }
        }
    }

    /// The app says the device moved to network `networkID` (its own name for it): from then on the
    /// app names the networks, and the change is handled as `pathChanged(from:to:)` describes.
    package func networkChanged(to networkID: String) {
        monitor.appNamed(networkID)
    }

    /// How long ago a name counts as in use when the network changes.
    static let inUseWindow: Duration = .seconds(600)
    /// At most this many names are re-resolved after a change.
    static let reResolveLimit = 64

    /// The device changed network path: later lookups use (and fill) the new network's cache, failure
    /// back-offs start afresh, and the names used recently on the old network are resolved again on
    /// the new one in the background (the engines retire their pooled connections themselves).
    func pathChanged(from old: NetworkPathState, to new: NetworkPathState) {
        let since = clock.now() + (.zero - Self.inUseWindow)
        let names = state.withLockedValue { state -> [String] in
            let names = state.machine.cache.namesInUse(network: state.network, since: since, limit: Self.reResolveLimit)
            state.network = new.id
            state.health = ProviderHealth()
            state.hot.removeAll()
            return names
        }
        guard !names.isEmpty else { return }
        logger.debug("re-resolving the names in use", metadata: ["names": "\(names.count)"])
        let task = Task { await self.preResolve(names) }
        state.withLockedValue { state in
            let previous = state.reResolving
            state.reResolving = Task {
                await previous?.value
                await task.value
            }
        }
    }

    /// Waits for the background work a network change started (re-resolving, NAT64 discovery).
    package func waitForNetworkWork() async {
        await monitor.waitForDiscoveries()
        await state.withLockedValue { $0.reResolving }?.value
    }

    /// Drops every cached answer (all networks).
    public func clearCache() {
        state.withLockedValue {
            $0.machine.cache.remove()
            $0.hot.removeAll()
        }
    }

    /// Writes the cache to `configuration.persistencePath` now (atomically); a save that was pending
    /// is done by it.
    package func persist() throws {
        let now = clock.now()
        state.withLockedValue { state in
            state.machine.persisted(now: now)
            state.persistTimer?.cancel()
            state.persistTimer = nil
        }
        try writeCache()
    }

    /// Writes any pending save of the cache now instead of when its delay runs out.
    package func flushPersistence() {
        persistence { $0.flushPersistence(now: $1) }
    }

    /// Returns when no background work is left: the re-resolving a network change started, every
    /// refresh and prefetch (and those they led to), and a pending save of the cache, which is written
    /// at once rather than waited for (its delay only batches writes). Tests use it as their barrier.
    package func waitForBackgroundWork() async {
        await waitForRunningWork()
        flushPersistence()
    }

    /// Waits for the re-resolving and the background refreshes running, until none is left.
    private func waitForRunningWork() async {
        await state.withLockedValue { $0.reResolving }?.value
        while true {
            let refreshes = state.withLockedValue { state in
                state.machine.runningRefreshes.compactMap { state.queries[$0] }
            }
            if refreshes.isEmpty { return }
            for refresh in refreshes { _ = try? await refresh.value }
        }
    }

    /// Waits for background refreshes and saves the cache.
    package func shutdown() async {
        await monitor.stop()
        await waitForRunningWork()
        persistence { $0.shutdown(now: $1) }
    }

    private func writeCache() throws {
        guard let path = configuration.persistencePath else { return }
        let snapshot = state.withLockedValue { $0.machine.cache.snapshot(now: clock.now()) }
        try CachePersistence.save(snapshot, path: path)
    }

    private func writeCacheLogging() {
        do { try writeCache() } catch {
            logger.warning("could not save the DNS cache", metadata: ["error": "\(error)"])
        }
    }

    /// Feeds the machine a persistence event (given the time) under the lock, and writes the cache after
    /// it when the machine says so.
    private func persistence(_ event: (inout ResolverStateMachine, Timestamp) -> ResolverStateMachine.PersistAction) {
        let now = clock.now()
        let write = state.withLockedValue { state in apply(event(&state.machine, now), &state) }
        if write { writeCacheLogging() }
    }

    /// Carries out a persistence decision (called with the lock held): true when the caller must write
    /// the cache once it has let go of the lock.
    ///
    /// The delay is the machine's, computed on the injected clock, but waited in real time: a
    /// `WallClock` only tells the time. Nothing waits on that delay (tests call `flushPersistence()` or
    /// `waitForBackgroundWork()`), so a manual clock that never moves costs at most `persistInterval`
    /// of a background task's sleep.
    private func apply(_ action: ResolverStateMachine.PersistAction, _ state: inout State) -> Bool {
        switch action {
        case .none:
            return false
        case .persistNow:
            state.persistTimer?.cancel()
            state.persistTimer = nil
            return true
        case .schedulePersist(let due, let timer):
            let interval = state.machine.persistInterval
            let delay = min(max(due - clock.now(), .zero), interval)
            state.persistTimer = Task {
                // Cancelled: a flush or an explicit save did it already.
                guard (try? await Task.sleep(for: delay)) != nil else { return }
                self.persistence { $0.persistTimerFired(timer, now: $1) }
            }
            return false
        }
    }

    // MARK: Internals

    func resolveThroughHTTPDNS(
        _ name: String,
        _ query: AddressQuery,
        started: ContinuousClock.Instant,
        reserveForFallback: Bool
    ) async throws -> Resolution {
        let budget = QueryBudget(reserveForFallback: reserveForFallback)
        async let v4: Result<(FamilyResult, CacheLookup?), any Error>? =
            query.wantsIPv4 ? result { try await self.lookup(name, .ipv4, budget) } : nil
        async let v6: Result<(FamilyResult, CacheLookup?), any Error>? =
            query.wantsIPv6 ? result { try await self.lookup(name, .ipv6, budget) } : nil
        let (r4, r6) = await (v4, v6)
        var ipv4: [IPAddress] = []
        var ipv6: [IPAddress] = []
        var ttls: [UInt32] = []
        var sources: [ResolutionSource] = []
        var errors: [any Error] = []
        var clientAddress: IPAddress?
        for (r, isV6) in [(r4, false), (r6, true)] {
            switch r {
            case .none: continue
            case .success((let fr, let lookup)):
                if isV6 { ipv6 = fr.answer.addresses } else { ipv4 = fr.answer.addresses }
                clientAddress = clientAddress ?? fr.answer.clientAddress
                if !fr.answer.addresses.isEmpty, let t = fr.answer.ttl { ttls.append(t) }
                switch lookup {
                case .fresh: sources.append(.cache(fr.source))
                case .stale: sources.append(.stale(fr.source))
                default: sources.append(.httpdns(fr.source))
                }
            case .failure(let e): errors.append(e)
            }
        }
        if ipv4.isEmpty && ipv6.isEmpty {
            if errors.isEmpty || errors.count < [r4, r6].compactMap({ $0 }).count {
                // At least one family answered "no such address" and none had addresses.
                throw ResolverError(
                    .noAddress,
                    name: name,
                    "\(name): no \(query == .both ? "A or AAAA" : query == .ipv4 ? "A" : "AAAA") record (HTTPDNS)"
                )
            }
            throw Self.combined(errors, name: name)
        }
        // Prefer the source of a fresh upstream answer, then stale, then cache, in that order of interest.
        let source =
            sources.first(where: { if case .httpdns = $0 { return true } else { return false } })
            ?? sources.first(where: { if case .stale = $0 { return true } else { return false } })
            ?? sources[0]
        return Resolution(
            name: name,
            ipv4: ipv4,
            ipv6: ipv6,
            ttl: ttls.min(),
            source: source,
            elapsed: ContinuousClock.now - started,
            clientAddress: clientAddress
        )
    }

    /// Answers from the cache alone, without waiting: nil when any family asked needs the network.
    /// Never blocks beyond a short lock; starts the background refresh of a stale or aging answer.
    package func cached(_ host: String, _ query: AddressQuery = .both) -> Resolution? {
        cachedResolution(normalizeHostname(host), query, started: .now)
    }

    /// The hot answer for `name` (see `HotAnswer`), with the TTL left; its `elapsed` is zero.
    private func hotResolution(_ name: String, _ query: AddressQuery) -> Resolution? {
        let now = clock.now().nanoseconds
        let found = state.withLockedValue { state -> HotAnswer? in
            guard let hot = state.hot[name], hot.query == query, now < hot.until else { return nil }
            state.statistics.cacheHits += (query.wantsIPv4 ? 1 : 0) + (query.wantsIPv6 ? 1 : 0)
            return hot
        }
        guard let found else { return nil }
        metrics.cacheHits.increment(by: (query.wantsIPv4 ? 1 : 0) + (query.wantsIPv6 ? 1 : 0))
        var resolution = found.resolution
        resolution.ttl = UInt32(max(1, (found.expiresAt - now) / 1_000_000_000))
        return resolution
    }

    /// Every family asked is answered by the cache under one lock, no task spawned. A whole fresh answer
    /// that started nothing is kept as the name's hot answer.
    private func cachedResolution(_ name: String, _ query: AddressQuery, started: ContinuousClock.Instant)
        -> Resolution?
    {
        let now = clock.now()
        return state.withLockedValue { state -> Resolution? in
            var resolution = Resolution(name: name, ipv4: [], ipv6: [], ttl: nil, source: .literal, elapsed: .zero)
            var stale = false
            var origin = ""
            var hotUntil = now.nanoseconds + Self.hotWindow
            var expiresAt = Int64.max
            var quiet = true
            for family in AddressFamily.allCases where family == .ipv4 ? query.wantsIPv4 : query.wantsIPv6 {
                let key = CacheKey(network: state.network, normalizedName: name, family: family)
                // On a miss the families already looked at stay claimed (LRU, refresh marks); the slow
                // path finds them again.
                guard case .serve(let found, let refresh) = state.machine.cacheLookup(key, now: now),
                    let hit = served(found, key, refresh: refresh, &state)
                else { return nil }
                if family == .ipv4 {
                    resolution.ipv4 = hit.answer.addresses
                } else {
                    resolution.ipv6 = hit.answer.addresses
                }
                if case .stale = found { stale = true }
                if refresh != nil { quiet = false }
                if case .fresh(let entry, _, _) = found {
                    hotUntil = min(hotUntil, state.machine.cache.servedAsIsUntil(entry, now: now).nanoseconds)
                    if !entry.isNegative { expiresAt = min(expiresAt, entry.expiresAt.nanoseconds) }
                }
                resolution.clientAddress = resolution.clientAddress ?? hit.answer.clientAddress
                if let ttl = hit.answer.ttl, !hit.answer.addresses.isEmpty {
                    resolution.ttl = min(resolution.ttl ?? ttl, ttl)
                }
                origin = hit.source
            }
            guard !resolution.ipv4.isEmpty || !resolution.ipv6.isEmpty else { return nil }
            resolution.source = stale ? .stale(origin) : .cache(origin)
            if !stale, quiet, expiresAt != .max {
                // Bounded like the cache: a memo past its capacity starts again.
                if state.hot.count >= state.machine.cache.configuration.capacity { state.hot.removeAll() }
                state.hot[name] = HotAnswer(query: query, resolution: resolution, until: hotUntil, expiresAt: expiresAt)
            }
            resolution.elapsed = ContinuousClock.now - started
            return resolution
        }
    }

    private func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    /// One family of one name: cache, else join or start the upstream query. The returned lookup is the
    /// cache outcome (nil: answered upstream); the FamilyResult's TTL is the time left.
    func lookup(_ name: String, _ family: AddressFamily, _ budget: QueryBudget) async throws
        -> (FamilyResult, CacheLookup?)
    {
        let now = clock.now()
        enum Step {
            case answer(FamilyResult, CacheLookup)
            case wait(Task<FamilyResult, any Error>)
        }
        let step: Step = state.withLockedValue { state in
            let key = CacheKey(network: state.network, normalizedName: name, family: family)
            switch state.machine.lookup(key, now: now) {
            case .serve(let found, let refresh):
                // The machine serves hits only, so there is always an answer here.
                return .answer(served(found, key, refresh: refresh, &state)!, found)
            case .join(let id):
                state.statistics.coalesced += 1
                metrics.cacheMisses.increment()
                // The machine names only queries whose task is on record (both change under this lock).
                return .wait(state.queries[id]!)
            case .startQuery(let id):
                metrics.cacheMisses.increment()
                return .wait(start(id, key, budget, &state))
            }
        }
        switch step {
        case .answer(let r, let lookup): return (r, lookup)
        case .wait(let task): return (try await task.value, nil)
        }
    }

    /// What a cache hit answers (nil on a miss), counting it and starting the background refresh the
    /// machine asked for. Called with the lock held. TTL: seconds left, 0 if stale.
    private func served(_ found: CacheLookup, _ key: CacheKey, refresh: QueryID?, _ state: inout State)
        -> FamilyResult?
    {
        if let refresh { start(refresh, key, QueryBudget(reserveForFallback: false), &state) }
        switch found {
        case .fresh(let entry, let remaining, _):
            state.statistics.cacheHits += 1
            metrics.cacheHits.increment()
            if refresh != nil { state.statistics.prefetches += 1 }
            let left = UInt32(max(1, remaining.nanoseconds / 1_000_000_000))
            return FamilyResult(
                answer: FamilyAnswer(addresses: entry.addresses, ttl: left, clientAddress: entry.clientAddress),
                source: entry.source
            )
        case .stale(let entry, _):
            state.statistics.staleServed += 1
            metrics.staleServed.increment()
            return FamilyResult(
                answer: FamilyAnswer(addresses: entry.addresses, ttl: 0, clientAddress: entry.clientAddress),
                source: entry.source
            )
        case .miss:
            return nil
        }
    }

    /// Starts the machine's query `id` for `key` and keeps its task on record (lock held).
    @discardableResult
    private func start(_ id: QueryID, _ key: CacheKey, _ budget: QueryBudget, _ state: inout State)
        -> Task<FamilyResult, any Error>
    {
        let task = Task { try await self.queryAndStore(key, id, budget) }
        state.queries[id] = task
        return task
    }

    /// Asks the providers and stores the outcome; either way the query ends (its task leaves the record).
    private func queryAndStore(_ key: CacheKey, _ id: QueryID, _ budget: QueryBudget) async throws -> FamilyResult {
        do {
            let result = try await queryProviders(key.name, key.family, budget)
            store(key: key, by: id, answer: result.answer, source: result.source)
            return result
        } catch {
            state.withLockedValue {
                $0.machine.failed(key, by: id)
                $0.queries[id] = nil
            }
            throw error
        }
    }

    private func store(name: String, family: AddressFamily, answer: FamilyAnswer, source: String) {
        let key = state.withLockedValue { CacheKey(network: $0.network, name: name, family: family) }
        let checked = validator.validate(answer, for: name)
        guard checked.answer.addresses.count == answer.addresses.count else { return }
        store(key: key, by: nil, answer: answer, source: source)
    }

    /// Stores an answer, from query `id` (which then ends) or from a batch (nil), and saves the cache
    /// if the machine says so.
    private func store(key: CacheKey, by id: QueryID?, answer: FamilyAnswer, source: String) {
        let now = clock.now()
        let write = state.withLockedValue { state -> Bool in
            let action = state.machine.stored(
                key,
                by: id,
                addresses: answer.addresses,
                ttl: answer.ttl,
                source: source,
                clientAddress: answer.clientAddress,
                now: now
            )
            if let id { state.queries[id] = nil }
            state.hot[key.name] = nil
            return apply(action, &state)
        }
        if write { writeCacheLogging() }
    }

    /// How one upstream lookup shares `configuration.timeout` (counted from the query's start): among
    /// the providers, plus one share kept for LocalDNS when it may be asked afterwards.
    struct QueryBudget: Sendable {
        var reserveForFallback: Bool
    }

    /// Tries the providers in health order, each with a fair share of the time left.
    func queryProviders(_ name: String, _ family: AddressFamily, _ budget: QueryBudget) async throws -> FamilyResult {
        guard !providers.isEmpty else {
            throw ResolverError(.allProvidersFailed, name: name, "no HTTPDNS provider configured")
        }
        let deadline = NIODeadline.now() + .nanoseconds(configuration.timeout.nanoseconds)
        let order = state.withLockedValue { $0.health.order(count: providers.count, now: clock.now()) }
        var failures: [ProviderFailure] = []
        var messages: [String] = []
        for (position, index) in order.enumerated() {
            let provider = providers[index]
            let left = deadline - .now()
            guard left > .zero else { break }
            let attemptsLeft = order.count - position + (budget.reserveForFallback ? 1 : 0)
            let share = TimeAmount.nanoseconds(left.nanoseconds / Int64(attemptsLeft))
            state.withLockedValue { $0.statistics.upstreamQueries += 1 }
            metrics.upstreamQueries[index].increment()
            do {
                let answer = try await provider.resolve(name, family: family, deadline: .now() + share)
                let checked = validator.validate(answer, for: name)
                if !answer.addresses.isEmpty, checked.answer.addresses.isEmpty {
                    let rejected = checked.rejected
                    var why = rejected.prefix(3).map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
                    if rejected.count > 3 { why += " and \(rejected.count - 3) more" }
                    throw ProviderError("answered only unusable addresses: \(why)")
                }
                state.withLockedValue { $0.health.succeeded(index) }
                logger.debug(
                    "resolved upstream",
                    metadata: ["name": "\(name)", "family": "\(family)", "provider": "\(provider.name)"]
                )
                return FamilyResult(answer: checked.answer, source: provider.name)
            } catch {
                state.withLockedValue { $0.health.failed(index, now: clock.now()) }
                metrics.upstreamFailures[index].increment()
                logger.debug("provider failed", metadata: ["provider": "\(provider.name)", "error": "\(error)"])
                messages.append("\(provider.name): \(error)")
                // The provider's own error as a value: the engine's, when the exchange with it failed.
                failures.append(
                    ProviderFailure(provider: provider.name, error: error)
                )
            }
        }
        let message = messages.joined(separator: "; ")
        if failures.isEmpty {
            throw ResolverError(.timeout, name: name, "no time left (timeout \(configuration.timeout))")
        }
        if failures.allSatisfy({ ($0.error as? HTTPEngineError)?.code == .shutdown }) {
            throw ResolverError(.shutdown, name: name, message, failures: failures)
        }
        throw ResolverError(.allProvidersFailed, name: name, message, failures: failures)
    }

    /// One error for a lookup whose families all failed: their provider failures together (each said
    /// once: both families usually fail the same way), with the code they share, else
    /// `.allProvidersFailed`. A cancelled task's lookup is `.cancelled`.
    static func combined(_ errors: [any Error], name: String) -> ResolverError {
        var messages: [String] = []
        var failures: [ProviderFailure] = []
        var seen: Set<String> = []
        var codes: Set<ResolverError.Code> = []
        for error in errors {
            let resolverError = error as? ResolverError
            codes.insert(resolverError?.code ?? .allProvidersFailed)
            let text = resolverError?.message ?? "\(error)"
            if !messages.contains(text) { messages.append(text) }
            for failure in resolverError?.failures ?? [] where seen.insert(failure.description).inserted {
                failures.append(failure)
            }
        }
        let message = "\(name): every HTTPDNS provider failed: \(messages.joined(separator: "; "))"
        if Task.isCancelled {
            return ResolverError(.cancelled, name: name, "\(name): the lookup was cancelled", failures: failures)
        }
        let shared = codes.count == 1 ? codes.first! : .allProvidersFailed
        let code = [ResolverError.Code.timeout, .shutdown].contains(shared) ? shared : .allProvidersFailed
        return ResolverError(code, name: name, message, failures: failures)
    }

    func resolveLocally(
        _ name: String,
        _ query: AddressQuery,
        started: ContinuousClock.Instant,
        deadline: NIODeadline,
        fallback: Bool,
        reason: ResolverError?
    ) async throws -> Resolution {
        async let v4: Result<FamilyAnswer, any Error>? =
            query.wantsIPv4 ? result { try await self.localDNS.resolve(name, family: .ipv4, deadline: deadline) } : nil
        async let v6: Result<FamilyAnswer, any Error>? =
            query.wantsIPv6 ? result { try await self.localDNS.resolve(name, family: .ipv6, deadline: deadline) } : nil
        let (r4, r6) = await (v4, v6)
        let ipv4 = (try? r4?.get())?.addresses ?? []
        let ipv6 = (try? r6?.get())?.addresses ?? []
        let ttl = [try? r4?.get(), try? r6?.get()].compactMap { $0??.ttl }.min()
        guard !ipv4.isEmpty || !ipv6.isEmpty else {
            let errors = [r4, r6].compactMap { r -> (any Error)? in
                if case .failure(let e) = r { return e } else { return nil }
            }
            let prefix =
                reason.map { "\($0.message); then LocalDNS (\(localDNS.name)): " }
                ?? "\(name): LocalDNS (\(localDNS.name)): "
            var failures = reason?.failures ?? []
            if errors.isEmpty {
                throw ResolverError(
                    fallback ? .allProvidersFailed : .noAddress,
                    name: name,
                    prefix + "no address",
                    failures: failures
                )
            }
            var seen: Set<String> = []
            for error in errors {
                let failure = ProviderFailure(provider: localDNS.name, error: error)
                if seen.insert(failure.description).inserted { failures.append(failure) }
            }
            throw ResolverError(
                .allProvidersFailed,
                name: name,
                prefix + errors.map { "\($0)" }.joined(separator: "; "),
                failures: failures
            )
        }
        let source: ResolutionSource = fallback ? .fallback(localDNS.name) : .localDNS(localDNS.name)
        return Resolution(
            name: name,
            ipv4: ipv4,
            ipv6: ipv6,
            ttl: ttl,
            source: source,
            elapsed: ContinuousClock.now - started
        )
    }
}

extension HTTPDNSResolver: AddressSource {
    /// The engine's view of `resolve`: the families the network can use, ranked later by the engine.
    package func addresses(for host: String) async throws -> ResolvedAddresses {
        let r = try await resolve(host)
        return ResolvedAddresses(ipv4: r.ipv4, ipv6: r.ipv6, source: r.source.description)
    }

    package var networkPath: NetworkPath? { path }
}
