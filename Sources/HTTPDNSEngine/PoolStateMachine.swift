// The connection pool's rules, as a value that takes events and returns actions (the shape of
// AsyncHTTPClient's HTTPConnectionPool.StateMachine). It holds no connection, channel, continuation or
// timer: requests and connections are numbers, time is passed in. `ConnectionPool` is the executor that
// feeds it events under a lock and carries out what it returns.
//
// Per host (scheme, host, port, HTTP versions, h2c):
// - HTTP/1.1: an idle connection is reused (the one released last), at most `maxConnectionsPerHost`
//   exist; a request beyond that waits, and a released connection goes straight to the oldest waiter.
// - HTTP/2: one connection takes every request as a stream, up to `maxConcurrentStreams`.
// - While a host's protocol is unknown and the first connection may turn out to be HTTP/2, other requests
//   wait for it instead of opening their own (100 concurrent first requests make one h2 connection).
//   What ALPN chose is remembered per host, so once a host is known to speak only HTTP/1.1 its waiters
//   open connections in parallel, up to the limit.
// - A failed connect fails its own request; requests that were waiting for that first connection fail
//   with it when nothing else is open or on its way (they would try the same addresses).
// - An idle connection closes after `idleTimeout`: one timer per connection, re-armed for the time left
//   (a timer per release piled up on the event loop, and NIO cancels timers by a linear scan).
// - A network change retires every connection: idle ones close, busy ones close when their work ends.
//   A server's GOAWAY retires its connection the same way.
// - A host with nothing left (no connection, connect or waiter) is dropped; what its ALPN chose is kept
//   in a small bounded memory.

import NIOCore

struct PoolStateMachine {
    typealias RequestID = Int
    typealias ConnectionID = Int

    /// Why a request is failed by the pool itself.
    enum Failure: Equatable {
        case shutdown
        case timedOut
        case cancelled
        /// The connect this request was waiting on failed; the executor passes that connect's error on.
        case connectFailed(ConnectionID)
    }

    /// What a new request does at once.
    enum RequestAction: Equatable {
        case run(on: ConnectionID)
        /// Open connection `ConnectionID` for this request; report `connected` or `connectFailed`.
        case connect(ConnectionID)
        /// Queued: a later action runs it, has it connect, or fails it.
        case wait
        case fail(Failure)
    }

    enum Action: Equatable {
        /// A queued request runs on this connection (reused: it existed before the request came).
        case run(RequestID, on: ConnectionID)
        /// A queued request opens this new connection itself.
        case connect(RequestID, ConnectionID)
        case fail(RequestID, Failure)
        case close(ConnectionID)
        /// Call `idleTimerFired` for this connection after `after`.
        case scheduleIdleTimer(ConnectionID, after: TimeAmount)
    }

    struct Limits {
        var maxConnectionsPerHost: Int
        var maxConcurrentStreams: Int
        var idleTimeout: TimeAmount
    }

    struct Connection {
        var key: PoolKey
        var version: HTTPVersionUsed
        /// HTTP/2: streams open. HTTP/1.1: 1 while leased.
        var inUse = 0
        /// HTTP/1.1: when it last came back to the pool, nil while in use.
        var idleSince: NIODeadline?
        var idleTimerArmed = false
        /// Made before the last network change: used for no new request.
        var retired = false
        /// A close was asked for; it still counts against the limit until `closed` arrives.
        var closing = false
    }

    struct Host {
        /// Connections open or closing (they count against the limit until they have closed).
        var connections: Set<ConnectionID> = []
        /// Idle HTTP/1.1 connections, the one released last at the end.
        var idle: [ConnectionID] = []
        /// The HTTP/2 connection that takes new streams.
        var http2: ConnectionID?
        /// Connects on their way (which ones, and for whom: `PoolStateMachine.connecting`).
        var connecting = 0
        var waiters = CircularBuffer<RequestID>()
        /// What ALPN chose the last time a connection was made.
        var learned: HTTPVersionUsed?

        var isEmpty: Bool { connections.isEmpty && connecting == 0 && waiters.isEmpty }
    }

    let limits: Limits
    private(set) var hosts: [PoolKey: Host] = [:]
    private(set) var connections: [ConnectionID: Connection] = [:]
    /// Connects on their way: their host, and the request each was opened for.
    private var connecting: [ConnectionID: (key: PoolKey, request: RequestID)] = [:]
    /// Queued requests and their host.
    private var waiting: [RequestID: PoolKey] = [:]
    /// What ALPN chose for hosts that were dropped, oldest first; at most `rememberedLimit`.
    private var remembered: [PoolKey: HTTPVersionUsed] = [:]
    private var rememberedOrder = CircularBuffer<PoolKey>()
    static let rememberedLimit = 256
    private var nextConnection: ConnectionID = 0
    private(set) var isShutDown = false

    init(limits: Limits) {
        self.limits = Limits(
            maxConnectionsPerHost: max(1, limits.maxConnectionsPerHost),
            maxConcurrentStreams: max(1, limits.maxConcurrentStreams),
            idleTimeout: limits.idleTimeout
        )
    }

    /// Connections open or closing, over all hosts.
    var openConnections: Int { connections.count }

    /// What ALPN chose for `key` the last time, if remembered.
    func learnedProtocol(_ key: PoolKey) -> HTTPVersionUsed? { hosts[key]?.learned ?? remembered[key] }

    // MARK: Events

    /// A request for `key` wants a connection.
    mutating func request(_ id: RequestID, key: PoolKey) -> RequestAction {
        guard !isShutDown else { return .fail(.shutdown) }
        // Taken out of the dictionary while it changes, so that its arrays are not copied (copy on write).
        var host = hosts.removeValue(forKey: key) ?? Host(learned: remembered[key])
        defer { hosts[key] = host }
        if let conn = take(&host) { return .run(on: conn) }
        if host.waiters.isEmpty, canConnect(host, key) { return .connect(startConnect(&host, key, for: id)) }
        host.waiters.append(id)
        waiting[id] = key
        return .wait
    }

    /// Connection `conn` is up with the protocol ALPN chose (or h2c / plain HTTP/1.1). The request it was
    /// opened for runs on it; waiters may follow.
    mutating func connected(_ conn: ConnectionID, version: HTTPVersionUsed) -> [Action] {
        guard let pending = connecting.removeValue(forKey: conn), var host = hosts.removeValue(forKey: pending.key)
        else { return [.close(conn)] }
        let (key, creator) = pending
        host.connecting -= 1
        host.learned = version
        host.connections.insert(conn)
        var record = Connection(key: key, version: version, inUse: 1)
        var actions: [Action] = []
        if isShutDown {
            record.closing = true
            actions = [.fail(creator, .shutdown), .close(conn)]
        } else if version == .http2 {
            // A second h2 connection (two connects raced) carries its creator's stream, then closes.
            if host.http2 == nil { host.http2 = conn } else { record.retired = true }
        }
        connections[conn] = record
        serveWaiters(&host, key, into: &actions)
        store(host, key)
        return actions
    }

    /// Connect `conn` failed; the executor fails its own request with the error.
    mutating func connectFailed(_ conn: ConnectionID) -> [Action] {
        guard let key = connecting.removeValue(forKey: conn)?.key, var host = hosts.removeValue(forKey: key)
        else { return [] }
        host.connecting -= 1
        var actions: [Action] = []
        if host.connections.isEmpty, host.connecting == 0 {
            // Nothing else could serve them: the waiters would try the same addresses.
            while let waiter = host.waiters.popFirst() {
                waiting[waiter] = nil
                actions.append(.fail(waiter, .connectFailed(conn)))
            }
        } else {
            serveWaiters(&host, key, into: &actions)
        }
        store(host, key)
        return actions
    }

    /// A request is done with `conn`. `reusable`: an HTTP/1.1 exchange that ended cleanly on a connection
    /// still open.
    mutating func released(_ conn: ConnectionID, reusable: Bool, now: NIODeadline) -> [Action] {
        guard var record = connections[conn], var host = hosts.removeValue(forKey: record.key) else { return [] }
        let key = record.key
        var actions: [Action] = []
        record.inUse = max(0, record.inUse - 1)
        if record.version == .http2 {
            if record.retired, record.inUse == 0, !record.closing {
                record.closing = true
                actions.append(.close(conn))
            }
        } else if reusable, !record.retired, !record.closing, !isShutDown {
            record.idleSince = now
            host.idle.append(conn)
            // A waiter takes it below; otherwise it waits idle, closed if nobody takes it in time.
            if host.waiters.isEmpty, !record.idleTimerArmed {
                record.idleTimerArmed = true
                actions.append(.scheduleIdleTimer(conn, after: limits.idleTimeout))
            }
        } else if !record.closing {
            record.closing = true
            actions.append(.close(conn))
        }
        connections[conn] = record
        serveWaiters(&host, key, into: &actions)
        store(host, key)
        return actions
    }

    /// `conn` has closed, whoever closed it.
    mutating func closed(_ conn: ConnectionID) -> [Action] {
        guard let record = connections.removeValue(forKey: conn), var host = hosts.removeValue(forKey: record.key)
        else { return [] }
        host.connections.remove(conn)
        host.idle.removeAll { $0 == conn }
        if host.http2 == conn { host.http2 = nil }
        var actions: [Action] = []
        serveWaiters(&host, record.key, into: &actions)
        store(host, record.key)
        return actions
    }

    /// The server sent GOAWAY on `conn` (HTTP/2): it takes no new stream; it closes when its last
    /// stream ends, and waiters get a new connection.
    mutating func goingAway(_ conn: ConnectionID) -> [Action] {
        guard var record = connections[conn], var host = hosts.removeValue(forKey: record.key) else { return [] }
        record.retired = true
        if host.http2 == conn { host.http2 = nil }
        var actions: [Action] = []
        if record.inUse == 0, !record.closing {
            record.closing = true
            actions.append(.close(conn))
        }
        connections[conn] = record
        serveWaiters(&host, record.key, into: &actions)
        store(host, record.key)
        return actions
    }

    /// The idle timer of `conn` fired: close it if it has been idle the whole timeout, re-arm for the time
    /// left if it came back since, stand down while it is in use (its next release arms it again).
    mutating func idleTimerFired(_ conn: ConnectionID, now: NIODeadline) -> [Action] {
        guard var record = connections[conn] else { return [] }
        defer { connections[conn] = record }
        guard let since = record.idleSince, !record.closing else {
            record.idleTimerArmed = false
            return []
        }
        let idleFor = now - since
        guard idleFor >= limits.idleTimeout else {
            return [.scheduleIdleTimer(conn, after: limits.idleTimeout - idleFor)]
        }
        record.idleTimerArmed = false
        record.idleSince = nil
        record.closing = true
        hosts[record.key]?.idle.removeAll { $0 == conn }
        return [.close(conn)]
    }

    /// A queued request stops waiting (its deadline passed, or it was cancelled). Nothing to do if it was
    /// already given a connection.
    mutating func waiterGaveUp(_ id: RequestID, _ reason: Failure) -> [Action] {
        guard let key = waiting.removeValue(forKey: id), var host = hosts.removeValue(forKey: key) else { return [] }
        if let index = host.waiters.firstIndex(of: id) { host.waiters.remove(at: index) }
        store(host, key)
        return [.fail(id, reason)]
    }

    /// The network path changed: connections made on the old one take no new request. Idle ones close
    /// now; a busy HTTP/1.1 one closes when its exchange ends; a busy HTTP/2 one when its last stream ends.
    mutating func networkChanged() -> [Action] {
        var actions: [Action] = []
        for (id, var record) in connections where !record.retired {
            record.retired = true
            if record.inUse == 0, !record.closing {
                record.closing = true
                actions.append(.close(id))
            }
            connections[id] = record
        }
        for key in Array(hosts.keys) {
            hosts[key]!.idle = []
            hosts[key]!.http2 = nil
        }
        return actions
    }

    /// Fails every waiter, closes every connection not in use; later requests fail, connections in use
    /// close when they are released.
    mutating func shutdown() -> [Action] {
        isShutDown = true
        var actions: [Action] = []
        for key in Array(hosts.keys) {
            while let waiter = hosts[key]!.waiters.popFirst() { actions.append(.fail(waiter, .shutdown)) }
            hosts[key]!.idle = []
            hosts[key]!.http2 = nil
        }
        waiting = [:]
        for (id, var record) in connections where !record.closing && (record.inUse == 0 || record.version == .http2) {
            record.closing = true
            connections[id] = record
            actions.append(.close(id))
        }
        return actions
    }

    // MARK: Rules

    /// A connection that can take one more request now, marked as taken.
    private mutating func take(_ host: inout Host) -> ConnectionID? {
        if let h2 = host.http2, connections[h2]!.inUse < limits.maxConcurrentStreams {
            connections[h2]!.inUse += 1
            return h2
        }
        guard let conn = host.idle.popLast() else { return nil }
        connections[conn]!.inUse = 1
        connections[conn]!.idleSince = nil
        return conn
    }

    /// Whether a new connection may be opened for `key` now.
    private func canConnect(_ host: Host, _ key: PoolKey) -> Bool {
        guard host.connections.count + host.connecting < limits.maxConnectionsPerHost else { return false }
        // A connection that is, or may turn out to be, HTTP/2 carries the request once it has room.
        let mayBeH2 =
            key.versions != .http1Only && (key.scheme == "https" || key.h2c) && host.learned != .http1
        return !(mayBeH2 && (host.connecting > 0 || host.http2 != nil))
    }

    private mutating func startConnect(_ host: inout Host, _ key: PoolKey, for request: RequestID) -> ConnectionID {
        nextConnection += 1
        host.connecting += 1
        connecting[nextConnection] = (key, request)
        return nextConnection
    }

    /// Gives queued requests, oldest first, what the host can offer now: a stream or an idle connection,
    /// else a new connection of their own while the limits allow.
    private mutating func serveWaiters(_ host: inout Host, _ key: PoolKey, into actions: inout [Action]) {
        while let waiter = host.waiters.first {
            if let conn = take(&host) {
                actions.append(.run(waiter, on: conn))
            } else if canConnect(host, key) {
                actions.append(.connect(waiter, startConnect(&host, key, for: waiter)))
            } else {
                return
            }
            host.waiters.removeFirst()
            waiting[waiter] = nil
        }
    }

    /// Writes `host` back, or drops it when nothing is left, remembering what its ALPN chose.
    private mutating func store(_ host: Host, _ key: PoolKey) {
        guard host.isEmpty else {
            hosts[key] = host
            return
        }
        hosts[key] = nil
        guard let learned = host.learned else { return }
        if remembered.updateValue(learned, forKey: key) == nil {
            rememberedOrder.append(key)
            if rememberedOrder.count > Self.rememberedLimit { remembered[rememberedOrder.removeFirst()] = nil }
        }
    }
}
