// The connection pool's executor. The rules are PoolStateMachine's; this file feeds it events under
// one lock and carries out its actions after the lock is released: hand a connection (or the job of
// opening one) to a waiting request, fail a request, close a connection, arm an idle timer. It maps the
// machine's numbers to the `Connection`s and suspended tasks they stand for, and nothing more.

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
    typealias RequestID = PoolStateMachine.RequestID
    typealias ConnectionID = PoolStateMachine.ConnectionID

    /// What a request is given by the pool.
    enum Grant {
        case run(Connection, reused: Bool)
        case connect(ConnectionID)
        case fail(PoolStateMachine.Failure, connectError: (any Error)?)
    }

    /// A queued request: queued under the lock before its task suspends, so a grant that comes in
    /// between is kept for it, never lost.
    enum Waiter {
        case queued
        case granted(Grant)
        case suspended(CheckedContinuation<Grant, Never>)
    }

    struct State {
        var machine: PoolStateMachine
        var connections: [ConnectionID: Connection] = [:]
        var ids: [ObjectIdentifier: ConnectionID] = [:]
        var waiters: [RequestID: Waiter] = [:]
        var nextRequest: RequestID = 0
    }

    /// What was decided under the lock, to be done after it.
    struct Effects {
        var resume: [(CheckedContinuation<Grant, Never>, Grant)] = []
        var close: [Connection] = []
        var idleTimers: [(Connection, ConnectionID, TimeAmount)] = []
        /// The grant for the request whose own event produced these actions, if any.
        var own: Grant?
    }

    let state: NIOLockedValueBox<State>

    init(maxConnectionsPerHost: Int, maxConcurrentStreams: Int, idleTimeout: Duration) {
        let limits = PoolStateMachine.Limits(
            maxConnectionsPerHost: maxConnectionsPerHost,
            maxConcurrentStreams: maxConcurrentStreams,
            idleTimeout: .nanoseconds(idleTimeout.nanoseconds)
        )
        state = NIOLockedValueBox(State(machine: PoolStateMachine(limits: limits)))
    }

    /// A connection to run one request on: an idle or multiplexed one (`reused` true), or a new one made
    /// by `connect`. Every lease must be given back with `release`.
    func lease(_ key: PoolKey, deadline: NIODeadline?, eventLoop: any EventLoop, connect: () async throws -> Connection)
        async throws -> (Connection, reused: Bool)
    {
        while true {
            if Task.isCancelled { throw HTTPEngineError(.cancelled, "\(key.host): the request was cancelled") }
            if let deadline, deadline <= .now() { throw Self.error(.timedOut, key: key, connectError: nil) }
            let (id, first) = state.withLockedValue { state -> (RequestID, Grant?) in
                state.nextRequest += 1
                let id = state.nextRequest
                switch state.machine.request(id, key: key) {
                case .run(let conn): return (id, .run(state.connections[conn]!, reused: true))
                case .connect(let conn): return (id, .connect(conn))
                case .fail(let failure): return (id, .fail(failure, connectError: nil))
                case .wait:
                    state.waiters[id] = .queued
                    return (id, nil)
                }
            }
            let grant: Grant
            if let first { grant = first } else { grant = await wait(id, key: key, deadline: deadline, eventLoop: eventLoop) }
            switch grant {
            case .run(let conn, let reused):
                guard conn.isActive else {
                    // Closed by the server, its close not yet seen: the pool forgets it; ask again.
                    connectionClosed(conn)
                    continue
                }
                return (conn, reused)
            case .connect(let id):
                return (try await open(id, key: key, connect: connect), false)
            case .fail(let failure, let connectError):
                throw Self.error(failure, key: key, connectError: connectError)
            }
        }
    }

    /// Suspends a queued request until the pool grants it something, its deadline passes or it is cancelled.
    private func wait(_ id: RequestID, key: PoolKey, deadline: NIODeadline?, eventLoop: any EventLoop) async -> Grant {
        let timer = deadline.map { deadline in
            eventLoop.scheduleTask(deadline: deadline) { self.giveUp(id, .timedOut) }
        }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Grant, Never>) in
                let granted = state.withLockedValue { state -> Grant? in
                    guard case .granted(let grant) = state.waiters[id] else {
                        state.waiters[id] = .suspended(continuation)
                        return nil
                    }
                    state.waiters[id] = nil
                    return grant
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            self.giveUp(id, .cancelled)
        }
    }

    /// Opens connection `id` for the request that was told to, and tells the machine how it went.
    private func open(_ id: ConnectionID, key: PoolKey, connect: () async throws -> Connection) async throws
        -> Connection
    {
        let conn: Connection
        do {
            conn = try await connect()
        } catch {
            perform(connectError: error) { $0.connectFailed(id) }
            throw error
        }
        let effects = state.withLockedValue { state in
            state.connections[id] = conn
            state.ids[ObjectIdentifier(conn)] = id
            return Self.apply(state.machine.connected(id, version: conn.version), &state, connectError: nil)
        }
        run(effects)
        conn.channel.closeFuture.whenComplete { _ in self.connectionClosed(conn) }
        conn.goAway?.onReceived { [weak self] in self?.event(conn) { $0.goingAway($1) } }
        if case .fail(let failure, _) = effects.own {
            throw Self.error(failure, key: key, connectError: nil)
        }
        return conn
    }

    /// Gives a leased connection back. `reusable`: an HTTP/1.1 connection whose exchange ended cleanly.
    func release(_ conn: Connection, key: PoolKey, reusable: Bool) {
        let active = reusable && conn.isActive
        event(conn) { $0.released($1, reusable: active, now: .now()) }
    }

    private func connectionClosed(_ conn: Connection) {
        let effects = state.withLockedValue { state -> Effects in
            guard let id = state.ids.removeValue(forKey: ObjectIdentifier(conn)) else { return Effects() }
            let effects = Self.apply(state.machine.closed(id), &state, connectError: nil)
            state.connections[id] = nil
            return effects
        }
        run(effects)
    }

    private func idleTimerFired(_ id: ConnectionID) {
        perform { $0.idleTimerFired(id, now: .now()) }
    }

    private func giveUp(_ id: RequestID, _ reason: PoolStateMachine.Failure) {
        perform { $0.waiterGaveUp(id, reason) }
    }

    /// The network path changed: connections made on the old one are not used for new requests.
    func retireConnections() {
        perform { $0.networkChanged() }
    }

    /// Closes every connection not in use (the others when they are released); waiting and later
    /// requests fail with `.shutdown`.
    func shutdown() {
        perform { $0.shutdown() }
    }

    /// Connections open now (for tests and diagnostics).
    var openConnections: Int { state.withLockedValue { $0.machine.openConnections } }

    // MARK: Carrying out actions

    /// Feeds the machine one event under the lock and carries out its actions after. `connectError`:
    /// the error of the failed connect the event reports, passed on to the requests it fails.
    private func perform(
        connectError: (any Error)? = nil,
        _ event: (inout PoolStateMachine) -> [PoolStateMachine.Action]
    ) {
        run(state.withLockedValue { Self.apply(event(&$0.machine), &$0, connectError: connectError) })
    }

    private func event(
        _ conn: Connection,
        _ body: (inout PoolStateMachine, ConnectionID) -> [PoolStateMachine.Action]
    ) {
        let effects = state.withLockedValue { state -> Effects in
            guard let id = state.ids[ObjectIdentifier(conn)] else { return Effects() }
            return Self.apply(body(&state.machine, id), &state, connectError: nil)
        }
        run(effects)
    }

    /// Turns the machine's actions into effects, under the lock. A grant for a request that has not
    /// suspended yet is kept for it; one for a request that is not queued is the caller's own.
    private static func apply(_ actions: [PoolStateMachine.Action], _ state: inout State, connectError: (any Error)?)
        -> Effects
    {
        var effects = Effects()
        func grant(_ id: RequestID, _ grant: Grant) {
            switch state.waiters[id] {
            case .suspended(let continuation):
                state.waiters[id] = nil
                effects.resume.append((continuation, grant))
            case .queued:
                state.waiters[id] = .granted(grant)
            case .granted, nil:
                effects.own = grant
            }
        }
        for action in actions {
            switch action {
            case .run(let id, let conn):
                grant(id, .run(state.connections[conn]!, reused: true))
            case .connect(let id, let conn):
                grant(id, .connect(conn))
            case .fail(let id, let failure):
                grant(id, .fail(failure, connectError: connectError))
            case .close(let conn):
                if let c = state.connections[conn] { effects.close.append(c) }
            case .scheduleIdleTimer(let conn, let after):
                if let c = state.connections[conn] { effects.idleTimers.append((c, conn, after)) }
            }
        }
        return effects
    }

    private func run(_ effects: Effects) {
        for (continuation, grant) in effects.resume { continuation.resume(returning: grant) }
        for conn in effects.close { conn.close() }
        for (conn, id, after) in effects.idleTimers {
            conn.channel.eventLoop.scheduleTask(in: after) { self.idleTimerFired(id) }
        }
    }

    private static func error(_ failure: PoolStateMachine.Failure, key: PoolKey, connectError: (any Error)?)
        -> any Error
    {
        switch failure {
        case .shutdown:
            return HTTPEngineError(.shutdown, "the engine was shut down")
        case .timedOut:
            return HTTPEngineError(
                .totalTimeout,
                "\(key.host): no connection became free before the request's total timeout"
            )
        case .cancelled:
            return HTTPEngineError(.cancelled, "\(key.host): the request was cancelled while waiting for a connection")
        case .connectFailed:
            return connectError ?? HTTPEngineError(.connectFailed, "could not connect to \(key.host)")
        }
    }
}
