// The accepted connections of a listener and the executor of `ConnectionSlots`' rules: it admits each
// channel (closing the one idle longest when full), hears from the connection's handlers when a request
// is in progress and when it is done, and forgets the channel when it closes. Shared by the project's
// two listeners (HTTPDNSServer's HTTPListener and HTTPDNSProxy); it lives here because both build on
// this module.

import CoreMetrics
import NIOConcurrencyHelpers
import NIOCore

/// Admits accepted channels up to a limit, makes room by closing the connection idle longest, forgets
/// each channel when it closes, and closes them all on stop. Thread-safe: channels on every event loop
/// report to it.
package final class ConnectionLimiter: Sendable {
    private struct State {
        var slots: ConnectionSlots<ObjectIdentifier>
        var channels: [ObjectIdentifier: any Channel] = [:]
    }

    package let limit: Int
    private let state: NIOLockedValueBox<State>
    private let evicted: Counter
    private let refusedFull: Counter
    private let refusedClient: Counter

    /// `metricsPrefix` names the counters: `PREFIX_connections_evicted_total` and
    /// `PREFIX_connections_refused_total{reason="full"|"client_limit"}`.
    package init(limit: Int, maxPerClient: Int? = nil, metricsPrefix: String) {
        self.limit = limit
        self.state = NIOLockedValueBox(State(slots: ConnectionSlots(limit: limit, maxPerClient: maxPerClient)))
        self.evicted = Counter(label: "\(metricsPrefix)_connections_evicted_total")
        self.refusedFull = Counter(
            label: "\(metricsPrefix)_connections_refused_total",
            dimensions: [("reason", "full")]
        )
        self.refusedClient = Counter(
            label: "\(metricsPrefix)_connections_refused_total",
            dimensions: [("reason", "client_limit")]
        )
    }

    /// Takes `channel` in (it is forgotten when it closes); when the listener is full, the connection
    /// idle longest is closed to make room. Nil when refused (every slot busy, or the client's cap
    /// reached), and the caller closes it. The connection starts idle: see `ConnectionSlot`.
    package func admit(_ channel: any Channel) -> ConnectionSlot? {
        let id = ObjectIdentifier(channel)
        let client = channel.remoteAddress?.ipAddress ?? "?"
        let (admission, victim) = state.withLockedValue {
            state -> (ConnectionSlots<ObjectIdentifier>.Admission, (any Channel)?) in
            let admission = state.slots.accepted(id, client: client)
            var victim: (any Channel)?
            switch admission {
            case .admit:
                state.channels[id] = channel
            case .admitEvicting(let old):
                victim = state.channels.removeValue(forKey: old)
                state.channels[id] = channel
            case .refuseFull, .refuseClientLimit:
                break
            }
            return (admission, victim)
        }
        switch admission {
        case .admit:
            break
        case .admitEvicting:
            evicted.increment()
            victim?.close(promise: nil)
        case .refuseFull:
            refusedFull.increment()
            return nil
        case .refuseClientLimit:
            refusedClient.increment()
            return nil
        }
        channel.closeFuture.whenComplete { _ in
            self.state.withLockedValue { state in
                // An evicted channel's slot already went to the connection that took it.
                guard state.channels[id].map({ $0 === channel }) == true else { return }
                state.channels[id] = nil
                state.slots.closed(id)
            }
        }
        return ConnectionSlot(limiter: self, id: id)
    }

    fileprivate func busy(_ id: ObjectIdentifier) { state.withLockedValue { $0.slots.busy(id) } }
    fileprivate func idle(_ id: ObjectIdentifier) { state.withLockedValue { $0.slots.idle(id) } }

    /// Connections open now.
    package var count: Int { state.withLockedValue { $0.channels.count } }

    /// The connections open now.
    package var channels: [any Channel] { state.withLockedValue { Array($0.channels.values) } }

    /// Closes every open connection.
    package func closeAll() async {
        for channel in channels { try? await channel.close() }
    }
}

/// One admitted connection's place in its listener: its handlers say when a request is in progress
/// (`busy`: a whole request head arrived, a tunnel opened) and when it is done (`idle`: the response
/// has gone out). Only an idle connection is closed to make room for a new one.
package struct ConnectionSlot: Sendable {
    fileprivate let limiter: ConnectionLimiter
    fileprivate let id: ObjectIdentifier

    package func busy() { limiter.busy(id) }
    package func idle() { limiter.idle(id) }
}
