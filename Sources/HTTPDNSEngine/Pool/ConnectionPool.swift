// The connection pool's executor. The rules are PoolStateMachine's; this file feeds it events under
// one lock and carries out its actions after the lock is released: hand a connection to a waiting
// request, open a connection through the factory, fail a request, close a connection, arm an idle or a
// connect-retry timer. It maps the machine's numbers to the `Connection`s and suspended tasks they
// stand for, keeps the connect parameters of pre-connected hosts, and finds the connections to an
// address a resolver's answer no longer holds.

import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore

final class ConnectionPool: Sendable {
    typealias RequestID = PoolStateMachine.RequestID
    typealias ConnectionID = PoolStateMachine.ConnectionID
    /// Opens one connection as `job` says, giving up at `deadline` (nil: only the connect and TLS
    /// timeouts bound it). Its errors are `ConnectAttemptFailed`.
    typealias Factory = @Sendable (_ job: ConnectJob, _ deadline: NIODeadline?) async throws -> Connection

    /// What a request is given by the pool.
    enum Grant {
        /// `reused`: an earlier request ran on this connection (false for the first one on a new one).
        case run(Connection, reused: Bool)
        /// Runs on it once the request's evaluation has accepted it (`PoolStateMachine.RequestAction.adopt`).
        case adopt(Connection, reused: Bool)
        case fail(PoolStateMachine.Failure, connectError: (any Error)?)
    }

    /// A queued request: queued under the lock before its task suspends, so a grant that comes in
    /// between is kept for it, never lost. `job` says how to connect for it.
    struct Waiter {
        enum Stage {
            case queued
            case granted(Grant)
            case suspended(CheckedContinuation<Grant, Never>)
        }
        var job: ConnectJob
        var stage: Stage
    }

    struct State {
        var machine: PoolStateMachine
        var connections: [ConnectionID: Connection] = [:]
        var ids: [ObjectIdentifier: ConnectionID] = [:]
        var waiters: [RequestID: Waiter] = [:]
        var nextRequest: RequestID = 0
        /// Connections no request has run on yet.
        var fresh: Set<ConnectionID> = []
        /// Per host, the error of its last failed connect, named when a waiter times out after it.
        /// Cleared when a connect to the host succeeds; at most `lastErrorLimit` hosts.
        var lastConnectError: [ConnectionProfile: any Error] = [:]
        /// How to connect to each pre-connected host, for the machine's pre-connects (which name no
        /// waiter); at most `preconnectLimit` hosts, those the pool has forgotten dropped first.
        var preconnectJobs: [ConnectionProfile: ConnectJob] = [:]
        /// The latest answers that moved (`answerChanged`), per host and family: a connection to a stale
        /// answer's address that comes up after its refresh moved the answer is retired at once. At
        /// most `lastErrorLimit` hosts.
        var movedAnswers: [String: [AddressFamily: Set<IPAddress>]] = [:]
    }
    static let lastErrorLimit = 256
    static let preconnectLimit = 256

    /// What was decided under the lock, to be done after it.
    struct Effects {
        var resume: [(CheckedContinuation<Grant, Never>, Grant)] = []
        var close: [Connection] = []
        var idleTimers: [(Connection, ConnectionID, TimeAmount)] = []
        var connects: [(PoolStateMachine.Connect, ConnectJob)] = []
        var retryTimers: [(ConnectionProfile, TimeAmount)] = []
        /// The grant for the request whose own event produced these actions, if any.
        var own: Grant?
    }

    let state: NIOLockedValueBox<State>
    private let factory: Factory
    private let group: any EventLoopGroup

    init(limits: PoolStateMachine.Limits, group: any EventLoopGroup, factory: @escaping Factory) {
        state = NIOLockedValueBox(State(machine: PoolStateMachine(limits: limits)))
        self.group = group
        self.factory = factory
    }

    /// A connection to run one request on: idle, multiplexed or new. `reused` is false for the first
    /// request on a new connection. Every lease must be given back with `release`. `job` is made
    /// only when the request has to wait (a request that finds a connection builds none).
    func lease(
        _ key: ConnectionProfile,
        job: @autoclosure () -> ConnectJob,
        deadline: NIODeadline?,
        eventLoop: any EventLoop
    ) async throws -> (Connection, reused: Bool) {
        while true {
            if Task.isCancelled { throw HTTPEngineError(.cancelled, "\(key.host): the request was cancelled") }
            if let deadline, deadline <= .now() { throw error(.timedOut, key: key, connectError: nil) }
            let (id, first, effects) = state.withLockedValue { state -> (RequestID, Grant?, Effects) in
                state.nextRequest += 1
                let id = state.nextRequest
                switch state.machine.request(id, key: key, deadline: deadline) {
                case .run(let conn):
                    return (id, .run(state.connections[conn]!, reused: state.fresh.remove(conn) == nil), Effects())
                case .adopt(let conn):
                    return (id, .adopt(state.connections[conn]!, reused: state.fresh.remove(conn) == nil), Effects())
                case .fail(let failure):
                    return (id, .fail(failure, connectError: nil), Effects())
                case .wait(let connect):
                    state.waiters[id] = Waiter(job: job(), stage: .queued)
                    return (id, nil, Self.apply(connect.map { [.connect($0)] } ?? [], &state, connectError: nil))
                }
            }
            run(effects)
            let grant: Grant
            if let first { grant = first } else { grant = await wait(id, deadline: deadline, eventLoop: eventLoop) }
            switch grant {
            case .run(let conn, let reused):
                guard conn.isActive else {
                    // Closed by the server, its close not yet seen: the pool forgets it; ask again.
                    connectionClosed(conn)
                    continue
                }
                return (conn, reused)
            case .adopt(let conn, let reused):
                guard conn.isActive, let shown = conn.shown, let evaluation = key.serverTrust else {
                    refuseAdopted(conn, key: key)
                    continue
                }
                do {
                    try await evaluation.adopt(shown, host: key.host, port: key.port)
                } catch {
                    refuseAdopted(conn, key: key)
                    throw error
                }
                return (conn, reused)
            case .fail(let failure, let connectError):
                throw error(failure, key: key, connectError: connectError)
            }
        }
    }

    /// Suspends a queued request until the pool grants it something, its deadline passes or it is cancelled.
    private func wait(_ id: RequestID, deadline: NIODeadline?, eventLoop: any EventLoop) async -> Grant {
        let timer = deadline.map { deadline in
            eventLoop.scheduleTask(deadline: deadline) { self.giveUp(id, .timedOut) }
        }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Grant, Never>) in
                let granted = state.withLockedValue { state -> Grant? in
                    guard let waiter = state.waiters[id] else { return nil }
                    guard case .granted(let grant) = waiter.stage else {
                        state.waiters[id]!.stage = .suspended(continuation)
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

    /// Opens a connection to `key` ahead of its first request, as `job` says, and returns when it is
    /// in the pool; the first request to `key` runs on it. Returns at once when the host has a
    /// connection that can take a request or one on its way. Throws the connect's error.
    func preconnect(_ key: ConnectionProfile, job: ConnectJob) async throws {
        let connect = state.withLockedValue { state -> PoolStateMachine.Connect? in
            if state.preconnectJobs[key] == nil, state.preconnectJobs.count >= Self.preconnectLimit {
                state.preconnectJobs = state.preconnectJobs.filter { state.machine.hosts[$0.key] != nil }
                guard state.preconnectJobs.count < Self.preconnectLimit else { return nil }
            }
            state.preconnectJobs[key] = job
            return state.machine.preconnect(key)
        }
        guard let connect else { return }
        if let error = await establish(connect, job: job) {
            throw (error as? ConnectAttemptFailed)?.error ?? error
        }
    }

    /// Opens a connection the machine asked for, and tells the machine how it went.
    private func open(_ connect: PoolStateMachine.Connect, job: ConnectJob) {
        Task { await establish(connect, job: job) }
    }

    /// `open`'s work: the connect, then the machine's event. Returns the connect's error, if it failed.
    @discardableResult
    private func establish(_ connect: PoolStateMachine.Connect, job: ConnectJob) async -> (any Error)? {
        let conn: Connection
        do {
            conn = try await factory(job, connect.deadline)
        } catch {
            let cause = (error as? ConnectAttemptFailed)?.error ?? error
            let effects = state.withLockedValue { state in
                if state.lastConnectError.count >= Self.lastErrorLimit { state.lastConnectError = [:] }
                state.lastConnectError[connect.key] = cause
                let actions =
                    (cause as? HTTPEngineError)?.underlying is ServerTrustAskerGone
                    ? state.machine.connectLostItsAsker(connect.connection)
                    : state.machine.connectFailed(
                        connect.connection,
                        retryMayHelp: ConnectAttemptFailed.retryMayHelp(cause),
                        now: .now()
                    )
                return Self.apply(actions, &state, connectError: error)
            }
            run(effects)
            return error
        }
        let effects = state.withLockedValue { state in
            state.connections[connect.connection] = conn
            state.ids[ObjectIdentifier(conn)] = connect.connection
            // A pre-connect's connection counts as reused for its first request, which paid none of its
            // lookup, connect or handshake.
            if connect.forRequest != nil { state.fresh.insert(connect.connection) }
            state.lastConnectError[connect.key] = nil
            var actions = state.machine.connected(connect.connection, version: conn.version, now: .now())
            // Made to an address the answer has moved away from since its lookup (a stale answer
            // whose refresh came first): it takes no further request.
            if Self.isMoved(connect.connection, conn, state) {
                actions += state.machine.goingAway(connect.connection)
            }
            return Self.apply(actions, &state, connectError: nil)
        }
        run(effects)
        conn.channel.closeFuture.whenComplete { _ in self.connectionClosed(conn) }
        conn.goAway?.onReceived { [weak self] in self?.event(conn) { $0.goingAway($1) } }
        return nil
    }

    /// Gives a leased connection back. `reusable`: an HTTP/1.1 connection whose exchange ended cleanly.
    func release(_ conn: Connection, key: ConnectionProfile, reusable: Bool) {
        let active = reusable && conn.isActive
        event(conn) { $0.released($1, reusable: active, now: .now()) }
    }

    /// An adopted connection the app refused (or nobody was left to answer for): it serves nobody of
    /// the partition it moved into, and closes.
    private func refuseAdopted(_ conn: Connection, key: ConnectionProfile) {
        event(conn) { $0.goingAway($1) }
        release(conn, key: key, reusable: false)
    }

    private func connectionClosed(_ conn: Connection) {
        let effects = state.withLockedValue { state -> Effects in
            guard let id = state.ids.removeValue(forKey: ObjectIdentifier(conn)) else { return Effects() }
            let effects = Self.apply(state.machine.closed(id), &state, connectError: nil)
            state.connections[id] = nil
            state.fresh.remove(id)
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
        run(
            state.withLockedValue { state in
                state.movedAnswers = [:]  // answers are the new network's from now on
                return Self.apply(state.machine.networkChanged(), &state, connectError: nil)
            }
        )
    }

    /// The resolver's answer for `host` changed to `addresses` (one family's, `family`): connections to
    /// `host` at an address of that family the answer no longer has take no new request, as after a
    /// GOAWAY. Only connections whose address came from the resolver are looked at (not a literal, a
    /// proxy's or a configured one).
    func answerChanged(host: String, family: AddressFamily, addresses: [IPAddress]) {
        perform(each: { state in
            if state.movedAnswers[host] == nil, state.movedAnswers.count >= Self.lastErrorLimit {
                state.movedAnswers = [:]
            }
            state.movedAnswers[host, default: [:]][family] = Set(addresses)
            return state.connections.compactMap { id, conn in Self.isMoved(id, conn, state) ? id : nil }
        }) { $0.goingAway($1) }
    }

    /// Whether `conn` (`id`) goes to an address its host's latest moved answer no longer gives.
    private static func isMoved(_ id: ConnectionID, _ conn: Connection, _ state: State) -> Bool {
        guard conn.lookup.source.isResolverAnswer, let key = state.machine.connections[id]?.key, key.givenFirsts == nil,
            let ip = conn.synthesizedFrom ?? conn.remote.httpdnsIP,
            let latest = state.movedAnswers[key.host]?[ip.isIPv6 ? .ipv6 : .ipv4]
        else { return false }
        return !latest.contains(ip)
    }

    /// Closes every connection not in use (the others when they are released); waiting and later
    /// requests fail with `.shutdown`.
    func shutdown() {
        perform { $0.shutdown() }
    }

    /// Connections open now (for tests and diagnostics).
    var openConnections: Int { state.withLockedValue { $0.machine.openConnections } }

    /// Requests waiting for a connection now (for tests).
    var waitingRequests: Int { state.withLockedValue { $0.machine.waiting.count } }

    // MARK: Carrying out actions

    /// Feeds the machine one event under the lock and carries out its actions after.
    private func perform(_ event: (inout PoolStateMachine) -> [PoolStateMachine.Action]) {
        run(state.withLockedValue { Self.apply(event(&$0.machine), &$0, connectError: nil) })
    }

    /// Feeds the machine one event per connection `select` picks, under one lock.
    private func perform(
        each select: (inout State) -> [ConnectionID],
        _ event: (inout PoolStateMachine, ConnectionID) -> [PoolStateMachine.Action]
    ) {
        run(
            state.withLockedValue { state in
                let actions = select(&state).flatMap { event(&state.machine, $0) }
                return Self.apply(actions, &state, connectError: nil)
            }
        )
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
    /// `connectError`: the error of the failed connect the event reports, passed on to the requests it
    /// fails.
    private static func apply(_ actions: [PoolStateMachine.Action], _ state: inout State, connectError: (any Error)?)
        -> Effects
    {
        var effects = Effects()
        func grant(_ id: RequestID, _ grant: Grant) {
            switch state.waiters[id]?.stage {
            case .suspended(let continuation):
                state.waiters[id] = nil
                effects.resume.append((continuation, grant))
            case .queued:
                state.waiters[id]!.stage = .granted(grant)
            case .granted, nil:
                effects.own = grant
            }
        }
        for action in actions {
            switch action {
            case .run(let id, let conn):
                grant(id, .run(state.connections[conn]!, reused: state.fresh.remove(conn) == nil))
            case .connect(let connect):
                // The machine names a request still in its queue, so its job is here; a pre-connect's
                // is kept per host.
                let job: ConnectJob?
                if let waiter = connect.forRequest {
                    job = state.waiters[waiter]?.job
                } else {
                    job = state.preconnectJobs[connect.key]
                }
                if let job { effects.connects.append((connect, job)) }
            case .fail(let id, let failure):
                grant(id, .fail(failure, connectError: connectError))
            case .close(let conn):
                if let c = state.connections[conn] { effects.close.append(c) }
            case .scheduleIdleTimer(let conn, let after):
                if let c = state.connections[conn] { effects.idleTimers.append((c, conn, after)) }
            case .scheduleConnectRetry(let key, let after):
                effects.retryTimers.append((key, after))
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
        for (connect, job) in effects.connects { open(connect, job: job) }
        for (key, after) in effects.retryTimers {
            group.any().scheduleTask(in: after) { self.perform { $0.connectRetryDue(key) } }
        }
    }

    private func error(_ failure: PoolStateMachine.Failure, key: ConnectionProfile, connectError: (any Error)?)
        -> any Error
    {
        switch failure {
        case .shutdown:
            return HTTPEngineError(.shutdown, "the engine was shut down")
        case .timedOut:
            if let last = state.withLockedValue({ $0.lastConnectError[key] }) {
                return HTTPEngineError(
                    .totalTimeout,
                    "\(key.host): the request's total timeout passed while connecting (last try: \(last))",
                    underlying: last
                )
            }
            return HTTPEngineError(
                .totalTimeout,
                "\(key.host): no connection was ready before the request's total timeout"
            )
        case .cancelled:
            return HTTPEngineError(.cancelled, "\(key.host): the request was cancelled while waiting for a connection")
        case .connectFailed:
            return connectError ?? HTTPEngineError(.connectFailed, "could not connect to \(key.host)")
        }
    }
}

extension ResolutionSource {
    /// An answer the resolver gave (upstream or from its cache), which a later answer may move.
    fileprivate var isResolverAnswer: Bool {
        switch self {
        case .httpdns, .cache, .stale, .localDNS, .fallback: return true
        case .literal, .override, .system, .proxy, .staticHosts, .bootstrap, .serviceList: return false
        }
    }
}
