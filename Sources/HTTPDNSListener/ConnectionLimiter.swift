// The accepted connections of a listener and the executor of `ConnectionSlots`' rules: it admits each
// channel (closing a silent one that never carried a request when full, or holding the newcomer until a
// slot frees), hears from the connection's handlers when a request is in progress and when it is
// done, and forgets the channel when it closes. Shared by the project's two listeners (HTTPDNSServer's
// HTTPListener and HTTPDNSProxy); it lives here because both build on this module.
//
// A waiting newcomer is held by not completing its channel initializer: NIO registers an accepted
// channel, and so starts reading it, only once the initializer's future succeeds.
//
// Descriptors: the listener holds at most `limit` admitted connections, `maxWaiting` waiting ones, and
// `maxClosing` that are accepted but not yet admitted (`AcceptCounting` sees them on the listening
// channel) or being closed (evicted or refused, their close not complete yet), plus the one accept batch
// NIO finishes after accepting pauses (4 connections, its maxMessagesPerRead). When either bound is
// reached, the listener stops accepting (its autoRead off, as nginx and HAProxy stop accepting at their
// limits) until they fall back: newcomers wait in the kernel's backlog, which costs no descriptor. Before, a flood of 10,000 connections against 1,024 slots held 1,346 descriptors, the
// closes of evicted connections running behind the accepts.

import CoreMetrics
import NIOConcurrencyHelpers
import NIOCore

/// Admits accepted channels up to a limit, makes room by closing a silent connection that never carried
/// a request, holds newcomers when only kept-alive clients could make room, forgets each channel
/// when it closes, and closes them all on stop. Thread-safe: channels on every event loop report to it.
package final class ConnectionLimiter: Sendable {
    private struct Waiter {
        var channel: any Channel
        var admitted: EventLoopPromise<ConnectionSlot?>
        var expiry: Scheduled<Void>?
    }

    private struct State {
        var slots: ConnectionSlots<ObjectIdentifier>
        var channels: [ObjectIdentifier: any Channel] = [:]
        var waiters: [ObjectIdentifier: Waiter] = [:]
        /// Evicted or refused channels whose close has not completed.
        var closing = 0
        /// Accepted channels not yet admitted (counted by `AcceptCounting`).
        var pending = 0
        /// The listening channel, once a connection named it (its parent): paused and resumed here.
        var listener: (any Channel)?
        var acceptingPaused = false
        /// When the floor timer fires (`ConnectionSlots.nextFloorPass`), while newcomers wait.
        var floorTimerAt: NIODeadline?
    }

    let limit: Int
    /// At most this many evicted or refused connections being closed before accepting pauses.
    let maxClosing: Int
    /// How long a newcomer waits for a slot before it takes a kept-alive connection's or is refused.
    let queueTimeout: TimeAmount
    private let state: NIOLockedValueBox<State>
    private let evicted: Counter
    private let queued: Counter
    private let refusedFull: Counter
    private let refusedClient: Counter

    /// Descriptors a listener of `limit` connections may hold besides them: waiting newcomers,
    /// connections accepted and not yet admitted or being closed, and the accept batch NIO finishes
    /// after accepting pauses. For the descriptor budget.
    package static func headroom(limit: Int) -> Int {
        ConnectionSlots<Int>.defaultMaxWaiting(limit: limit) + defaultMaxClosing(limit: limit) + 4
    }

    static func defaultMaxClosing(limit: Int) -> Int { max(4, limit / 16) }

    /// `metricsPrefix` names the counters: `PREFIX_connections_evicted_total`,
    /// `PREFIX_connections_queued_total` and `PREFIX_connections_refused_total{reason="full"|"client_limit"}`.
    package init(
        limit: Int,
        maxPerClient: Int? = nil,
        queueTimeout: TimeAmount = .seconds(2),
        metricsPrefix: String
    ) {
        self.limit = limit
        self.maxClosing = Self.defaultMaxClosing(limit: limit)
        self.queueTimeout = queueTimeout
        self.state = NIOLockedValueBox(State(slots: ConnectionSlots(limit: limit, maxPerClient: maxPerClient)))
        self.evicted = Counter(label: "\(metricsPrefix)_connections_evicted_total")
        self.queued = Counter(label: "\(metricsPrefix)_connections_queued_total")
        self.refusedFull = Counter(
            label: "\(metricsPrefix)_connections_refused_total",
            dimensions: [("reason", "full")]
        )
        self.refusedClient = Counter(
            label: "\(metricsPrefix)_connections_refused_total",
            dimensions: [("reason", "client_limit")]
        )
    }

    /// Takes `channel` in (it is forgotten when it closes). When the listener is full, the connection
    /// idle longest that never carried a request (past `ConnectionSlots.Floors.newcomer`) is closed to make
    /// room; otherwise the future waits until a slot frees or the queue timeout ends the wait. Nil when refused
    /// (too many waiting, every slot busy at the end of the wait, or the client's cap reached), and the
    /// caller closes it. The connection starts idle: see `ConnectionSlot`. Call it on the channel's loop.
    package func admit(_ channel: any Channel) -> EventLoopFuture<ConnectionSlot?> {
        let id = ObjectIdentifier(channel)
        let client = channel.remoteAddress?.ipAddress ?? "?"
        let promise = channel.eventLoop.makePromise(of: ConnectionSlot?.self)
        let (admission, victim) = state.withLockedValue {
            state -> (ConnectionSlots<ObjectIdentifier>.Admission, (any Channel)?) in
            if state.listener == nil { state.listener = channel.parent }
            if state.pending > 0 { state.pending -= 1 }
            let admission = state.slots.accepted(id, client: client, now: .now())
            var victim: (any Channel)?
            switch admission {
            case .admit:
                state.channels[id] = channel
            case .admitEvicting(let old):
                victim = state.channels.removeValue(forKey: old)
                state.channels[id] = channel
            case .wait:
                state.waiters[id] = Waiter(channel: channel, admitted: promise)
            case .refuseFull, .refuseClientLimit:
                break
            }
            return (admission, victim)
        }
        switch admission {
        case .admit:
            promise.succeed(admitted(channel))
        case .admitEvicting:
            evicted.increment()
            if let victim { close(victim) }
            promise.succeed(admitted(channel))
        case .wait:
            queued.increment()
            let expiry = channel.eventLoop.scheduleTask(in: queueTimeout) { self.waitExpired(id) }
            let stillWaiting = state.withLockedValue { state -> Bool in
                guard state.waiters[id] != nil else { return false }
                state.waiters[id]?.expiry = expiry
                return true
            }
            if !stillWaiting { expiry.cancel() }
            armFloorTimer(on: channel.eventLoop)
        case .refuseFull:
            refusedFull.increment()
            refused(channel)
            promise.succeed(nil)
        case .refuseClientLimit:
            refusedClient.increment()
            refused(channel)
            promise.succeed(nil)
        }
        // It is no longer on its way (`pending`): accepting may start again.
        updateAccepting()
        return promise.futureResult
    }

    /// `channel` is in the table: forget it when it closes, and give its slot to the newcomer waiting
    /// longest.
    private func admitted(_ channel: any Channel) -> ConnectionSlot {
        let id = ObjectIdentifier(channel)
        channel.closeFuture.whenComplete { _ in
            let next = self.state.withLockedValue { state -> Waiter? in
                // An evicted channel's slot already went to the connection that took it.
                guard state.channels[id].map({ $0 === channel }) == true else { return nil }
                state.channels[id] = nil
                guard let nextID = state.slots.closed(id, now: .now()) else { return nil }
                guard let waiter = state.waiters.removeValue(forKey: nextID) else { return nil }
                state.channels[nextID] = waiter.channel
                return waiter
            }
            if let next {
                next.expiry?.cancel()
                next.admitted.succeed(self.admitted(next.channel))
                self.updateAccepting()
            }
        }
        return ConnectionSlot(limiter: self, id: id)
    }

    /// Runs `floorPassed` when the next silent connection passes its floor while newcomers wait, unless a
    /// timer is already set for that moment or earlier.
    private func armFloorTimer(on loop: any EventLoop) {
        let at = state.withLockedValue { state -> NIODeadline? in
            guard let next = state.slots.nextFloorPass() else { return nil }
            if let armed = state.floorTimerAt, armed <= next { return nil }
            state.floorTimerAt = next
            return next
        }
        guard let at else { return }
        loop.scheduleTask(deadline: at) { self.floorPassed(on: loop) }
    }

    /// Silent connections passed their floor: waiting newcomers take their slots.
    private func floorPassed(on loop: any EventLoop) {
        let admitted = state.withLockedValue { state -> [(Waiter?, (any Channel)?)] in
            state.floorTimerAt = nil
            return state.slots.admitWaiting(now: .now()).map { pair in
                let victim = state.channels.removeValue(forKey: pair.evicted)
                // (No waiter after `closeAll`: the slot goes with the listener.)
                let waiter = state.waiters.removeValue(forKey: pair.admitted)
                if let waiter { state.channels[pair.admitted] = waiter.channel }
                return (waiter, victim)
            }
        }
        for (waiter, victim) in admitted {
            evicted.increment()
            if let victim { close(victim) }
            guard let waiter else { continue }
            waiter.expiry?.cancel()
            waiter.admitted.succeed(self.admitted(waiter.channel))
        }
        if !admitted.isEmpty { updateAccepting() }
        armFloorTimer(on: loop)
    }

    /// A waiting newcomer's time is up.
    private func waitExpired(_ id: ObjectIdentifier) {
        let outcome = state.withLockedValue {
            state -> (Waiter, ConnectionSlots<ObjectIdentifier>.WaitEnd, (any Channel)?)? in
            guard let end = state.slots.waitExpired(id, now: .now()), let waiter = state.waiters.removeValue(forKey: id)
            else {
                return nil
            }
            guard case .admitEvicting(let old) = end else { return (waiter, end, nil) }
            let victim = state.channels.removeValue(forKey: old)
            state.channels[id] = waiter.channel
            return (waiter, end, victim)
        }
        guard let outcome else { return }
        let (waiter, end, victim) = outcome
        switch end {
        case .admitEvicting:
            evicted.increment()
            if let victim { close(victim) }
            waiter.admitted.succeed(admitted(waiter.channel))
        case .refuseFull:
            refusedFull.increment()
            refused(waiter.channel)
            waiter.admitted.succeed(nil)
        }
        updateAccepting()
    }

    /// Closes an evicted connection, counting it until its close completes.
    private func close(_ victim: any Channel) {
        state.withLockedValue { $0.closing += 1 }
        updateAccepting()
        victim.close(promise: nil)
        victim.closeFuture.whenComplete { _ in
            self.state.withLockedValue { $0.closing -= 1 }
            self.updateAccepting()
        }
    }

    /// A refused connection, which the caller closes: counted until its close completes.
    private func refused(_ channel: any Channel) {
        state.withLockedValue { $0.closing += 1 }
        updateAccepting()
        channel.closeFuture.whenComplete { _ in
            self.state.withLockedValue { $0.closing -= 1 }
            self.updateAccepting()
        }
    }

    /// Stops accepting while newcomers would be refused (the waiting room full and no silent connection
    /// to make room) or too many closes are under way, and starts again once the closes have fallen to half
    /// their bound and the waiting room to half, or a silent connection could make room.
    private func updateAccepting() {
        let listener = state.withLockedValue { state -> (any Channel)? in
            guard let listener = state.listener else { return nil }
            let unsettled = state.closing + state.pending
            let over = unsettled >= maxClosing || state.slots.refusesNewcomers
            let roomy = state.slots.waitingCount <= state.slots.maxWaiting / 2 || state.slots.hasSilentConnection
            let under = unsettled <= maxClosing / 2 && roomy
            if over {
                // Again when already paused: AcceptPause (out of descriptors) may have resumed it.
                state.acceptingPaused = true
                return listener
            }
            if under, state.acceptingPaused {
                state.acceptingPaused = false
                return listener
            }
            return nil
        }
        // On the listener's loop, the latest decision, not this one: two decisions made on two loops
        // could otherwise reach the listener in the wrong order and leave it paused for good.
        guard let listener else { return }
        listener.eventLoop.execute {
            let accepting = self.state.withLockedValue { !$0.acceptingPaused }
            listener.setOption(.autoRead, value: accepting).whenFailure { _ in }  // a closed listener
        }
    }

    /// The listener accepted a connection, not admitted yet.
    fileprivate func accepted(by listener: any Channel) {
        state.withLockedValue {
            $0.pending += 1
            if $0.listener == nil { $0.listener = listener }
        }
        updateAccepting()
    }

    fileprivate func use(_ id: ObjectIdentifier, _ use: ConnectionSlots<ObjectIdentifier>.Use) {
        let now = NIODeadline.now()
        state.withLockedValue { $0.slots.use(id, use, now: now) }
    }

    fileprivate func progress(_ id: ObjectIdentifier) {
        let now = NIODeadline.now()
        state.withLockedValue { $0.slots.progress(id, now: now) }
    }

    /// Whether `channel` is in the table and idle: no request in progress (for tests and metrics).
    func isIdle(_ channel: any Channel) -> Bool {
        state.withLockedValue { $0.slots.isIdle(ObjectIdentifier(channel)) }
    }

    /// Connections open now (waiting ones not counted).
    package var count: Int { state.withLockedValue { $0.channels.count } }

    /// The connections open now.
    package var channels: [any Channel] { state.withLockedValue { Array($0.channels.values) } }

    /// Closes every open connection, and refuses every waiting one.
    package func closeAll() async {
        let waiters = state.withLockedValue { state -> [Waiter] in
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters {
            waiter.expiry?.cancel()
            waiter.admitted.succeed(nil)
            try? await waiter.channel.close()
        }
        for channel in channels { try? await channel.close() }
    }
}

/// One admitted connection's place in its listener: its handlers say when a request is in progress
/// (`busy`: a whole request head arrived, a tunnel opened), when only answers held back by the client
/// remain (`sending`, and `progress` when they move on), and when it is done (`idle`: the last answer
/// has gone out). See `ConnectionSlots` for which of them may be closed to make room.
package struct ConnectionSlot: Sendable {
    fileprivate let limiter: ConnectionLimiter
    fileprivate let id: ObjectIdentifier

    package func busy() { limiter.use(id, .busy) }
    package func sending() { limiter.use(id, .sending) }
    package func idle() { limiter.use(id, .idle) }
    package func progress() { limiter.progress(id) }
}

/// On a listening channel, before NIO's accept handler: tells the limiter of each accepted connection
/// as it is accepted, so connections on their way to `admit` count against its bounds, and accepting
/// pauses before they pile up.
final class AcceptCounting: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = any Channel

    private let limiter: ConnectionLimiter

    init(_ limiter: ConnectionLimiter) { self.limiter = limiter }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        limiter.accepted(by: context.channel)
        context.fireChannelRead(data)
    }
}
