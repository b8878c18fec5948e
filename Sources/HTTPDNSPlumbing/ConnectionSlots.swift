// Which accepted connections a listener keeps when it is full, as nginx and HAProxy protect themselves:
// an attacker who opens connections and sends nothing (or half a request head, or never finishes the TLS
// handshake) must not keep everyone else out until a timeout.
//
// The rules (pure: the listener's limiter applies them under its lock and closes what they name):
// - A connection is *idle* from the moment it is accepted until a whole request head has arrived, and
//   again once its response has gone out. A TLS handshake in progress, a head still arriving and a
//   keep-alive wait are all idle, as nginx counts them "reusable". From a complete head until the answer
//   is written (a body being read, the answer being made, a tunnel open) it is *busy*.
// - When the table is full, a new connection takes the slot of the connection idle longest, which is
//   closed. Only when every slot is busy is the new connection refused.
// - Optionally, at most `maxPerClient` connections per client address; more are refused, whatever
//   room there is (nginx's limit_conn). Off by default: behind a load balancer every client has the
//   balancer's address.
// Idleness is ordered by a counter bumped at each change, not by a clock: the oldest change to idle is
// the longest idle, and nothing here reads the time.

/// The accepted connections of one listener: who may come in, and whom to close for it.
package struct ConnectionSlots<ID: Hashable>: Sendable where ID: Sendable {
    /// What an accepted connection gets.
    package enum Admission: Equatable, Sendable {
        /// In, with a free slot.
        case admit
        /// In, in the slot of this connection (idle longest), which is to be closed.
        case admitEvicting(ID)
        /// Refused: every slot holds a connection with a request in progress.
        case refuseFull
        /// Refused: this client address already has `maxPerClient` connections.
        case refuseClientLimit
    }

    private struct Slot {
        var client: String
        /// The counter's value when the connection last became idle; nil while busy.
        var idleSince: UInt64?
    }

    package let limit: Int
    /// At most this many connections from one client address; nil: no such cap.
    package let maxPerClient: Int?
    private var slots: [ID: Slot] = [:]
    private var perClient: [String: Int] = [:]
    private var counter: UInt64 = 0

    package init(limit: Int, maxPerClient: Int? = nil) {
        self.limit = limit
        self.maxPerClient = maxPerClient
    }

    /// Connections in the table now.
    package var count: Int { slots.count }

    /// A connection from `client` was accepted.
    package mutating func accepted(_ id: ID, client: String) -> Admission {
        if let maxPerClient, perClient[client, default: 0] >= maxPerClient { return .refuseClientLimit }
        var admission = Admission.admit
        if slots.count >= limit {
            guard let victim = idlest() else { return .refuseFull }
            remove(victim)
            admission = .admitEvicting(victim)
        }
        counter += 1
        slots[id] = Slot(client: client, idleSince: counter)
        perClient[client, default: 0] += 1
        return admission
    }

    /// A whole request head arrived (or a tunnel opened): the connection is not to be closed for room.
    package mutating func busy(_ id: ID) {
        slots[id]?.idleSince = nil
    }

    /// The connection's response has gone out and it waits for the next request.
    package mutating func idle(_ id: ID) {
        guard slots[id] != nil, slots[id]?.idleSince == nil else { return }
        counter += 1
        slots[id]?.idleSince = counter
    }

    /// The connection closed (by either side, or evicted): its slot is free.
    package mutating func closed(_ id: ID) {
        remove(id)
    }

    /// Whether the connection is in the table and idle (for tests and metrics).
    package func isIdle(_ id: ID) -> Bool { slots[id]?.idleSince != nil }

    /// The idle connection that became idle first. A scan: the table holds at most `limit` entries and
    /// is only scanned when full.
    private func idlest() -> ID? {
        var best: (id: ID, since: UInt64)?
        for (id, slot) in slots {
            guard let since = slot.idleSince else { continue }
            if best == nil || since < best!.since { best = (id, since) }
        }
        return best?.id
    }

    private mutating func remove(_ id: ID) {
        guard let slot = slots.removeValue(forKey: id) else { return }
        let left = perClient[slot.client, default: 1] - 1
        perClient[slot.client] = left > 0 ? left : nil
    }
}
