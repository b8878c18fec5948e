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

    init(client: any URLProtocolClient, owner: URLProtocol, schedule: ClientSchedule?) {
        self.client = client
        self.owner = owner
        self.schedule = schedule
    }

    var isOpen: Bool { lock.withLock { open } }

    /// The client and protocol while the gate is open; with `closing`, the gate closes as they are
    /// taken (the last call).
    private func take(closing: Bool) -> (any URLProtocolClient, URLProtocol)? {
        lock.withLock {
            guard open, let client, let owner else { return nil }
            if closing { (open, self.client, self.owner) = (false, nil, nil) }
            return (client, owner)
        }
    }

    /// Makes one client call unless the gate is closed by then; false when it already is.
    @discardableResult
    func send(_ call: @escaping @Sendable (any URLProtocolClient, URLProtocol) -> Void) -> Bool {
        let attempt: @Sendable () -> Bool = {
            guard let (client, owner) = self.take(closing: false) else { return false }
            call(client, owner)
            return true
        }
        guard let schedule else { return attempt() }
        schedule { _ = attempt() }
        return isOpen
    }

    /// The last client call (finished or failed), then closed. The protocol is released after the
    /// call, outside the lock (its deinit may run then).
    func finish(_ call: @escaping @Sendable (any URLProtocolClient, URLProtocol) -> Void) {
        let last: @Sendable () -> Void = {
            guard let (client, owner) = self.take(closing: true) else { return }
            call(client, owner)
        }
        if let schedule { schedule(last) } else { last() }
    }

    func close() {
        let released = take(closing: true)
        _ = released
    }
}

/// Runs a client call on the loading system's own thread or queue, after the calls scheduled before it.
typealias ClientSchedule = @Sendable (@escaping @Sendable () -> Void) -> Void
