// The connection pool's rules, as a value that takes events and returns actions (the shape of
// AsyncHTTPClient's HTTPConnectionPool.StateMachine). It holds no connection, channel, continuation or
// timer: requests and connections are numbers, time is passed in. `ConnectionPool` is the executor that
// feeds it events under a lock and carries out what it returns.
//
// The pool owns connection creation: a request never opens a connection itself. It queues, the machine
// decides that the host needs one more connection (`connect`), the executor opens it through the
// engine's connection factory, and whatever comes up serves the oldest waiters.
//
// Per host (scheme, host, port, HTTP versions, h2c):
// - HTTP/1.1: an idle connection is reused (the one released last), at most `maxConnectionsPerHost`
//   exist, and at most one connect is on its way per waiting request. A released or new connection goes
//   straight to the oldest waiter.
// - HTTP/2: one connection takes every request as a stream, up to `maxConcurrentStreams`.
// - While a host's protocol is unknown and the first connection may turn out to be HTTP/2, other requests
//   wait for it instead of opening their own (100 concurrent first requests make one h2 connection).
//   What ALPN chose is remembered per host, so once a host is known to speak only HTTP/1.1 its waiters
//   get connections in parallel, up to the limit.
// - A failed connect: if a second try may help (a reset, a timeout; not a certificate, a pin, a name
//   that does not resolve, a refusal) and fewer than `connectAttempts` have failed in a row, the host
//   waits `connectBackoff` (doubling each time) before it connects again for waiters that no connect
//   on its way covers. With nothing else open or on its way, a waiter whose deadline comes before that
//   try fails now, with the connect's error; the others keep waiting, each until its own deadline.
//   A connect whose certificate question lost the request that was to answer it (cancelled during the
//   handshake) is no failure: the waiters left connect again at once and answer for themselves.
//   Otherwise (no further try) open connections serve the waiters when released; with none, each
//   connect still on its way keeps one waiter and the oldest others fail with the connect's error.
// - A waiter that times out or is cancelled leaves the queue; a connect on its way goes on for the
//   others (and, with nobody left, becomes an idle connection).
// - An idle connection closes after `idleTimeout`: one timer per connection, re-armed for the time left
//   (a timer per release piled up on the event loop, and NIO cancels timers by a linear scan). An
//   HTTP/2 connection is idle while no stream is open on it.
// - A pre-connect (an app warming a host up before its first request) opens a connection with no
//   request waiting, unless the host has one that can take a request or one on its way. It joins the
//   pool like any other: the first request runs on it, the idle rules close it if none comes. On a
//   network change, a pre-connected host that still has a connection gets a new one on the new network.
//   A request whose app has a say on certificates (a URLSession delegate: its own partition) finds no
//   connection of its partition yet: it adopts a connection of the same host made without that say
//   that no request has run on (a pre-connect's), which moves into its partition; the executor asks the
//   app about it first, as about a new connection, and closes it if the app refuses. So a pre-connect
//   serves a URLSession load, and a connection is still asked about once before its first use.
// - The resolver's answer for a host moved (a stale answer was used, its refresh gave other addresses):
//   the executor retires the connections to addresses no longer in the answer, as a GOAWAY does.
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
        /// The host's last connect failed and no further try is coming in time for this request; the
        /// executor passes that connect's error on.
        case connectFailed(ConnectionID)
    }

    /// A connection the executor opens now for `key`, with the connect parameters of request
    /// `forRequest` (any waiter of the host: they share the key; nil for a pre-connect, whose parameters
    /// the executor keeps), within `deadline` (the latest of the host's waiters' deadlines; nil when one
    /// of them has none, or for a pre-connect).
    struct Connect: Equatable {
        var connection: ConnectionID
        var key: ConnectionProfile
        var forRequest: RequestID?
        var deadline: NIODeadline?
    }

    /// What a new request does at once.
    enum RequestAction: Equatable {
        case run(on: ConnectionID)
        /// Runs on this connection, made without the app's say and now in the request's partition, once
        /// the app has accepted it (see the file comment); refused, the executor releases it unusable.
        case adopt(ConnectionID)
        /// Queued: a later action runs or fails it. `connect`, when given, is opened now for the host.
        case wait(connect: Connect?)
        case fail(Failure)
    }

    enum Action: Equatable {
        /// A queued request runs on this connection.
        case run(RequestID, on: ConnectionID)
        /// Open a connection; report `connected` or `connectFailed`.
        case connect(Connect)
        case fail(RequestID, Failure)
        case close(ConnectionID)
        /// Call `idleTimerFired` for this connection after `after`.
        case scheduleIdleTimer(ConnectionID, after: TimeAmount)
        /// Call `connectRetryDue` for this host after `after`.
        case scheduleConnectRetry(ConnectionProfile, after: TimeAmount)
    }

    struct Limits {
        var maxConnectionsPerHost: Int
        var maxConcurrentStreams: Int
        var idleTimeout: TimeAmount
        /// Connects to a host that may fail in a row, for the same waiters, before they fail.
        var connectAttempts = 3
        /// The wait before the second connect; it doubles for each one after.
        var connectBackoff: TimeAmount = .milliseconds(100)
    }

    struct Connection {
        var key: ConnectionProfile
        var version: HTTPVersionUsed
        /// HTTP/2: streams open. HTTP/1.1: 1 while leased.
        var inUse = 0
        /// HTTP/1.1: when it last came back to the pool (or came up), nil while in use.
        var idleSince: NIODeadline?
        var idleTimerArmed = false
        /// Made before the last network change: used for no new request.
        var retired = false
        /// A close was asked for; it still counts against the limit until `closed` arrives.
        var closing = false
        /// A request has run on it (or is running).
        var served = false
    }

    struct Host {
        /// Connections open or closing (they count against the limit until they have closed).
        var connections: Set<ConnectionID> = []
        /// Idle HTTP/1.1 connections, the one released last at the end.
        var idle: [ConnectionID] = []
        /// The HTTP/2 connection that takes new streams.
        var http2: ConnectionID?
        /// Connects on their way.
        var connecting = 0
        var waiters = CircularBuffer<RequestID>()
        /// What ALPN chose the last time a connection was made.
        var learned: HTTPVersionUsed?
        /// Connects that failed in a row for the current waiters.
        var failedConnects = 0
        /// A failed connect's backoff is running: no connect until `connectRetryDue`.
        var retryPending = false
        /// The app pre-connected this host: a network change connects it again.
        var preconnected = false

        var isEmpty: Bool { connections.isEmpty && connecting == 0 && waiters.isEmpty }
    }

    let limits: Limits
    private(set) var hosts: [ConnectionProfile: Host] = [:]
    private(set) var connections: [ConnectionID: Connection] = [:]
    /// Connects on their way, and their host.
    private var connecting: [ConnectionID: ConnectionProfile] = [:]
    /// Queued requests: their host and deadline.
    private(set) var waiting: [RequestID: (key: ConnectionProfile, deadline: NIODeadline?)] = [:]
    /// What ALPN chose for hosts that were dropped, oldest first; at most `rememberedLimit`.
    private var remembered: [ConnectionProfile: HTTPVersionUsed] = [:]
    private var rememberedOrder = CircularBuffer<ConnectionProfile>()
    static let rememberedLimit = 256
    private var nextConnection: ConnectionID = 0
    private(set) var isShutDown = false

    init(limits: Limits) {
        self.limits = Limits(
            maxConnectionsPerHost: max(1, limits.maxConnectionsPerHost),
            maxConcurrentStreams: max(1, limits.maxConcurrentStreams),
            idleTimeout: limits.idleTimeout,
            connectAttempts: max(1, limits.connectAttempts),
            connectBackoff: limits.connectBackoff
        )
    }

    /// Connections open or closing, over all hosts.
    var openConnections: Int { connections.count }

    /// What ALPN chose for `key` the last time, if remembered.
    func learnedProtocol(_ key: ConnectionProfile) -> HTTPVersionUsed? { hosts[key]?.learned ?? remembered[key] }

    // MARK: Events

    /// A request for `key` wants a connection; `deadline` is when it stops waiting (nil: never).
    mutating func request(_ id: RequestID, key: ConnectionProfile, deadline: NIODeadline?) -> RequestAction {
        guard !isShutDown else { return .fail(.shutdown) }
        // Taken out of the dictionary while it changes, so that its arrays are not copied (copy on write).
        var host = hosts.removeValue(forKey: key) ?? Host(learned: remembered[key])
        defer { hosts[key] = host }
        if host.waiters.isEmpty, let conn = take(&host) { return .run(on: conn) }
        if host.waiters.isEmpty, key.serverTrust != nil, let conn = adopt(into: &host, key) { return .adopt(conn) }
        host.waiters.append(id)
        waiting[id] = (key, deadline)
        return .wait(connect: nextConnect(&host, key))
    }

    /// The app wants a connection to `key` before its first request. Returns the connect to open, or nil
    /// when the host has a connection that can take a request, one on its way, or no room for another.
    mutating func preconnect(_ key: ConnectionProfile) -> Connect? {
        guard !isShutDown else { return nil }
        var host = hosts.removeValue(forKey: key) ?? Host(learned: remembered[key])
        host.preconnected = true
        defer { store(host, key) }
        guard host.http2 == nil, host.idle.isEmpty, host.connecting == 0, canConnect(host, key) else { return nil }
        return newConnect(&host, key, forRequest: nil)
    }

    /// Connection `conn` is up with the protocol ALPN chose (or h2c / plain HTTP/1.1): the oldest
    /// waiters run on it.
    mutating func connected(_ conn: ConnectionID, version: HTTPVersionUsed, now: NIODeadline) -> [Action] {
        guard let key = connecting.removeValue(forKey: conn), var host = hosts.removeValue(forKey: key)
        else { return [.close(conn)] }
        host.connecting -= 1
        host.learned = version
        host.failedConnects = 0
        host.connections.insert(conn)
        var record = Connection(key: key, version: version)
        var actions: [Action] = []
        if isShutDown {
            record.closing = true
            actions.append(.close(conn))
        } else if version == .http2 {
            if host.http2 == nil {
                host.http2 = conn
                record.idleSince = now
            } else {
                // Two connects raced (the host was known as HTTP/1.1) and both came up h2: one is enough.
                record.retired = true
                record.closing = true
                actions.append(.close(conn))
            }
        } else {
            record.idleSince = now
            host.idle.append(conn)
        }
        connections[conn] = record
        serveWaiters(&host, key, into: &actions)
        // Nobody took it: it waits idle, closed if nobody takes it in time.
        if connections[conn]!.idleSince != nil {
            connections[conn]!.idleTimerArmed = true
            actions.append(.scheduleIdleTimer(conn, after: limits.idleTimeout))
        }
        store(host, key)
        return actions
    }

    /// Connect `conn` failed at `now`. `retryMayHelp`: the failure was one a second try can fix (a reset
    /// or a timeout; not a certificate, a pin, a name that does not resolve, a refusal).
    mutating func connectFailed(_ conn: ConnectionID, retryMayHelp: Bool, now: NIODeadline) -> [Action] {
        guard let key = connecting.removeValue(forKey: conn), var host = hosts.removeValue(forKey: key)
        else { return [] }
        host.connecting -= 1
        host.failedConnects += 1
        var actions: [Action] = []
        defer { store(host, key) }
        let alone = host.connections.isEmpty && host.connecting == 0
        guard retryMayHelp, host.failedConnects < limits.connectAttempts, !isShutDown else {
            // No further try for this failure. Open connections will serve the waiters when released;
            // otherwise each connect still on its way keeps one waiter, and the oldest others fail.
            host.failedConnects = 0
            if host.connections.isEmpty {
                for _ in 0..<max(0, host.waiters.count - host.connecting) {
                    let waiter = host.waiters.removeFirst()
                    waiting[waiter] = nil
                    actions.append(.fail(waiter, .connectFailed(conn)))
                }
            }
            return actions
        }
        var backoff = limits.connectBackoff
        for _ in 1..<host.failedConnects { backoff = backoff * 2 }
        let retryAt = now + backoff
        // With nothing else on its way, those that cannot wait for the next try fail now, with this
        // connect's error.
        if alone { failWaiters(&host, .connectFailed(conn), into: &actions) { $0.map { $0 <= retryAt } ?? false } }
        if host.waiters.count > host.connecting, !host.retryPending {
            host.retryPending = true
            actions.append(.scheduleConnectRetry(key, after: backoff))
        } else if host.waiters.isEmpty, alone {
            host.failedConnects = 0
        }
        return actions
    }

    /// Connect `conn` ended without a verdict: the request that was to answer its certificate question
    /// went away first (a cancelled load). Nothing failed, so nothing counts against the host's
    /// attempts and there is no backoff: the waiters left get a connect of their own at once, whose
    /// question their own load answers.
    mutating func connectLostItsAsker(_ conn: ConnectionID) -> [Action] {
        guard let key = connecting.removeValue(forKey: conn), var host = hosts.removeValue(forKey: key)
        else { return [] }
        host.connecting -= 1
        var actions: [Action] = []
        serveWaiters(&host, key, into: &actions)
        store(host, key)
        return actions
    }

    /// The backoff after a failed connect to `key` is over: connect again for the waiters left.
    mutating func connectRetryDue(_ key: ConnectionProfile) -> [Action] {
        guard var host = hosts.removeValue(forKey: key) else { return [] }
        host.retryPending = false
        var actions: [Action] = []
        serveWaiters(&host, key, into: &actions)
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
            } else if record.inUse == 0, !record.closing, !isShutDown {
                // No stream open: idle, closed if no stream comes in time.
                record.idleSince = now
                if !record.idleTimerArmed {
                    record.idleTimerArmed = true
                    actions.append(.scheduleIdleTimer(conn, after: limits.idleTimeout))
                }
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

    /// The server sent GOAWAY on `conn` (HTTP/2), or its address left the host's answer: it takes no
    /// new request; it closes when its last request ends (now, if idle), and waiters get a new
    /// connection.
    mutating func goingAway(_ conn: ConnectionID) -> [Action] {
        guard var record = connections[conn], var host = hosts.removeValue(forKey: record.key) else { return [] }
        record.retired = true
        if host.http2 == conn { host.http2 = nil }
        host.idle.removeAll { $0 == conn }
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
        if hosts[record.key]?.http2 == conn { hosts[record.key]?.http2 = nil }
        return [.close(conn)]
    }

    /// A queued request stops waiting (its deadline passed, or it was cancelled). Nothing to do if it was
    /// already given a connection.
    mutating func waiterGaveUp(_ id: RequestID, _ reason: Failure) -> [Action] {
        guard let key = waiting.removeValue(forKey: id)?.key, var host = hosts.removeValue(forKey: key) else {
            return []
        }
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
            var host = hosts.removeValue(forKey: key)!
            host.idle = []
            host.http2 = nil
            // A pre-connected host in use (or still warm) is warmed up again on the new network.
            if host.preconnected, host.connecting == 0, canConnect(host, key) {
                actions.append(.connect(newConnect(&host, key, forRequest: nil)))
            }
            hosts[key] = host
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
            connections[h2]!.idleSince = nil
            connections[h2]!.served = true
            return h2
        }
        guard let conn = host.idle.popLast() else { return nil }
        connections[conn]!.inUse = 1
        connections[conn]!.idleSince = nil
        connections[conn]!.served = true
        return conn
    }

    /// A connection of `key`'s host made without the app's say on certificates that no request has run
    /// on, moved into `key`'s partition and taken; nil when there is none.
    private mutating func adopt(into host: inout Host, _ key: ConnectionProfile) -> ConnectionID? {
        var plain = key
        plain.serverTrust = nil
        guard var donor = hosts.removeValue(forKey: plain) else { return nil }
        defer { store(donor, plain) }
        let candidates = donor.idle + (host.http2 == nil ? donor.http2.map { [$0] } ?? [] : [])
        guard
            let conn = candidates.first(where: {
                let record = connections[$0]!
                return !record.served && record.inUse == 0 && !record.retired && !record.closing
            })
        else { return nil }
        donor.connections.remove(conn)
        donor.idle.removeAll { $0 == conn }
        if donor.http2 == conn { donor.http2 = nil }
        host.connections.insert(conn)
        connections[conn]!.key = key
        if connections[conn]!.version == .http2 { host.http2 = conn } else { host.idle.append(conn) }
        host.learned = host.learned ?? connections[conn]!.version
        return take(&host)
    }

    /// Whether a new connection may be opened for `key` now.
    private func canConnect(_ host: Host, _ key: ConnectionProfile) -> Bool {
        let limit = min(limits.maxConnectionsPerHost, max(1, key.connectionLimit ?? .max))
        guard !host.retryPending, host.connections.count + host.connecting < limit else {
            return false
        }
        // A connection that is, or may turn out to be, HTTP/2 carries the request once it has room.
        let mayBeH2 =
            key.versions != .http1Only && (key.origin.isTLS || key.h2c) && host.learned != .http1
        return !(mayBeH2 && (host.connecting > 0 || host.http2 != nil))
    }

    /// A connect for `key` when a waiter has none on its way and the limits allow one.
    private mutating func nextConnect(_ host: inout Host, _ key: ConnectionProfile) -> Connect? {
        guard let oldest = host.waiters.first, host.connecting < host.waiters.count, canConnect(host, key) else {
            return nil
        }
        return newConnect(&host, key, forRequest: oldest)
    }

    /// Counts a new connect on its way for `key`: for waiter `forRequest`, or a pre-connect (nil).
    private mutating func newConnect(_ host: inout Host, _ key: ConnectionProfile, forRequest: RequestID?) -> Connect {
        nextConnection += 1
        host.connecting += 1
        connecting[nextConnection] = key
        let deadline = forRequest == nil ? nil : latestDeadline(of: host)
        return Connect(connection: nextConnection, key: key, forRequest: forRequest, deadline: deadline)
    }

    /// The latest deadline among the host's waiters; nil when one of them waits without one.
    private func latestDeadline(of host: Host) -> NIODeadline? {
        var latest: NIODeadline?
        for waiter in host.waiters {
            guard let own = waiting[waiter]?.deadline else { return nil }
            latest = max(latest ?? own, own)
        }
        return latest
    }

    /// Gives queued requests, oldest first, what the host can offer now (a stream or an idle
    /// connection), then opens connections for those left while the limits allow.
    private mutating func serveWaiters(_ host: inout Host, _ key: ConnectionProfile, into actions: inout [Action]) {
        while let waiter = host.waiters.first, let conn = take(&host) {
            actions.append(.run(waiter, on: conn))
            host.waiters.removeFirst()
            waiting[waiter] = nil
        }
        while let connect = nextConnect(&host, key) { actions.append(.connect(connect)) }
    }

    /// Fails the waiters whose deadline `matches`, keeping the others in order.
    private mutating func failWaiters(
        _ host: inout Host,
        _ failure: Failure,
        into actions: inout [Action],
        where matches: (NIODeadline?) -> Bool
    ) {
        var kept = CircularBuffer<RequestID>()
        while let waiter = host.waiters.popFirst() {
            if matches(waiting[waiter]?.deadline) {
                waiting[waiter] = nil
                actions.append(.fail(waiter, failure))
            } else {
                kept.append(waiter)
            }
        }
        host.waiters = kept
    }

    /// Writes `host` back, or drops it when nothing is left, remembering what its ALPN chose.
    private mutating func store(_ host: Host, _ key: ConnectionProfile) {
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
