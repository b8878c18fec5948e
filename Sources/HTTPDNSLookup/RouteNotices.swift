// Process-wide notices from the operating system that the network changed (links, addresses,
// routes). One source per process, whatever the number of resolvers: rtnetlink on Linux
// (RouteNotices+Linux.swift), NWPathMonitor on Apple platforms (RouteNotices+Apple.swift). A notice
// says only "something changed"; NetworkPathMachine debounces a burst into one probe, and the probe
// decides whether the path really changed.

import NIOConcurrencyHelpers

/// Subscriptions to the operating system's network-change notices.
package final class RouteNotices: Sendable {
    /// The process's one source.
    package static let shared = RouteNotices()

    private struct Subscribers {
        var next = 0
        var callbacks: [Int: @Sendable () -> Void] = [:]
        var started = false
        var available = false
    }
    private let subscribers = NIOLockedValueBox(Subscribers())

    /// Calls `body` on every notice, on the source's own thread, until `unsubscribe`. Nil when this
    /// platform has no source (the app then feeds its own events).
    package func subscribe(_ body: @escaping @Sendable () -> Void) -> Int? {
        let (id, start) = subscribers.withLockedValue { s -> (Int, Bool) in
            s.next += 1
            s.callbacks[s.next] = body
            defer { s.started = true }
            return (s.next, !s.started)
        }
        if start {
            let available = startPlatformSource { [weak self] in self?.deliver() }
            subscribers.withLockedValue { $0.available = available }
        }
        guard subscribers.withLockedValue({ $0.available }) else {
            unsubscribe(id)
            return nil
        }
        return id
    }

    package func unsubscribe(_ id: Int) {
        subscribers.withLockedValue { _ = $0.callbacks.removeValue(forKey: id) }
    }

    private func deliver() {
        let callbacks = subscribers.withLockedValue { Array($0.callbacks.values) }
        callbacks.forEach { $0() }
    }
}

#if !os(Linux) && !canImport(Network)
    /// No source on this platform.
    func startPlatformSource(_ notice: @escaping @Sendable () -> Void) -> Bool { false }
#endif
