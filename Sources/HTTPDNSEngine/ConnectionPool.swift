// Connections per (scheme, host, port, HTTP versions, h2c).
//
// HTTP/1.1: idle connections are reused (keep-alive), at most `maxConnectionsPerHost` exist; a request
// beyond that waits for one to come back. HTTP/2: one connection carries every request as a stream, up
// to `maxConcurrentStreams`; beyond that requests wait for a stream to end.
// While the first connection to a key is being made and it may turn out to be HTTP/2, other requests
// wait for it instead of opening their own, so 100 concurrent first requests make one h2 connection.
// A closed connection leaves the pool by itself (its closeFuture). Waiters are resumed outside the lock.

import NIOConcurrencyHelpers
import NIOCore

struct PoolKey: Hashable, Sendable {
    var scheme: String
    var host: String
    var port: Int
    var versions: HTTPVersionPolicy
    var h2c: Bool
}

final class ConnectionPool: Sendable {
    struct Entry {
        var idle: [Connection] = []
        var http2: Connection?
        var streams = 0
        var total = 0
        var connecting = 0
        var waiters: [Int: Waiter] = [:]
    }

    /// A waiter is registered when the decision to wait is taken (under the lock), before its task
    /// suspends; a wake-up that comes in between is remembered, so none is lost.
    enum Waiter {
        case pending
        case signalled
        case waiting(CheckedContinuation<Void, Never>)
    }

    struct State {
        var entries: [PoolKey: Entry] = [:]
        var nextWaiter = 0
        var closed = false
        /// When each idle HTTP/1.1 connection last came back, and whether its idle timer is pending.
        /// One timer per connection, re-armed for the time left: a timer per release piled up 60 s
        /// tasks on the event loop (300k at 5k requests/s), and NIO cancels a timer by a linear scan.
        var idleSince: [ObjectIdentifier: NIODeadline] = [:]
        var idleTimerArmed: Set<ObjectIdentifier> = []
        /// Bumped when the network path changes (`retireConnections`): connections made before it are
        /// not pooled again.
        var generation = 0
        var born: [ObjectIdentifier: Int] = [:]
        /// Retired HTTP/2 connections still carrying streams: how many; closed when the last ends.
        var draining: [ObjectIdentifier: Int] = [:]
    }

    let maxConnectionsPerHost: Int
    let maxConcurrentStreams: Int
    let idleTimeout: Duration
    let state = NIOLockedValueBox(State())

    init(maxConnectionsPerHost: Int, maxConcurrentStreams: Int, idleTimeout: Duration) {
        self.maxConnectionsPerHost = max(1, maxConnectionsPerHost)
        self.maxConcurrentStreams = max(1, maxConcurrentStreams)
        self.idleTimeout = idleTimeout
    }

    enum Decision {
        case use(Connection)
        case connect
        case wait(Int)
        case shutDown
    }

    /// A connection to run one request on: an idle or multiplexed one (`reused` true), or a new one made
    /// by `connect`. Every lease must be given back with `release`.
    func lease(_ key: PoolKey, deadline: NIODeadline?, eventLoop: any EventLoop, connect: () async throws -> Connection)
        async throws -> (Connection, reused: Bool)
    {
        while true {
            try Task.checkCancellation()
            if let deadline, deadline <= .now() {
                throw HTTPEngineError(
                    .totalTimeout,
                    "\(key.host): no connection became free before the request's total timeout"
                )
            }
            let decision = state.withLockedValue { state -> Decision in
                guard !state.closed else { return .shutDown }
                var entry = state.entries[key] ?? Entry()
                defer { state.entries[key] = entry }
                if let h2 = entry.http2, h2.isActive, entry.streams < maxConcurrentStreams {
                    entry.streams += 1
                    return .use(h2)
                }
                while let conn = entry.idle.popLast() {
                    if conn.isActive { return .use(conn) }  // a closed one is counted out by forget()
                }
                // A connection on its way may be HTTP/2 and carry us too: wait for it.
                let mayBeH2 = key.versions != .http1Only && (key.scheme == "https" || key.h2c)
                let h2Busy = entry.http2?.isActive == true
                if !(mayBeH2 && (entry.connecting > 0 || h2Busy)),
                    entry.total + entry.connecting < maxConnectionsPerHost
                {
                    entry.connecting += 1
                    return .connect
                }
                state.nextWaiter += 1
                entry.waiters[state.nextWaiter] = .pending
                return .wait(state.nextWaiter)
            }
            switch decision {
            case .shutDown:
                throw HTTPEngineError(.shutdown, "the engine was shut down")
            case .use(let conn):
                return (conn, true)
            case .wait(let id):
                // Woken by a connection coming free, by cancellation, or by the deadline.
                let timer = deadline.map { deadline in
                    eventLoop.scheduleTask(deadline: deadline) { self.abandon(key, id) }
                }
                defer { timer?.cancel() }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.withLockedValue { state -> Bool in
                            guard case .pending = state.entries[key]?.waiters[id], !state.closed, !Task.isCancelled
                            else {
                                state.entries[key]?.waiters[id] = nil
                                return true  // signalled (or gone) before we got here
                            }
                            state.entries[key]!.waiters[id] = .waiting(continuation)
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    self.abandon(key, id)
                }
            case .connect:
                let conn: Connection
                do {
                    conn = try await connect()
                } catch {
                    let wake = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
                        state.entries[key]?.connecting -= 1
                        return Self.takeWaiters(&state, key, all: true)
                    }
                    wake.forEach { $0.resume() }
                    throw error
                }
                let wake = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
                    var entry = state.entries[key] ?? Entry()
                    entry.connecting -= 1
                    entry.total += 1
                    state.born[ObjectIdentifier(conn)] = state.generation
                    if conn.version == .http2 {
                        if entry.http2?.isActive != true {
                            entry.http2 = conn
                            entry.streams = 1
                        }
                    }
                    state.entries[key] = entry
                    return Self.takeWaiters(&state, key, all: true)
                }
                wake.forEach { $0.resume() }
                conn.channel.closeFuture.whenComplete { _ in self.forget(conn, key: key) }
                return (conn, false)
            }
        }
    }

    /// Gives a leased connection back. `reusable`: an HTTP/1.1 connection whose exchange ended cleanly.
    func release(_ conn: Connection, key: PoolKey, reusable: Bool) {
        let wake = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            guard var entry = state.entries[key] else { return [] }
            let id = ObjectIdentifier(conn)
            if conn.version == .http2 {
                if entry.http2 === conn {
                    entry.streams = max(0, entry.streams - 1)
                } else if let streams = state.draining[id] {
                    state.draining[id] = streams - 1
                    if streams <= 1 { conn.close() }
                }
            } else if reusable, conn.isActive, !state.closed, state.born[id] == state.generation {
                entry.idle.append(conn)
            } else {
                conn.close()  // forget() adjusts the count when it has closed
            }
            state.entries[key] = entry
            return Self.takeWaiters(&state, key, all: false)
        }
        wake.forEach { $0.resume() }
        if conn.version == .http1, reusable {
            // Close it if nobody takes it within the idle timeout.
            let arm = state.withLockedValue { state in
                state.idleSince[ObjectIdentifier(conn)] = .now()
                return state.idleTimerArmed.insert(ObjectIdentifier(conn)).inserted
            }
            if arm { armIdleTimer(conn, key: key, in: .nanoseconds(idleTimeout.nanoseconds)) }
        }
    }

    private func armIdleTimer(_ conn: Connection, key: PoolKey, in delay: TimeAmount) {
        conn.channel.eventLoop.scheduleTask(in: delay) { self.idleTimerFired(conn, key: key) }
    }

    /// Closes the connection if it has been idle for the whole timeout; re-arms for the time left if it
    /// came back since; stands down while it is in use (its next release arms it again).
    private func idleTimerFired(_ conn: Connection, key: PoolKey) {
        let limit = TimeAmount.nanoseconds(idleTimeout.nanoseconds)
        let (close, rearm) = state.withLockedValue { state -> (Bool, TimeAmount?) in
            let id = ObjectIdentifier(conn)
            guard let since = state.idleSince[id], state.entries[key]?.idle.contains(where: { $0 === conn }) == true
            else {
                state.idleTimerArmed.remove(id)
                return (false, nil)
            }
            let idleFor = NIODeadline.now() - since
            guard idleFor < limit else {
                state.idleTimerArmed.remove(id)
                return (true, nil)
            }
            return (false, limit - idleFor)
        }
        if close { conn.close() } else if let rearm { armIdleTimer(conn, key: key, in: rearm) }
    }

    private func forget(_ conn: Connection, key: PoolKey) {
        let wake = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            guard var entry = state.entries[key] else { return [] }
            entry.total -= 1
            entry.idle.removeAll { $0 === conn }
            state.born[ObjectIdentifier(conn)] = nil
            state.draining[ObjectIdentifier(conn)] = nil
            state.idleSince[ObjectIdentifier(conn)] = nil
            state.idleTimerArmed.remove(ObjectIdentifier(conn))
            if entry.http2 === conn {
                entry.http2 = nil
                entry.streams = 0
            }
            state.entries[key] = entry
            return Self.takeWaiters(&state, key, all: true)
        }
        wake.forEach { $0.resume() }
    }

    /// Wakes the waiters of `key` (all, or the oldest): suspended ones are returned to be resumed
    /// outside the lock, ones not yet suspended are marked so they do not suspend.
    private static func takeWaiters(_ state: inout State, _ key: PoolKey, all: Bool) -> [CheckedContinuation<
        Void, Never
    >] {
        guard var entry = state.entries[key], !entry.waiters.isEmpty else { return [] }
        var taken: [CheckedContinuation<Void, Never>] = []
        for id in all ? Array(entry.waiters.keys) : [entry.waiters.keys.min()!] {
            switch entry.waiters[id]! {
            case .waiting(let c):
                taken.append(c)
                entry.waiters[id] = nil
            case .pending:
                entry.waiters[id] = .signalled
            case .signalled:
                break
            }
        }
        state.entries[key] = entry
        return taken
    }

    /// A waiter gives up (deadline or cancellation): resume it if it is suspended, forget it either way.
    private func abandon(_ key: PoolKey, _ id: Int) {
        let c = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.entries[key]?.waiters.removeValue(forKey: id) else { return nil }
            if case .waiting(let c) = waiter { return c }
            return nil
        }
        c?.resume()
    }

    /// The network path changed: connections made on the old one are not used for new requests. Idle
    /// ones close now; busy HTTP/1.1 ones close when their exchange ends; a busy HTTP/2 one takes no new
    /// streams and closes when its last stream ends.
    func retireConnections() {
        let close = state.withLockedValue { state -> [Connection] in
            state.generation += 1
            var close: [Connection] = []
            for (key, var entry) in state.entries {
                close += entry.idle
                entry.idle = []
                if let h2 = entry.http2 {
                    if entry.streams == 0 {
                        close.append(h2)
                    } else {
                        state.draining[ObjectIdentifier(h2)] = entry.streams
                    }
                    entry.http2 = nil
                    entry.streams = 0
                }
                state.entries[key] = entry
            }
            return close
        }
        close.forEach { $0.close() }
    }

    /// Closes every connection; later leases fail.
    func shutdown() {
        let (conns, wake) = state.withLockedValue { state -> ([Connection], [CheckedContinuation<Void, Never>]) in
            state.closed = true
            var conns: [Connection] = []
            var wake: [CheckedContinuation<Void, Never>] = []
            for (_, entry) in state.entries {
                conns += entry.idle
                if let h2 = entry.http2 { conns.append(h2) }
                for waiter in entry.waiters.values {
                    if case .waiting(let c) = waiter { wake.append(c) }
                }
            }
            state.entries.removeAll()
            return (conns, wake)
        }
        conns.forEach { $0.close() }
        wake.forEach { $0.resume() }
    }

    /// Connections open now (for tests and diagnostics).
    var openConnections: Int { state.withLockedValue { $0.entries.values.reduce(0) { $0 + $1.total } } }
}
