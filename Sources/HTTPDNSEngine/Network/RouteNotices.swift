// Process-wide notices from the operating system that the network changed (links, addresses,
// routes). One source per process, whatever the number of resolvers: rtnetlink on Linux
// (RouteNotices+Linux.swift), NWPathMonitor on Apple platforms (RouteNotices+Apple.swift). A notice
// says only "something changed"; NetworkPathMachine debounces a burst into one probe, and the probe
// decides whether the path really changed.

import HTTPDNSCore
import NIOConcurrencyHelpers

/// The path the operating system reported last (Apple platforms, once the route notices have started;
/// nil elsewhere): what a failed connect is judged by (`NetworkUnavailable`).
package let platformPathFacts = NIOLockedValueBox<PathFacts?>(nil)

/// Subscriptions to the operating system's network-change notices.
final class RouteNotices: Sendable {
    /// The process's one source.
    static let shared = RouteNotices()

    private struct Subscribers {
        var next = 0
        var callbacks: [Int: @Sendable () -> Void] = [:]
        var started = false
        var available = false
    }
    private let subscribers = NIOLockedValueBox(Subscribers())

    /// Calls `body` on every notice, on the source's own thread, until `unsubscribe`. Nil when this
    /// platform has no source (the app then feeds its own events).
    func subscribe(_ body: @escaping @Sendable () -> Void) -> Int? {
        // The source starts under the lock, so a second first subscriber cannot see it half started
        // (its thread takes the lock only to deliver, after this returns).
        subscribers.withLockedValue { s -> Int? in
            if !s.started {
                s.started = true
                s.available = startPlatformSource { [weak self] in self?.deliver() }
            }
            guard s.available else { return nil }
            s.next += 1
            s.callbacks[s.next] = body
            return s.next
        }
    }

    func unsubscribe(_ id: Int) {
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
