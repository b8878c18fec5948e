// Runs ProxyLifecycle's actions: starts the loopback proxy on first use, starts it again on the same
// port when its listener is lost, and reports a move. The thin executor; the rules and their tests are
// the lifecycle's.

import HTTPDNSKit
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Keeps one loopback proxy running for the clients pointed at it by proxy configurations.
final class ProxyKeeper: HTTPDNSAttachment {
    /// Starts a proxy listening on a port (0: any free one).
    typealias Start = @Sendable (_ port: Int) async throws -> HTTPDNSProxy

    private struct Inner {
        var lifecycle = ProxyLifecycle()
        var proxy: HTTPDNSProxy?
        var waiters: [CheckedContinuation<HTTPDNSProxy, any Error>] = []
        var lastError: (any Error)?
        var onMove: [@Sendable (_ from: Int, _ to: Int) -> Void] = []
        /// Handlers kept one per owner (a web view data store configured again replaces its own).
        var onMoveByOwner: [ObjectIdentifier: @Sendable (_ from: Int, _ to: Int) -> Void] = [:]

        /// Everyone waiting for the proxy, handed over once.
        mutating func takeWaiters() -> [CheckedContinuation<HTTPDNSProxy, any Error>] {
            defer { waiters = [] }
            return waiters
        }

        /// When the proxy's listener is gone, forgets the proxy and tells the lifecycle: the restart to
        /// run, if it wants one now.
        mutating func lostListener() -> ProxyLifecycle.Action? {
            guard let proxy, !proxy.isListening else { return nil }
            self.proxy = nil
            return lifecycle.listenerLost()
        }
    }

    private let start: Start
    private let logger: Logger
    private let inner = NIOLockedValueBox(Inner())

    init(logger: Logger, start: @escaping Start) {
        self.start = start
        self.logger = logger
    }

    /// The running proxy, started first if it is not (or its listener was lost).
    func proxy() async throws -> HTTPDNSProxy {
        try await withCheckedThrowingContinuation { continuation in
            let action = inner.withLockedValue { inner -> ProxyLifecycle.Action? in
                // A listener the system took, whose close notice has not come yet: as the notice would.
                let restart = inner.lostListener()
                let action = inner.lifecycle.needed()
                switch action {
                case .deliver:
                    if let proxy = inner.proxy {
                        continuation.resume(returning: proxy)
                    } else {
                        continuation.resume(throwing: ProxyKeeperError.shutDown)
                    }
                    return nil
                case .fail:
                    continuation.resume(throwing: ProxyKeeperError.shutDown)
                    return nil
                default:
                    // In the foreground the lost listener's restart is under way (needed() says wait).
                    inner.waiters.append(continuation)
                    return restart ?? action
                }
            }
            if let action { run(action) }
        }
    }

    /// The proxy in use now, if one runs (nil while it starts, after its listener was lost, after shutdown).
    var current: HTTPDNSProxy? {
        inner.withLockedValue { inner in inner.proxy.flatMap { $0.isListening ? $0 : nil } }
    }

    /// Calls `handler` when the proxy moves to another port (its own was taken when it started again).
    func onMove(_ handler: @escaping @Sendable (_ from: Int, _ to: Int) -> Void) {
        inner.withLockedValue { $0.onMove.append(handler) }
    }

    /// As `onMove(_:)`, one handler per `owner`: a later one for the same owner replaces it, so an
    /// object configured again and again does not pile handlers up.
    func onMove(for owner: ObjectIdentifier, _ handler: @escaping @Sendable (_ from: Int, _ to: Int) -> Void) {
        inner.withLockedValue { $0.onMoveByOwner[owner] = handler }
    }

    /// How many move handlers are kept (for tests).
    var moveHandlerCount: Int { inner.withLockedValue { $0.onMove.count + $0.onMoveByOwner.count } }

    /// The app went to the background.
    func enteredBackground() {
        inner.withLockedValue { $0.lifecycle.enteredBackground() }
    }

    /// The app came back to the foreground: a proxy whose listener was lost starts again. Returns when
    /// it runs (or could not start).
    func enteredForeground() async {
        let action = inner.withLockedValue { inner -> ProxyLifecycle.Action? in
            // Still in the background here: a lost listener is marked lost, and the foreground starts it.
            inner.lostListener() ?? inner.lifecycle.enteredForeground()
        }
        guard let action else { return }
        await runToEnd(action)
    }

    /// Stops the proxy for good.
    func shutdown() async {
        let (action, proxy, waiters) = inner.withLockedValue { inner in
            let action = inner.lifecycle.shutdown()
            let proxy = inner.proxy
            inner.proxy = nil
            return (action, proxy, inner.takeWaiters())
        }
        for waiter in waiters { waiter.resume(throwing: ProxyKeeperError.shutDown) }
        if action == .stop { await proxy?.stop() }
    }

    private func run(_ action: ProxyLifecycle.Action) {
        Task { await runToEnd(action) }
    }

    /// Runs `action` and whatever it leads to, until the proxy runs or nobody can be served.
    private func runToEnd(_ action: ProxyLifecycle.Action) async {
        var next: [ProxyLifecycle.Action] = [action]
        while !next.isEmpty {
            let action = next.removeFirst()
            switch action {
            case .start(let port):
                do {
                    let proxy = try await start(port)
                    next += inner.withLockedValue { inner in
                        let actions = inner.lifecycle.started(port: proxy.port)
                        if !actions.contains(.stop) { inner.proxy = proxy }
                        return actions
                    }
                    watch(proxy)
                    if next.contains(.stop) {
                        await proxy.stop()
                        next.removeAll { $0 == .stop }
                    }
                } catch {
                    logger.notice("the loopback proxy could not start on port \(port): \(error)")
                    next.append(
                        inner.withLockedValue { inner in
                            inner.lastError = error
                            return inner.lifecycle.startFailed()
                        }
                    )
                }
            case .deliver:
                let (proxy, waiters) = inner.withLockedValue { ($0.proxy, $0.takeWaiters()) }
                for waiter in waiters {
                    if let proxy {
                        waiter.resume(returning: proxy)
                    } else {
                        waiter.resume(throwing: ProxyKeeperError.shutDown)
                    }
                }
            case .moved(let from, let to):
                logger.notice("the loopback proxy moved from port \(from) to \(to): port \(from) was taken")
                let handlers = inner.withLockedValue { $0.onMove + Array($0.onMoveByOwner.values) }
                for handler in handlers { handler(from, to) }
            case .fail:
                let (waiters, error) = inner.withLockedValue {
                    ($0.takeWaiters(), $0.lastError ?? ProxyKeeperError.shutDown)
                }
                for waiter in waiters { waiter.resume(throwing: error) }
            case .wait, .stop:
                break
            }
        }
    }

    /// Starts the proxy again when its listener closes while it is the one in use.
    private func watch(_ proxy: HTTPDNSProxy) {
        proxy.listenerClosed.whenComplete { [weak self] _ in
            guard let self else { return }
            let action = self.inner.withLockedValue { inner -> ProxyLifecycle.Action? in
                guard let current = inner.proxy, current === proxy else { return nil }
                inner.proxy = nil
                return inner.lifecycle.listenerLost()
            }
            if let action { self.run(action) }
        }
    }
}

/// Why `ProxyKeeper` hands out no proxy.
enum ProxyKeeperError: Error, CustomStringConvertible {
    case shutDown

    var description: String { "the HTTPDNS instance was shut down: its loopback proxy is not started again" }
}
