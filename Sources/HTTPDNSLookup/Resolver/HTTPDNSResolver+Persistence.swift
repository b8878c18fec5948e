// Saving the cache to `configuration.persistencePath`: when is ResolverStateMachine's decision (batched,
// at most once per `persistInterval`); this file carries it out, and waits for background work.

import HTTPDNSCore
import Logging

extension HTTPDNSResolver {
    /// Writes the cache to `configuration.persistencePath` now (atomically); a save that was pending
    /// is done by it.
    func persist() throws {
        let now = clock.now()
        state.withLockedValue { state in
            state.machine.persisted(now: now)
            state.persistTimer?.cancel()
            state.persistTimer = nil
        }
        try writeCache()
    }

    /// Writes any pending save of the cache now instead of when its delay runs out.
    func flushPersistence() {
        persistence { $0.flushPersistence(now: $1) }
    }

    /// Returns when no background work is left: the re-resolving a network change started, every
    /// refresh and prefetch (and those they led to), and a pending save of the cache, which is written
    /// at once rather than waited for (its delay only batches writes). Tests use it as their barrier.
    func waitForBackgroundWork() async {
        await waitForRunningWork()
        flushPersistence()
    }

    /// Waits for the re-resolving and the background refreshes running, until none is left.
    func waitForRunningWork() async {
        await state.withLockedValue { $0.reResolving }?.value
        await waitForServiceListFetches()
        while true {
            let (refreshes, records) = state.withLockedValue { state in
                (
                    state.machine.runningRefreshes.compactMap { state.queries[$0]?.task },
                    Array(state.recordsRefreshes.values)
                )
            }
            if refreshes.isEmpty, records.isEmpty { return }
            for refresh in refreshes { _ = try? await refresh.value }
            for refresh in records { await refresh.value }
        }
    }

    /// Waits for background refreshes and saves the cache.
    package func shutdown() async {
        await monitor.stop()
        await waitForRunningWork()
        persistence { $0.shutdown(now: $1) }
    }

    func writeCache() throws {
        guard let path = configuration.persistencePath else { return }
        let snapshot = state.withLockedValue { $0.machine.cache.snapshot(now: clock.now()) }
        try CachePersistence.save(snapshot, path: path)
    }

    func writeCacheLogging() {
        do { try writeCache() } catch {
            logger.warning("could not save the DNS cache", metadata: ["error": "\(error)"])
        }
    }

    /// Feeds the machine a persistence event (given the time) under the lock, and writes the cache after
    /// it when the machine says so.
    func persistence(_ event: (inout ResolverStateMachine, Timestamp) -> ResolverStateMachine.PersistAction) {
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
    func apply(_ action: ResolverStateMachine.PersistAction, _ state: inout State) -> Bool {
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
}
