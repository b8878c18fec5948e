/// The rules that keep the loopback proxy running for the clients pointed at it by a proxy
/// configuration (`HTTPDNS.configure(_:via: .proxy)`), without I/O: events in, actions out. Plain value
/// type; `ProxyKeeper` keeps it under a lock and runs the actions.
///
/// - The proxy starts on first use, once, whoever asks first; the others wait for it.
/// - Its port is the one every installed configuration names, so it stays: a proxy that has to start
///   again (its listener lost) starts on the same port.
/// - On iOS the system may take a suspended app's listening socket back (TN2277): a listener lost in the
///   background is started again when the app returns to the foreground, or at the next use, whichever
///   comes first. One lost in the foreground is started again at once.
/// - Only when that port is taken does the proxy move to another, and the move is reported: sessions
///   made from configurations that named the old port must be made again (a session copies its
///   configuration), while web views' data stores are pointed at the new port by the keeper.
/// - A start that fails on a fresh port fails whoever waits; the next use tries again.
struct ProxyLifecycle: Sendable {
    enum State: Sendable, Hashable {
        case idle
        case starting(port: Int)
        case running(port: Int)
        /// The listener was lost in the background; to start again on `port` at the next foreground or use.
        case lost(port: Int)
        case shutDown
    }

    package enum Action: Sendable, Hashable {
        /// Start the proxy listening on `port` (0: any free port); report `started` or `startFailed`.
        case start(port: Int)
        /// Hand the running proxy to whoever waits.
        case deliver(port: Int)
        /// The proxy now listens on another port than the configurations installed before name.
        case moved(from: Int, to: Int)
        /// Wait for the start under way.
        case wait
        /// Fail whoever waits (and the caller): the proxy could not start, or was shut down.
        case fail
        /// Stop the running proxy.
        case stop
    }

    private(set) var state: State = .idle
    private var inBackground = false

    init() {}

    /// Someone needs the proxy: an installer, or the app asking for its port.
    mutating func needed() -> Action {
        switch state {
        case .idle:
            state = .starting(port: 0)
            return .start(port: 0)
        case .starting:
            return .wait
        case .running(let port):
            return .deliver(port: port)
        case .lost(let port):
            state = .starting(port: port)
            return .start(port: port)
        case .shutDown:
            return .fail
        }
    }

    /// The proxy started, listening on `port`. A start that was not wanted any more (the owner shut
    /// down meanwhile) is stopped.
    mutating func started(port: Int) -> [Action] {
        guard case .starting(let wanted) = state else { return [.stop] }
        state = .running(port: port)
        let from = movingFrom ?? (wanted == 0 ? nil : wanted)
        movingFrom = nil
        let move: [Action] = from.map { $0 == port ? [] : [.moved(from: $0, to: port)] } ?? []
        return move + [.deliver(port: port)]
    }

    /// The start under way failed.
    mutating func startFailed() -> Action {
        guard case .starting(let wanted) = state else { return .fail }
        if wanted != 0 {
            // The old port is taken: any free one, and the move is reported when it runs.
            state = .starting(port: 0)
            movingFrom = wanted
            return .start(port: 0)
        }
        if let from = movingFrom {
            // Even a fresh port failed: the next use tries the old one again.
            movingFrom = nil
            state = .lost(port: from)
        } else {
            state = .idle
        }
        return .fail
    }

    /// The port the installed configurations name, while the proxy moves away from it.
    private var movingFrom: Int?

    /// The running proxy's listener closed without being asked to (the system took its socket).
    mutating func listenerLost() -> Action? {
        guard case .running(let port) = state else { return nil }
        if inBackground {
            state = .lost(port: port)
            return nil
        }
        state = .starting(port: port)
        return .start(port: port)
    }

    /// The app went to the background.
    mutating func enteredBackground() {
        inBackground = true
    }

    /// The app came back to the foreground.
    mutating func enteredForeground() -> Action? {
        inBackground = false
        guard case .lost(let port) = state else { return nil }
        state = .starting(port: port)
        return .start(port: port)
    }

    /// The owner shuts down: the proxy stops and is never started again.
    mutating func shutdown() -> Action? {
        let wasRunning = if case .running = state { true } else { false }
        state = .shutDown
        return wasRunning ? .stop : nil
    }
}
