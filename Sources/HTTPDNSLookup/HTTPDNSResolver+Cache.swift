// Answers from the cache: the hot memo (HotAnswers), every family under one lock, joining or starting
// upstream queries as ResolverStateMachine decides, and storing what comes back.

import HTTPDNSCore
import NIOCore

extension HTTPDNSResolver {
    /// Drops every cached answer (all networks).
    public func clearCache() {
        state.withLockedValue {
            $0.machine.cache.remove()
            hot.withLockedValue { $0.removeAll() }
        }
    }

    /// Drops the cached answers for `host` (all networks): its next lookup asks HTTPDNS. For a name
    /// whose addresses the app knows have changed.
    public func clearCache(_ host: String) {
        let name = normalizeHostname(host)
        state.withLockedValue {
            $0.machine.cache.remove(name: name)
            hot.withLockedValue { $0.forget(name) }
        }
    }

    /// Answers from the cache alone, without waiting: nil when any family asked needs the network.
    /// Never blocks beyond a short lock; starts the background refresh of a stale or aging answer.
    package func cached(_ host: String, _ query: AddressQuery = .both) -> Resolution? {
        cachedResolution(normalizeHostname(host), query, started: .now)
    }

    /// The hot answer for `host` (see `HotAnswers`), with the TTL left; its `elapsed` is zero.
    ///
    /// `host` needs no normalizing first: the memo's keys are names in normal form (lower-case ASCII
    /// letters, digits, hyphens and dots), and no other string is equal to one of those, so a host
    /// that is not in normal form simply misses.
    func hotResolution(_ host: String, _ query: AddressQuery) -> Resolution? {
        let now = clock.now().nanoseconds
        let families = (query.wantsIPv4 ? 1 : 0) + (query.wantsIPv6 ? 1 : 0)
        guard let found = hot.withLockedValue({ $0.serve(host, query, now: now, families: families) }) else {
            return nil
        }
        metrics.cacheHits.increment(by: families)
        return found.resolution
    }

    /// Every family asked is answered by the cache under one lock, no task spawned. A whole fresh answer
    /// that started nothing is kept as the name's hot answer.
    func cachedResolution(_ name: String, _ query: AddressQuery, started: ContinuousClock.Instant)
        -> Resolution?
    {
        let now = clock.now()
        return state.withLockedValue { state -> Resolution? in
            var resolution = Resolution(name: name, ipv4: [], ipv6: [], ttl: nil, source: .literal, elapsed: .zero)
            var stale = false
            var origin = ""
            var servedAsIsUntil = Int64.max
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
                if case .stale(let entry, _) = found {
                    stale = true
                    resolution.expiredFor = max(resolution.expiredFor ?? .zero, now - entry.expiresAt)
                }
                if refresh != nil { quiet = false }
                if case .fresh(let entry, _, _) = found {
                    servedAsIsUntil = min(
                        servedAsIsUntil,
                        state.machine.cache.servedAsIsUntil(entry, now: now).nanoseconds
                    )
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
                hot.withLockedValue {
                    $0.remember(
                        name,
                        query,
                        resolution,
                        now: now.nanoseconds,
                        servedAsIsUntil: servedAsIsUntil,
                        expiresAt: expiresAt
                    )
                }
            }
            resolution.elapsed = ContinuousClock.now - started
            return resolution
        }
    }

    func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
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
            case wait(QueryID, Task<FamilyResult, any Error>)
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
                state.queries[id]!.askers += 1
                return .wait(id, state.queries[id]!.task)
            case .startQuery(let id):
                metrics.cacheMisses.increment()
                let task = start(id, key, budget, &state)
                state.queries[id]!.askers = 1
                state.queries[id]!.forCallers = true
                return .wait(id, task)
            }
        }
        switch step {
        case .answer(let r, let lookup):
            return (r, lookup)
        case .wait(let id, let task):
            return (
                try await withTaskCancellationHandler {
                    try await task.value
                } onCancel: {
                    askerLeft(id)
                }, nil
            )
        }
    }

    /// A caller waiting for query `id` was cancelled. The last one to go cancels the query (which then
    /// ends as failed, and is not held against its provider); while others wait it runs on for them.
    func askerLeft(_ id: QueryID) {
        let orphaned = state.withLockedValue { state -> Task<FamilyResult, any Error>? in
            guard let query = state.queries[id], query.askers > 0 else { return nil }
            state.queries[id]!.askers -= 1
            return query.askers == 1 && query.forCallers ? query.task : nil
        }
        orphaned?.cancel()
    }

    /// What a cache hit answers (nil on a miss), counting it and starting the background refresh the
    /// machine asked for. Called with the lock held. TTL: seconds left, 0 if stale.
    func served(_ found: CacheLookup, _ key: CacheKey, refresh: QueryID?, _ state: inout State)
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
    func start(_ id: QueryID, _ key: CacheKey, _ budget: QueryBudget, _ state: inout State)
        -> Task<FamilyResult, any Error>
    {
        let task = Task { try await self.queryAndStore(key, id, budget) }
        state.queries[id] = RunningQuery(task: task)
        return task
    }

    /// Asks the providers and stores the outcome; either way the query ends (its task leaves the record).
    func queryAndStore(_ key: CacheKey, _ id: QueryID, _ budget: QueryBudget) async throws -> FamilyResult {
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

    func store(name: String, family: AddressFamily, answer: FamilyAnswer, source: String) {
        let key = state.withLockedValue { CacheKey(network: $0.network, name: name, family: family) }
        let checked = validator.validate(answer, for: name)
        guard checked.answer.addresses.count == answer.addresses.count else { return }
        store(key: key, by: nil, answer: answer, source: source)
    }

    /// Stores an answer, from query `id` (which then ends) or from a batch (nil), and saves the cache
    /// if the machine says so.
    func store(key: CacheKey, by id: QueryID?, answer: FamilyAnswer, source: String) {
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
            hot.withLockedValue { $0.forget(key.name) }
            return apply(action, &state)
        }
        if write { writeCacheLogging() }
    }
}
