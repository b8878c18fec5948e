// The one way a load calls the URL loading system's client (see `ClientGate`).

import Foundation
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Serializes calls to the URL loading system's client and stops them for good once the load has
/// finished, failed or been stopped: corelibs crashes on a client call for a finished task.
///
/// One rule on every platform: each call is made where the loading system wants it, in order, through
/// `schedule` (`LoadContext.clientSchedule`): corelibs, the task's serial work queue, where
/// `stopLoading` also runs and where the session's unsynchronized task registry lives; Apple, the run
/// loop of the thread that called `startLoading`, where `stopLoading` is called too. That is what keeps
/// a call and `stopLoading` apart; the lock only guards the gate's own state and is never held during a
/// call, so the loading system may call back into the protocol (`stopLoading`) from inside one. Without a
/// schedule (a load with no task) the call is made on the calling thread.
///
/// `@unchecked Sendable`: the client and the protocol are not Sendable; they and `open` are read and
/// written only under `lock`, and `schedule` is a `let`. A plain `NIOLock`, not a `NIOLockedValueBox`:
/// the box is `Sendable` only for `Sendable` state.
final class ClientGate: @unchecked Sendable {
    private let lock = NIOLock()
    private var open = true
    // Dropped when the gate closes: the protocol holds its gate (`loading`) and the gate its protocol,
    // and corelibs never calls `stopLoading` after a load that finished, so a gate that kept these
    // would keep every finished protocol, its request body and its client alive (the soak found it:
    // about 20 KiB per URLSession request, for good).
    private var client: (any URLProtocolClient)?
    private var owner: URLProtocol?
    private let schedule: ClientSchedule?
    /// Run once, when the gate closes (a question put to the delegate that nobody can answer now).
    private var closeActions: [@Sendable () -> Void] = []
    /// While the task is suspended: the client calls held back, in order (nil when it is not).
    private var held: [@Sendable () -> Void]?
    /// Loads waiting for the task to be resumed before they go on reading.
    private var resumers: [CheckedContinuation<Void, Never>] = []

    init(client: any URLProtocolClient, owner: URLProtocol, schedule: ClientSchedule?) {
        self.client = client
        self.owner = owner
        self.schedule = schedule
    }

    var isOpen: Bool { lock.withLock { open } }

    /// The client and protocol while the gate is open; with `closing`, the gate closes as they are
    /// taken (the last call).
    private func take(closing: Bool) -> (any URLProtocolClient, URLProtocol)? {
        let (taken, actions, waiting) = lock.withLock {
            () -> ((any URLProtocolClient, URLProtocol)?, [@Sendable () -> Void], [CheckedContinuation<Void, Never>]) in
            guard open, let client, let owner else { return (nil, [], []) }
            guard closing else { return ((client, owner), [], []) }
            (open, self.client, self.owner, held) = (false, nil, nil, nil)
            defer { (closeActions, resumers) = ([], []) }
            return ((client, owner), closeActions, resumers)
        }
        for action in actions { action() }
        for continuation in waiting { continuation.resume() }
        return taken
    }

    /// The task was suspended (corelibs says so with `stopLoading`): the load goes on, but its client
    /// calls are held back until `resume`, and `waitWhileSuspended` holds its reading.
    func suspend() {
        lock.withLock { if open, held == nil { held = [] } }
    }

    /// Whether the task is suspended now.
    var isSuspended: Bool { lock.withLock { held != nil } }

    /// The task was resumed: the held calls are made, in order, and the load reads on.
    func resume() {
        let (inline, waiting) = lock.withLock {
            () -> ([@Sendable () -> Void], [CheckedContinuation<Void, Never>]) in
            let calls = held ?? []
            defer { (held, resumers) = (nil, []) }
            // Queued before the lock is let go, so no later call overtakes them.
            guard let schedule else { return (calls, resumers) }
            for call in calls { schedule(call) }
            return ([], resumers)
        }
        for call in inline { call() }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once the task is not suspended (or the gate is closed): a suspended task reads no more of
    /// its response, as Apple's produces no network traffic while suspended.
    func waitWhileSuspended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waits = lock.withLock {
                if held != nil { resumers.append(continuation) }
                return held != nil
            }
            if !waits { continuation.resume() }
        }
    }

    /// Runs a client call where the loading system wants it, or holds it while the task is suspended.
    private func run(_ call: @escaping @Sendable () -> Void) {
        let heldBack = lock.withLock {
            guard held != nil else { return false }
            held?.append(call)
            return true
        }
        guard !heldBack else { return }
        if let schedule { schedule(call) } else { call() }
    }

    /// Runs `action` once when the gate closes; at once if it is closed already.
    func whenClosed(_ action: @escaping @Sendable () -> Void) {
        let closed = lock.withLock {
            if open { closeActions.append(action) }
            return !open
        }
        if closed { action() }
    }

    /// Makes one client call unless the gate is closed by then; false when it already is.
    @discardableResult
    func send(_ call: @escaping @Sendable (any URLProtocolClient, URLProtocol) -> Void) -> Bool {
        let attempt: @Sendable () -> Bool = {
            guard let (client, owner) = self.take(closing: false) else { return false }
            call(client, owner)
            return true
        }
        if schedule == nil, !isSuspended { return attempt() }
        run { _ = attempt() }
        return isOpen
    }

    /// The last client call (finished or failed), then closed. The protocol is released after the
    /// call, outside the lock (its deinit may run then).
    func finish(_ call: @escaping @Sendable (any URLProtocolClient, URLProtocol) -> Void) {
        run {
            guard let (client, owner) = self.take(closing: true) else { return }
            call(client, owner)
        }
    }

    func close() {
        let released = take(closing: true)
        _ = released
    }
}

/// Runs a client call on the loading system's own thread or queue, after the calls scheduled before it.
typealias ClientSchedule = @Sendable (@escaping @Sendable () -> Void) -> Void
