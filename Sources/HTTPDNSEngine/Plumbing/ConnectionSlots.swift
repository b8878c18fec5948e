// Which accepted connections a listener keeps when it is full, as nginx and HAProxy protect themselves:
// an attacker who opens connections and sends nothing (or half a request head, or never finishes the TLS
// handshake) must not keep everyone else out until a timeout, and a client that is using its connection
// must not lose it to every newcomer.
//
// The rules (pure: the listener's limiter applies them under its lock and closes what they name):
// - A connection is *idle* from the moment it is accepted until a whole request head has arrived, and
//   again once its response has gone out. A TLS handshake in progress, a head still arriving and a
//   keep-alive wait are all idle, as nginx counts them "reusable". From a complete head until the answer
//   is written (a body being read, the answer being made, a tunnel open) it is *busy*. A connection
//   that has been busy once is *kept alive* when it is idle again: its client is using it.
// - When the table is full, a new connection takes the slot of the connection idle longest that has
//   never carried a request, which is closed: what an attacker's idle connections are.
// - When every idle connection is kept alive (or none is idle), the newcomer waits, as HAProxy queues
//   connections past its maxconn: it is not read, and it gets the first slot a close frees. A wait
//   is bounded twice: at most `maxWaiting` newcomers wait (more are refused), and a newcomer that has
//   waited the listener's queue timeout takes the slot of the connection idle longest, kept alive or
//   not, or is refused when every connection is busy. So kept-alive clients are not churned by a crowd
//   of newcomers, and connections that made one request and went quiet cannot lock newcomers out for
//   longer than the queue timeout.
// - Optionally, at most `maxPerClient` connections per client address, waiting ones included; more are
//   refused, whatever room there is (nginx's limit_conn). Off by default: behind a load balancer every
//   client has the balancer's address.
// Idleness is ordered by a counter bumped at each change, not by a clock: the oldest change to idle is
// the longest idle, and nothing here reads the time.

/// The accepted connections of one listener: who may come in, who waits, and whom to close for it.
package struct ConnectionSlots<ID: Hashable>: Sendable where ID: Sendable {
    /// What an accepted connection gets.
    package enum Admission: Equatable, Sendable {
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
    package enum WaitEnd: Equatable, Sendable {
        /// In, in the slot of this connection (idle longest), which is to be closed.
        case admitEvicting(ID)
        /// Refused: every connection has a request in progress.
        case refuseFull
    }

    private struct Slot {
        var client: String
        /// The counter's value when the connection last became idle; nil while busy.
        var idleSince: UInt64?
        /// It has carried a request: its client is using it.
        var keptAlive = false
    }

    package let limit: Int
    /// At most this many connections from one client address; nil: no such cap.
    package let maxPerClient: Int?
    /// At most this many newcomers wait for a slot.
    let maxWaiting: Int
    private var slots: [ID: Slot] = [:]
    /// Newcomers waiting for a slot, first come first.
    private var waiting: [(id: ID, client: String)] = []
    private var perClient: [String: Int] = [:]
    private var counter: UInt64 = 0

    /// Newcomers that may wait by default: a sixteenth of the limit, at least 4. They hold descriptors
    /// (not read, not answered), so the bound is part of the listener's descriptor budget.
    static func defaultMaxWaiting(limit: Int) -> Int { max(4, limit / 16) }

    package init(limit: Int, maxPerClient: Int? = nil, maxWaiting: Int? = nil) {
        self.limit = limit
        self.maxPerClient = maxPerClient
        self.maxWaiting = maxWaiting ?? Self.defaultMaxWaiting(limit: limit)
    }

    /// Connections in the table now (waiting ones not counted).
    package var count: Int { slots.count }

    /// Newcomers waiting now.
    var waitingCount: Int { waiting.count }

    /// A connection from `client` was accepted.
    package mutating func accepted(_ id: ID, client: String) -> Admission {
        if let maxPerClient, perClient[client, default: 0] >= maxPerClient { return .refuseClientLimit }
        var admission = Admission.admit
        if slots.count >= limit {
            if let victim = idlest(keptAlive: false) {
                remove(victim)
                admission = .admitEvicting(victim)
            } else if waiting.count < maxWaiting {
                waiting.append((id, client))
                perClient[client, default: 0] += 1
                return .wait
            } else {
                return .refuseFull
            }
        }
        take(id, client: client)
        return admission
    }

    /// A waiting newcomer's time is up: it takes the slot of the connection idle longest, or is refused
    /// when every connection is busy. Nil when it no longer waits (a close gave it a slot already).
    mutating func waitExpired(_ id: ID) -> WaitEnd? {
        guard let at = waiting.firstIndex(where: { $0.id == id }) else { return nil }
        let (_, client) = waiting.remove(at: at)
        guard let victim = idlest(keptAlive: false) ?? idlest(keptAlive: true) else {
            release(client)
            return .refuseFull
        }
        remove(victim)
        release(client)
        take(id, client: client)
        return .admitEvicting(victim)
    }

    /// A whole request head arrived (or a tunnel opened): the connection is not to be closed for room.
    package mutating func busy(_ id: ID) {
        slots[id]?.idleSince = nil
        slots[id]?.keptAlive = true
    }

    /// The connection's response has gone out and it waits for the next request.
    package mutating func idle(_ id: ID) {
        guard slots[id] != nil, slots[id]?.idleSince == nil else { return }
        counter += 1
        slots[id]?.idleSince = counter
    }

    /// The connection closed (by either side, or evicted), or a waiting one was given up: its slot is
    /// free, and the newcomer waiting longest, if any, takes it (returned: admit it).
    @discardableResult
    package mutating func closed(_ id: ID) -> ID? {
        if let at = waiting.firstIndex(where: { $0.id == id }) {
            release(waiting.remove(at: at).client)
            return nil
        }
        guard slots[id] != nil else { return nil }
        remove(id)
        guard !waiting.isEmpty, slots.count < limit else { return nil }
        let next = waiting.removeFirst()
        release(next.client)
        take(next.id, client: next.client)
        return next.id
    }

    /// Whether the connection is in the table and idle (for tests and metrics).
    package func isIdle(_ id: ID) -> Bool { slots[id]?.idleSince != nil }

    /// The idle connection that became idle first among those `keptAlive` or not. A scan: the table
    /// holds at most `limit` entries and is only scanned when full.
    private func idlest(keptAlive: Bool) -> ID? {
        var best: (id: ID, since: UInt64)?
        for (id, slot) in slots where slot.keptAlive == keptAlive {
            guard let since = slot.idleSince else { continue }
            if best == nil || since < best!.since { best = (id, since) }
        }
        return best?.id
    }

    private mutating func take(_ id: ID, client: String) {
        counter += 1
        slots[id] = Slot(client: client, idleSince: counter)
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
