// The query executor: one family of one name from the cache, else joining or starting the upstream
// query as ResolverStateMachine decides, waiting for it within the caller's deadline, and storing what
// comes back for every waiter.

import HTTPDNSCore
import NIOCore

extension HTTPDNSResolver {
    func result<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    /// One family of one name: cache, else join or start the upstream query (`pastCache`: never the
    /// cache). The returned lookup is the cache outcome (nil: answered upstream); the FamilyResult's TTL
    /// is the time left.
    ///
    /// A caller whose `deadline` comes before the query's own end leaves at it (`.timeout`), and the
    /// query runs on for its other callers; the others wait for the query, which ends by its budget.
    func lookup(
        _ name: String,
        _ family: AddressFamily,
        _ budget: QueryBudget,
        until deadline: NIODeadline = .distantFuture,
        pastCache: Bool = false
    ) async throws -> (FamilyResult, CacheLookup?) {
        let now = clock.now()
        enum Step {
            case answer(FamilyResult, CacheLookup)
            case wait(QueryID, Task<FamilyResult, any Error>, waiter: Int)
        }
        let step: Step = state.withLockedValue { state in
            let key = CacheKey(network: state.network, normalizedName: name, family: family)
            switch pastCache ? state.machine.lookupPastCache(key) : state.machine.lookup(key, now: now) {
            case .serve(let found, let refresh):
                // The machine serves hits only, so there is always an answer here.
                return .answer(served(found, key, refresh: refresh, &state)!, found)
            case .join(let id):
                state.statistics.coalesced += 1
                metrics.cacheMisses.increment()
                // The machine names only queries whose task is on record (both change under this lock).
                state.queries[id]!.askers += 1
                state.lastWaiter &+= 1
                return .wait(id, state.queries[id]!.task, waiter: state.lastWaiter)
            case .startQuery(let id):
                metrics.cacheMisses.increment()
                let task = start(id, key, budget, &state)
                state.queries[id]!.askers = 1
                state.queries[id]!.forCallers = true
                state.lastWaiter &+= 1
                return .wait(id, task, waiter: state.lastWaiter)
            }
        }
        switch step {
        case .answer(let r, let lookup):
            return (r, lookup)
        case .wait(let id, let task, let waiter):
            // Only a deadline before the query's own end needs a timer.
            let until = deadline < .now() + TimeAmount(configuration.timeout) ? deadline : nil
            if let result = try await wait(for: id, as: waiter, name: name, until: until) { return (result, nil) }
            return (try await task.value, nil)  // the query ended before the wait began
        }
    }

    /// Waits for query `id` as caller `waiter`, until `deadline` if there is one: its result, `.timeout`
    /// at the deadline, or nil when the query ended before the wait began (its task holds the result).
    /// No task of its own: the query resumes the caller when it ends (`queryAndStore`), a timer on an
    /// event loop when the deadline comes first, the cancellation handler at once when the caller is
    /// cancelled.
    func wait(for id: QueryID, as waiter: Int, name: String, until deadline: NIODeadline?) async throws
        -> FamilyResult?
    {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<FamilyResult?, any Error>) in
                enum Outcome {
                    case waiting, ended
                    case cancelled(orphaned: Task<FamilyResult, any Error>?)
                }
                let outcome = state.withLockedValue { state -> Outcome in
                    guard let query = state.queries[id] else { return .ended }
                    // Cancelled before this point: the handler below has run already (it takes this lock)
                    // and found no waiter to resume. This caller leaves as one that waited would.
                    guard !Task.isCancelled else {
                        state.queries[id]!.askers -= 1
                        return .cancelled(orphaned: query.askers == 1 && query.forCallers ? query.task : nil)
                    }
                    let timer = deadline.map { deadline in
                        timerLoops.next().scheduleTask(deadline: deadline) {
                            self.waiterLeft(id, waiter, name: name, timedOut: true)
                        }
                    }
                    state.queries[id]!.waiters[waiter] = Waiter(continuation: continuation, timer: timer)
                    return .waiting
                }
                switch outcome {
                case .waiting: break
                case .ended: continuation.resume(returning: nil)
                case .cancelled(let orphaned):
                    orphaned?.cancel()
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            waiterLeft(id, waiter, name: name, timedOut: false)
        }
    }

    /// A caller leaves query `id`: its deadline passed, or it was cancelled. The last one to go cancels
    /// the query (which then ends as failed, and is not held against its provider); while others wait
    /// it runs on for them. A background refresh has no caller and runs on.
    func waiterLeft(_ id: QueryID, _ waiter: Int, name: String, timedOut: Bool) {
        let (left, orphaned) = state.withLockedValue { state -> (Waiter?, Task<FamilyResult, any Error>?) in
            guard let left = state.queries[id]?.waiters.removeValue(forKey: waiter) else { return (nil, nil) }
            state.queries[id]!.askers -= 1
            let query = state.queries[id]!
            return (left, query.askers == 0 && query.forCallers ? query.task : nil)
        }
        guard let left else { return }  // already resumed by the query's end
        left.timer?.cancel()
        orphaned?.cancel()
        left.continuation.resume(
            throwing: timedOut
                ? ResolverError(.timeout, name: name, "\(name): no answer before the request's deadline")
                : CancellationError()
        )
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
            let waiters = store(key: key, by: id, answer: result.answer, source: result.source)
            for waiter in waiters {
                waiter.timer?.cancel()
                waiter.continuation.resume(returning: result)
            }
            return result
        } catch {
            let waiters = state.withLockedValue { state in
                state.machine.failed(key, by: id)
                defer { state.queries[id] = nil }
                return state.queries[id]?.waiters.values.map { $0 } ?? []
            }
            for waiter in waiters {
                waiter.timer?.cancel()
                waiter.continuation.resume(throwing: error)
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
    /// if the machine says so. Returns the query's waiting callers, for it to resume.
    @discardableResult
    func store(key: CacheKey, by id: QueryID?, answer: FamilyAnswer, source: String) -> [Waiter] {
        let now = clock.now()
        var waiters: [Waiter] = []
        var moved = false
        let write = state.withLockedValue { state -> Bool in
            // An answer that replaces one with other addresses, on the network in use: the engines
            // retire their connections to addresses no longer given.
            if key.network == state.network, !answer.addresses.isEmpty,
                let before = state.machine.cache.addresses(of: key), !before.isEmpty,
                Set(before) != Set(answer.addresses)
            {
                moved = true
            }
            let action = state.machine.stored(
                key,
                by: id,
                addresses: answer.addresses,
                ttl: answer.ttl,
                source: source,
                clientAddress: answer.clientAddress,
                now: now
            )
            if let id {
                waiters = state.queries[id]?.waiters.values.map { $0 } ?? []
                state.queries[id] = nil
            }
            hot.withLockedValue { $0.forget(key.name) }
            return apply(action, &state)
        }
        if write { writeCacheLogging() }
        if moved {
            for subscriber in answerSubscribers.withLockedValue({ $0 }) {
                subscriber(key.name, key.family, answer.addresses)
            }
        }
        return waiters
    }
}
