// Which accepted connections a listener keeps when it is full, as nginx and HAProxy protect themselves:
// an attacker who opens connections and sends nothing (or half a request head, or never finishes the TLS
// handshake) must not keep everyone else out until a timeout, and a client that is using its connection
// must not lose it to any newcomer.
//
// The rules (pure: the listener's limiter applies them under its lock and closes what they name; the time
// comes in with each event):
// - A connection is *idle* from the moment it is accepted until a whole request head has arrived, and
//   again once its last answer has gone out. A TLS handshake in progress, a head still arriving and a
//   keep-alive wait are all idle, as nginx counts them "reusable". From a complete head until the answer
//   is made it is *busy*; while only answers remain, written but held back by the client's flow-control
//   window, it is *sending*. A connection that has carried a request (even one answered inside a
//   single read, as a hosts answer is) is *kept alive*: its client is using it.
// - When the table is full, a new connection takes the slot of the connection idle longest that has
//   never carried a request and has been idle at least `newcomerFloor` (what an attacker's silent
//   connections are), which is closed. A younger one is not closed while the newcomer can wait instead: a
//   real client needs a moment for its handshake and first head. When the waiting room is full as well (a
//   flood), the silent connection idle longest is closed however young: refusing newcomers then would
//   lock real clients out behind the flood.
// - Otherwise the newcomer waits, as HAProxy queues connections past its maxconn: it is not read, and it
//   gets the first slot a close frees, or the slot of the first silent connection to pass the floor
//   (`nextFloorPass`, `admitWaiting`), so a flood turns over as fast as the floor allows. A wait is bounded twice: at most `maxWaiting` newcomers wait (more
//   are refused), and a newcomer that has waited the listener's queue timeout takes the slot of, in this
//   order: a never-used connection past the floor; a sending connection whose answers made no progress
//   for `stallFloor` or have been going out for `sendingBound` (the bound on a whole answer's time,
//   applied only when the listener is full; nginx's send_timeout alone bounds each write); a kept-alive
//   connection idle at least `keptAliveFloor`. Else it is refused. A busy connection, and a client that
//   was answered within `keptAliveFloor`, never make room: HAProxy closes no client in use to admit a
//   newcomer.
// - Optionally, at most `maxPerClient` connections per client address, waiting ones included; more are
//   refused, whatever room there is (nginx's limit_conn). Off by default: behind a load balancer every
//   client has the balancer's address.

import NIOCore

/// The accepted connections of one listener: who may come in, who waits, and whom to close for it.
package struct ConnectionSlots<ID: Hashable>: Sendable where ID: Sendable {
    /// What an accepted connection gets.
    enum Admission: Equatable, Sendable {
        /// In, with a free slot.
        case admit
        /// In, in the slot of this connection (idle longest, never used for a request), which is to be
        /// closed.
        case admitEvicting(ID)
        /// Not read yet: it waits for a slot (`closed` names it when one frees) until the queue timeout
        /// (`waitExpired`).
        case wait
        /// Refused: too many newcomers wait already.
        case refuseFull
        /// Refused: this client address already has `maxPerClient` connections.
        case refuseClientLimit
    }

    /// How a wait ended when its time was up.
    enum WaitEnd: Equatable, Sendable {
        /// In, in the slot of this connection, which is to be closed.
        case admitEvicting(ID)
        /// Refused: every connection is in use.
        case refuseFull
    }

    /// What a connection is doing, as its handlers report it.
    package enum Use: Equatable, Sendable {
        /// No request in progress and no answer left to send.
        case idle
        /// A request arrived whole and is being answered (or a tunnel is open).
        case busy
        /// Only answers remain, written and waiting for the client's flow-control window.
        case sending
    }

    private enum State {
        case idle(since: NIODeadline)
        case busy
        case sending(since: NIODeadline, progress: NIODeadline)
    }

    private struct Slot {
        var client: String
        var state: State
        /// It has carried a request: its client is using it.
        var keptAlive = false
    }

    /// How long the connections that make room must have been as they are.
    struct Floors: Sendable {
        /// A connection that never carried a request, idle at least this long (from its accept: its
        /// handshake and first head have had this long), may be closed for a newcomer.
        var newcomer: TimeAmount = .seconds(1)
        /// After a newcomer's wait: a sending connection whose answers made no progress this long…
        var stall: TimeAmount = .seconds(2)
        /// …or that has been sending this long, whatever its pace.
        var sendingBound: TimeAmount = .seconds(30)
        /// After a newcomer's wait: a kept-alive connection idle at least this long. A client that was
        /// answered more recently is in use.
        var keptAlive: TimeAmount = .seconds(10)
        init() {}
    }

    let limit: Int
    /// At most this many connections from one client address; nil: no such cap.
    let maxPerClient: Int?
    /// At most this many newcomers wait for a slot.
    let maxWaiting: Int
    let floors: Floors
    private var slots: [ID: Slot] = [:]
    /// Newcomers waiting for a slot, first come first.
    private var waiting: [(id: ID, client: String)] = []
    private var perClient: [String: Int] = [:]

    /// Newcomers that may wait by default: a sixteenth of the limit, at least 4. They hold descriptors
    /// (not read, not answered), so the bound is part of the listener's descriptor budget.
    static func defaultMaxWaiting(limit: Int) -> Int { max(4, limit / 16) }

    init(limit: Int, maxPerClient: Int? = nil, maxWaiting: Int? = nil, floors: Floors = Floors()) {
        self.limit = limit
        self.maxPerClient = maxPerClient
        self.maxWaiting = maxWaiting ?? Self.defaultMaxWaiting(limit: limit)
        self.floors = floors
    }

    /// Connections in the table now (waiting ones not counted).
    var count: Int { slots.count }

    /// Newcomers waiting now.
    var waitingCount: Int { waiting.count }

    /// Whether a newcomer would be refused now: the waiting room is full and no silent connection could
    /// make room. Only then need the listener stop accepting; under a flood of silent connections it keeps
    /// accepting, each newcomer taking the oldest one's slot.
    var refusesNewcomers: Bool { waiting.count >= maxWaiting && !hasSilentConnection }

    /// Whether some connection never carried a request and is idle.
    var hasSilentConnection: Bool {
        slots.values.contains { slot in
            guard !slot.keptAlive, case .idle = slot.state else { return false }
            return true
        }
    }

    /// A connection from `client` was accepted at `now`.
    mutating func accepted(_ id: ID, client: String, now: NIODeadline) -> Admission {
        if let maxPerClient, perClient[client, default: 0] >= maxPerClient { return .refuseClientLimit }
        var admission = Admission.admit
        if slots.count >= limit {
            if let victim = idlest(keptAlive: false, idleBefore: now - floors.newcomer) {
                remove(victim)
                admission = .admitEvicting(victim)
            } else if waiting.count < maxWaiting {
                waiting.append((id, client))
                perClient[client, default: 0] += 1
                return .wait
            } else if let victim = idlest(keptAlive: false, idleBefore: now) {
                // The waiting room is full too: a flood, whose newest arrivals are as likely real clients
                // as the silent ones they replace. Refusing them would lock real clients out behind it.
                remove(victim)
                admission = .admitEvicting(victim)
            } else {
                return .refuseFull
            }
        }
        take(id, client: client, now: now)
        return admission
    }

    /// A waiting newcomer's time is up at `now`: it takes the slot of a connection that may make room
    /// (see the rules above), or is refused. Nil when it no longer waits (a close gave it a slot already).
    mutating func waitExpired(_ id: ID, now: NIODeadline) -> WaitEnd? {
        guard let at = waiting.firstIndex(where: { $0.id == id }) else { return nil }
        let (_, client) = waiting.remove(at: at)
        guard
            let victim = idlest(keptAlive: false, idleBefore: now - floors.newcomer)
                ?? stalled(now: now)
                ?? idlest(keptAlive: true, idleBefore: now - floors.keptAlive)
        else {
            release(client)
            return .refuseFull
        }
        remove(victim)
        release(client)
        take(id, client: client, now: now)
        return .admitEvicting(victim)
    }

    /// When a waiting newcomer could next take a silent connection's slot: the moment the connection idle
    /// longest among those that never carried a request passes `floors.newcomer`. Nil when nobody waits or
    /// no such connection is there (a close or the end of a wait will settle it).
    func nextFloorPass() -> NIODeadline? {
        guard !waiting.isEmpty else { return nil }
        var oldest: NIODeadline?
        for slot in slots.values where !slot.keptAlive {
            guard case .idle(let since) = slot.state else { continue }
            if oldest == nil || since < oldest! { oldest = since }
        }
        return oldest.map { $0 + floors.newcomer }
    }

    /// Waiting newcomers that now take the slots of silent connections past the floor, first come first:
    /// each is admitted, and the connection it replaces is to be closed. So a flood against a full table
    /// turns over as fast as its connections pass the floor, not one wait at a time.
    mutating func admitWaiting(now: NIODeadline) -> [(admitted: ID, evicted: ID)] {
        var pairs: [(admitted: ID, evicted: ID)] = []
        while !waiting.isEmpty, let victim = idlest(keptAlive: false, idleBefore: now - floors.newcomer) {
            let next = waiting.removeFirst()
            remove(victim)
            release(next.client)
            take(next.id, client: next.client, now: now)
            pairs.append((next.id, victim))
        }
        return pairs
    }

    /// The connection's handlers say what it does now. `.busy` also marks it kept alive: a request
    /// answered within one read reports `.busy` and then `.idle`.
    mutating func use(_ id: ID, _ use: Use, now: NIODeadline) {
        guard let slot = slots[id] else { return }
        switch (use, slot.state) {
        case (.busy, _):
            slots[id]!.state = .busy
            slots[id]!.keptAlive = true
        case (.idle, .idle), (.sending, .sending):
            break
        case (.idle, _):
            slots[id]!.state = .idle(since: now)
        case (.sending, _):
            slots[id]!.state = .sending(since: now, progress: now)
        }
    }

    /// A sending connection's answers moved on (the client opened its window): its stall starts again.
    mutating func progress(_ id: ID, now: NIODeadline) {
        guard case .sending(let since, _) = slots[id]?.state else { return }
        slots[id]!.state = .sending(since: since, progress: now)
    }

    /// The connection closed (by either side, or evicted), or a waiting one was given up: its slot is
    /// free, and the newcomer waiting longest, if any, takes it (returned: admit it).
    @discardableResult
    mutating func closed(_ id: ID, now: NIODeadline) -> ID? {
        if let at = waiting.firstIndex(where: { $0.id == id }) {
            release(waiting.remove(at: at).client)
            return nil
        }
        guard slots[id] != nil else { return nil }
        remove(id)
        guard !waiting.isEmpty, slots.count < limit else { return nil }
        let next = waiting.removeFirst()
        release(next.client)
        take(next.id, client: next.client, now: now)
        return next.id
    }

    /// Whether the connection is in the table and idle (for tests and metrics).
    func isIdle(_ id: ID) -> Bool {
        guard case .idle = slots[id]?.state else { return false }
        return true
    }

    /// The connection idle longest among those `keptAlive` or not, if it became idle before
    /// `idleBefore`. A scan: the table holds at most `limit` entries and is only scanned when full.
    private func idlest(keptAlive: Bool, idleBefore: NIODeadline) -> ID? {
        var best: (id: ID, since: NIODeadline)?
        for (id, slot) in slots where slot.keptAlive == keptAlive {
            guard case .idle(let since) = slot.state, since <= idleBefore else { continue }
            if best == nil || since < best!.since { best = (id, since) }
        }
        return best?.id
    }

    /// The sending connection stalled longest past `floors.stall`, or sending longest past
    /// `floors.sendingBound`.
    private func stalled(now: NIODeadline) -> ID? {
        var best: (id: ID, progress: NIODeadline)?
        for (id, slot) in slots {
            guard case .sending(let since, let progress) = slot.state else { continue }
            guard now - progress >= floors.stall || now - since >= floors.sendingBound else { continue }
            if best == nil || progress < best!.progress { best = (id, progress) }
        }
        return best?.id
    }

    private mutating func take(_ id: ID, client: String, now: NIODeadline) {
        slots[id] = Slot(client: client, state: .idle(since: now))
        perClient[client, default: 0] += 1
    }

    private mutating func remove(_ id: ID) {
        guard let slot = slots.removeValue(forKey: id) else { return }
        release(slot.client)
    }

    private mutating func release(_ client: String) {
        let left = perClient[client, default: 1] - 1
        perClient[client] = left > 0 ? left : nil
    }
}
