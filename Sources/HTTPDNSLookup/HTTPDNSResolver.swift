// The resolver: host policy, then cache, then HTTPDNS providers in order, then LocalDNS as fallback.
//
// Per name and family (A and AAAA are looked up in parallel and cached apart):
//   1. the cache answers if it can (fresh, or expired within `serveExpired`); a hit past 75% of the TTL, or a
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
import Tracing

/// Resolves hostnames through HTTPDNS with caching, coalescing, prefetch, persistence and fallback.
///
/// Thread-safe; share one instance. Call `shutdown()` to save the cache before the process exits.
public final class HTTPDNSResolver: Sendable {
    package let configuration: ResolverConfiguration
    /// `configuration.tracer`, and whether there is one: the cached lookup tests the flag, as copying
    /// the optional existential out to test it cost it about 100 instructions.
    let tracer: (any Tracer)?
    let isTraced: Bool
    let providers: [any DNSProvider]
    let localDNS: any DNSProvider
    let clock: any WallClock
    let logger: Logger
    let validator: AnswerValidator
    let metrics: ResolverMetrics
    let state: NIOLockedValueBox<State>
    /// Whole answers the cache gave lately, served again without its rules (see `HotAnswers`). Its own
    /// lock, so a cached lookup never waits behind the cache's work; taken inside `state`'s lock where
    /// both are needed, never the other way round.
    let hot: NIOLockedValueBox<HotAnswers>
    /// Told when a stored answer differs from the one it replaces (the engines' pools).
    let answerSubscribers = NIOLockedValueBox<[@Sendable (String, AddressFamily, [IPAddress]) -> Void]>([])
    /// The network path the engines connect on; the families asked for follow it.
    package let path: NetworkPath
    /// The app's pinned names (`addressOverrides`), keys in normal form.
    let overrides: [String: [IPAddress]]
    /// Keeps `path` current and tells `pathChanged(from:to:)` when the device changes network.
    let monitor: NetworkMonitor
    /// Where the timers of callers with deadlines run (the engine's loops).
    let timerLoops: any EventLoopGroup
    /// Serializes writes of the service-list file.
    let listWrites = NIOLock()

    typealias QueryID = ResolverStateMachine.QueryID

    /// One upstream query and the callers waiting for it. When every caller has been cancelled (a
    /// server's client went away) the query is cancelled too; a background refresh has no caller and
    /// runs on.
    struct RunningQuery {
        var task: Task<FamilyResult, any Error>
        /// Callers waiting that have not been cancelled.
        var askers = 0
        /// Started for a caller (not a background refresh): it ends when its callers are all gone.
        var forCallers = false
        /// The callers waiting, resumed with the query's outcome unless they leave first (cancelled, or
        /// at a deadline of their own before the query's end: the engine's requests).
        var waiters: [Int: Waiter] = [:]
    }

    /// A caller waiting for a query, and the timer that ends the wait at its deadline, if it has one.
    struct Waiter {
        var continuation: CheckedContinuation<FamilyResult?, any Error>
        var timer: Scheduled<Void>?
    }

    struct State {
        var machine: ResolverStateMachine
        var network: String
        var health = ProviderHealth()
        /// The machine's queries running (lookups and background refreshes), until they end.
        var queries: [QueryID: RunningQuery] = [:]
        /// The delayed save the machine scheduled, if one is pending.
        var persistTimer: Task<Void, Never>?
        var statistics = ResolverStatistics()
        /// Re-resolving the names in use after a network change.
        var reResolving: Task<Void, Never>?
        /// Service-list fetches running, by provider index (see `HTTPDNSResolver+ServiceLists.swift`).
        var listFetches: [Int: Task<Void, Never>] = [:]
        /// The last `Waiter` key handed out.
        var lastWaiter = 0
        /// Background refreshes of stale HTTPS records, by key (see `HTTPDNSResolver+ServiceBindings.swift`).
        var recordsRefreshes: [RecordsKey: Task<Void, Never>] = [:]
    }

    /// Counters, for benchmarks and diagnostics.
    package struct ResolverStatistics: Hashable, Sendable {
        /// Queries sent to HTTPDNS providers (one per family per name per attempt; a batch counts once).
        package var upstreamQueries = 0
        var cacheHits = 0
        var staleServed = 0
        var prefetches = 0
        var fallbacks = 0
        var coalesced = 0
    }

    struct FamilyResult: Sendable {
        var answer: FamilyAnswer
        var source: String
    }

    /// Builds the providers from `configuration`. Throws `HTTPDNSConfigurationError` with code
    /// `.invalidResolverSpec` for a provider that cannot be reached as configured (e.g. a hostname
    /// endpoint without a bootstrap address).
    ///
    /// `path` is the network path the resolver's monitor keeps current; by default the engine's.
    package convenience init(
        configuration: ResolverConfiguration,
        engine: HTTPEngine,
        path: NetworkPath? = nil,
        clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "httpdns.resolver")
    ) throws {
        try Self.validateOverrides(configuration.addressOverrides)
        if let problem = configuration.cache.problem {
            throw HTTPDNSConfigurationError(.invalidCacheConfiguration, "cache: \(problem)")
        }
        let providers = try configuration.providers.map {
            try ProviderFactory.make(
                $0,
                engine: engine,
                bootstrap: configuration.bootstrap,
                clientSubnet: configuration.clientSubnet,
                serviceLists: configuration.serviceLists
            )
        }
        let local = try ProviderFactory.make(configuration.localDNS, engine: engine, bootstrap: configuration.bootstrap)
        self.init(
            configuration: configuration,
            providers: providers + configuration.appProviders.map { AppProvider(provider: $0) as any DNSProvider },
            localDNS: local,
            path: path ?? engine.path,
            group: engine.group,
            clock: clock,
            logger: logger
        )
    }

    /// Uses the given providers as they are (tests, custom providers); `configuration.providers` and
    /// `configuration.localDNS` are ignored.
    ///
    /// `path` is the one the engines connect on (the resolver's own engine's); `routeProbe` stands in for
    /// the real route probe in tests; `group` runs the timers of callers with deadlines.
    init(
        configuration: ResolverConfiguration,
        providers: [any DNSProvider],
        localDNS: any DNSProvider,
        path: NetworkPath = NetworkPath(),
        group: any EventLoopGroup = HTTPEngine.defaultEventLoopGroup,
        routeProbe: @escaping @Sendable () -> RouteProbe = { RouteProbe.current() },
        clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "httpdns.resolver")
    ) {
        self.configuration = configuration
        self.tracer = configuration.tracer
        self.isTraced = configuration.tracer != nil
        self.providers = providers
        self.localDNS = localDNS
        self.timerLoops = group
        self.clock = clock
        self.logger = logger
        self.validator = AnswerValidator(policy: configuration.policy)
        self.overrides = Self.normalizedOverrides(configuration.addressOverrides)
        self.metrics = ResolverMetrics(providers: providers.map(\.name))
        var cache = DNSCache(configuration: configuration.cache)
        if let path = configuration.persistencePath {
            // What a process killed while saving left behind (a temporary no writer holds).
            let leftovers = CachePersistence.removeLeftovers(
                besides: [path, ServiceListPersistence.path(besideCache: path)]
            )
            if leftovers > 0 { logger.info("removed unfinished cache saves", metadata: ["files": "\(leftovers)"]) }
        }
        if let path = configuration.persistencePath,
            let snapshot = CachePersistence.load(path: path, capacity: configuration.cache.capacity, logger: logger)
        {
            cache.restore(snapshot, now: clock.now())
            logger.debug("cache restored", metadata: ["entries": "\(cache.count)"])
        }
        self.path = path
        let timeout = configuration.timeout
        self.monitor = NetworkMonitor(
            path: path,
            settings: configuration.network,
            discoverPrefixes: { await Self.discoverNAT64(localDNS, timeout: timeout, logger: logger) },
            probe: routeProbe,
            logger: logger
        )
        let machine = ResolverStateMachine(cache: cache, persists: configuration.persistencePath != nil)
        self.state = NIOLockedValueBox(
            State(
                machine: machine,
                network: configuration.network.networkID ?? "local"
            )
        )
        self.hot = NIOLockedValueBox(HotAnswers(capacity: configuration.cache.capacity))
        restoreServiceLists()
        monitor.start { [weak self] old, new in self?.pathChanged(from: old, to: new) }
        let network = path.state.id
        state.withLockedValue { $0.network = network }
    }

    package var statistics: ResolverStatistics {
        var statistics = state.withLockedValue { $0.statistics }
        statistics.cacheHits += hot.withLockedValue { $0.hits }
        return statistics
    }

    /// Resolves `host` to addresses of the families asked: by default those the network can use (A and
    /// AAAA on a dual-stack network or when unsure, A alone where IPv6 has no route, AAAA alone on an
    /// IPv6-only network without NAT64).
    ///
    /// IP literals come back at once; names outside the policy go to LocalDNS; the rest through the cache
    /// and HTTPDNS as described at the top of this file.
    ///
    /// - Parameters:
    ///   - host: The name to resolve, or an IP literal.
    ///   - query: The address families to ask for; nil for those the network can use.
    /// - Returns: The addresses, with their TTL and who answered.
    /// - Throws: `ResolverError`: `.invalidName` for a name that is not a valid hostname, `.noAddress` when it
    ///   has no address of the families asked, `.allProvidersFailed` when every provider failed (and LocalDNS
    ///   too, when it may answer instead), `.timeout`, `.cancelled` or `.shutdown`.
    public func resolve(_ host: String, _ query: AddressQuery? = nil) async throws -> Resolution {
        guard isTraced, let tracer else { return try await resolveUntraced(host, query) }
        return try await ResolveSpan.around(tracer, host) { try await resolveUntraced(host, query) }
    }

    /// `resolve` without a span: what the engine asks (its request's span holds the lookup). Inlined:
    /// a call to another async function costs a cached lookup a third more.
    ///
    /// With a `callerDeadline` (a request's), the lookup ends by it too: a shared upstream query runs on
    /// for its other callers while this one leaves with `.timeout`.
    @inline(__always)
    func resolveUntraced(_ host: String, _ query: AddressQuery?, until callerDeadline: NIODeadline? = nil)
        async throws -> Resolution
    {
        let query = query ?? path.query
        metrics.lookups.increment()
        // Hot path: a name in normal form that the cache answers needs no parsing, validation or policy
        // (only names routed through HTTPDNS are ever cached, and the policy does not change).
        if let hot = hotResolution(host, query) { return hot }
        if isNormalizedHostname(host), let cached = cachedResolution(host, query, started: .now) { return cached }
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
        if !overrides.isEmpty, let pinned = try overriddenResolution(name, query) { return pinned }
        // One deadline for the whole lookup, the fallback included (see the top of this file), and the
        // caller's when it comes first.
        let callerDeadline = callerDeadline ?? .distantFuture
        let deadline = min(NIODeadline.now() + TimeAmount(configuration.timeout), callerDeadline)
        switch configuration.policy.lookup(for: name) {
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
                return try await resolveThroughHTTPDNS(
                    name,
                    query,
                    started: started,
                    reserveForFallback: mayFallBack,
                    until: callerDeadline
                )
            } catch let error as ResolverError
                where mayFallBack && (error.code == .allProvidersFailed || error.code == .timeout)
                && callerDeadline > .now()
            {
                let share = TimeAmount.nanoseconds(
                    QueryBudget.fallbackShare(timeout: configuration.timeout.nanoseconds, providers: providers.count)
                )
                return try await fallBack(
                    name,
                    query,
                    started: started,
                    deadline: min(max(deadline, .now() + share), callerDeadline),
                    reason: error
                )
            }
        }
    }

    /// LocalDNS in HTTPDNS's place (`reason`: HTTPDNS's failure; nil when HTTPDNS answered but its
    /// addresses failed to connect), counted and logged as a fallback.
    func fallBack(
        _ name: String,
        _ query: AddressQuery,
        started: ContinuousClock.Instant,
        deadline: NIODeadline,
        reason: ResolverError?
    ) async throws -> Resolution {
        state.withLockedValue { $0.statistics.fallbacks += 1 }
        metrics.fallbacks.increment()
        logger.debug("falling back to LocalDNS", metadata: ["name": "\(name)"])
        return try await resolveLocally(
            name,
            query,
            started: started,
            deadline: deadline,
            fallback: true,
            reason: reason
        )
    }

    /// Resolves `host` through HTTPDNS whatever the policy says (no fallback), and through LocalDNS,
    /// and compares the two.
    ///
    /// - Parameters:
    ///   - host: The name to check.
    ///   - query: The address families to ask for; nil for those the network can use.
    /// - Returns: Both answers (or their errors) side by side, and the verdict on LocalDNS.
    public func compare(_ host: String, _ query: AddressQuery? = nil) async -> HijackReport {
        let wallStart = DefaultTracerClock.now
        let query = query ?? path.query
        let started = ContinuousClock.now
        let deadline = NIODeadline.now() + TimeAmount(configuration.timeout)
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
        metrics.hijacks[report.verdict]?.increment()
        if let tracer { ResolveSpan.compared(tracer, report, started: wallStart) }
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

    /// Opens the first provider's connection (TCP and TLS for one that speaks HTTP), so the first
    /// lookup is one round trip on a warm connection. Nothing for a provider with none (UDP, the
    /// system resolver). The connection is pooled as a query's: closed after the resolver engine's
    /// idle timeout (60 s) without a lookup. Throws the connect's error.
    package func warmUp() async throws {
        try await providers.first?.warmUp()
    }

    /// Resolves many names ahead of use (e.g. at app start), batching where the first provider can.
    /// Failures are logged, not thrown.
    /// `withRecords`: their HTTPS records too (not when re-resolving after a network change: the first
    /// connect asks for them next to its addresses).
    package func preResolve(_ hosts: [String], _ query: AddressQuery? = nil, withRecords: Bool = true) async {
        let names = await resolveInBatches(hosts, query).considered
        let records = withRecords && answersServiceBindings
        await withTaskGroup(of: Void.self) { group in
            for name in names {
                group.addTask { _ = try? await self.resolve(name, query) }
                // Their HTTPS records too, so the first connect finds them with the addresses.
                if records { group.addTask { _ = try? await self.serviceBindings(for: name) } }
            }
        }
    }

    /// Asks the first provider for `hosts` (those HTTPDNS serves) in batches, when it takes several
    /// names per query: one request per batch, for every family `query` asks where the provider's API
    /// allows. The answers are cached; failures are logged. Returns the names it considered, and how
    /// long the request took for each name a batch answered in full.
    @discardableResult
    func resolveInBatches(_ hosts: [String], _ query: AddressQuery? = nil) async -> (
        considered: [String], answered: [String: Duration]
    ) {
        let query = query ?? path.query
        let names = hosts.compactMap { try? validatedHostname($0) }.filter {
            if case .httpdns = configuration.policy.lookup(for: $0) { return true }
            return false
        }
        guard !names.isEmpty, let first = providers.first, first.maximumBatch > 1 else { return (names, [:]) }
        let families = AddressFamily.allCases.filter { $0 == .ipv4 ? query.wantsIPv4 : query.wantsIPv6 }
        let deadline = NIODeadline.now() + TimeAmount(configuration.timeout)
        fetchServiceListIfDue(0)
        // The batches go out together: a cold start with many names waits for one round trip, not one
        // per batch.
        let batches = stride(from: 0, to: names.count, by: first.maximumBatch).map {
            Array(names[$0..<min($0 + first.maximumBatch, names.count)])
        }
        let answered = await withTaskGroup(of: [String: Duration].self) { group in
            for batch in batches {
                group.addTask { await self.sendBatch(batch, query, families, first, deadline: deadline) }
            }
            return await group.reduce(into: [:]) { $0.merge($1) { a, _ in a } }
        }
        return (names, answered)
    }

    /// One batch request to `provider` (the first), its answers cached; the names it answered in full,
    /// with the time it took.
    private func sendBatch(
        _ batch: [String],
        _ query: AddressQuery,
        _ families: [AddressFamily],
        _ provider: any DNSProvider,
        deadline: NIODeadline
    ) async -> [String: Duration] {
        let started = ContinuousClock.now
        do {
            state.withLockedValue { $0.statistics.upstreamQueries += 1 }
            metrics.upstreamQueries[0].increment()
            let answers = try await provider.resolveBatch(batch, query: query, deadline: deadline)
            let elapsed = ContinuousClock.now - started
            var answered: [String: Duration] = [:]
            for (name, answer) in answers {
                for family in families {
                    guard let part = answer[family] else { continue }
                    store(name: name, family: family, answer: part, source: provider.name)
                }
                if families.allSatisfy({ answer[$0] != nil }) { answered[name] = elapsed }
            }
            return answered
        } catch {
            metrics.upstreamFailures[0].increment()
            logger.debug("batch pre-resolve failed", metadata: ["provider": "\(provider.name)", "error": "\(error)"])
            return [:]
        }
    }
}

extension HTTPDNSResolver: AddressSource {
    /// The engine's view of `resolve`: the families the network can use, ranked later by the engine.
    /// The lookup ends by the configured timeout (the fallback to LocalDNS included) or by `deadline`,
    /// whichever comes first: at `deadline` this caller leaves with `.timeout`, and a query it shares
    /// runs on for the others.
    package func addresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses {
        let r = try await resolveUntraced(host, nil, until: deadline)
        var addresses = ResolvedAddresses(ipv4: r.ipv4, ipv6: r.ipv6, source: r.source)
        addresses.remembered = r.remembered
        return addresses
    }

    /// `body` learns of each answer stored on the current network that gives other addresses than the
    /// one it replaces (a refresh after a stale answer was served, a changed record): the name, the
    /// family and the new addresses.
    package func onAnswerChanged(_ body: @escaping @Sendable (String, AddressFamily, [IPAddress]) -> Void) {
        answerSubscribers.withLockedValue { $0.append(body) }
    }

    /// Whether a provider has a query for HTTPS records (DoH, JSON DoH, `dns:`).
    package var answersServiceBindings: Bool {
        configuration.asksServiceBindings && providers.contains { $0.answersServiceBindings }
    }

    /// The records of `host` from the resolver's table alone (each alias step fresh there), or nil.
    package func cachedServiceBindings(for host: String) -> ServiceBindings? {
        cachedServiceBindings(normalizeHostname(host))
    }

    /// The engine's view of `serviceBindings(for:)`, within the lookup timeout.
    package func serviceBindings(for host: String, deadline: NIODeadline?) async throws -> ServiceBindings {
        try await serviceBindings(for: host)
    }
}
