// The executor of NetworkPathMachine (NetworkPathState.swift, beside it): it probes the routes, has the
// network's own resolver asked for `ipv4only.arpa` to find NAT64 prefixes (the query is the resolver's,
// `HTTPDNSResolver.discoverNAT64`, handed in as a closure: DNS is not this module's business), listens
// to the operating system's network-change notices, and publishes each new path to the NetworkPath
// the resolver and the engines read. What a path change does to the resolver (cache partition, re-resolving) is the
// resolver's `pathChanged(from:to:)` (HTTPDNSResolver.swift).

import HTTPDNSCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Keeps a `NetworkPath` current.
package final class NetworkMonitor: Sendable {
    /// How the monitor learns about changes and finds prefixes.
    package struct Settings: Sendable {
        /// Watch the operating system's notices (off: only `probeNow()` and the app's own events).
        var watch = true
        package var nat64: NAT64Mode = .discover
        /// Quiet time after a notice before probing (a change arrives as a burst of notices).
        var debounce: Duration = .milliseconds(100)
        /// The app's own network identifier (nil: derived from the network).
        package var networkID: String?

        package init() {}
    }

    let path: NetworkPath
    let machine: NIOLockedValueBox<NetworkPathMachine>
    let settings: Settings
    /// Asks the network's own resolver for the NAT64 prefixes (RFC 7050); bounded by the caller.
    let discoverPrefixes: @Sendable () async -> [NAT64Prefix]
    let probe: @Sendable () -> RouteProbe
    let logger: Logger
    let subscription = NIOLockedValueBox<Int?>(nil)
    let discoveries = NIOLockedValueBox<[Task<Void, Never>]>([])
    let onPathChanged = NIOLockedValueBox<(@Sendable (NetworkPathState, NetworkPathState) -> Void)?>(nil)

    /// - Parameters:
    ///   - discoverPrefixes: asks the network's own resolver for `ipv4only.arpa` (a DNS64 answers
    ///     it) and reads the prefixes from the answer (the resolver gives it: DNS is its business).
    ///   - probe: the route probe (tests inject their own).
    package init(
        path: NetworkPath,
        settings: Settings,
        discoverPrefixes: @escaping @Sendable () async -> [NAT64Prefix],
        probe: @escaping @Sendable () -> RouteProbe = { RouteProbe.current() },
        logger: Logger
    ) {
        self.path = path
        self.settings = settings
        self.machine = NIOLockedValueBox(NetworkPathMachine(networkID: settings.networkID, nat64: settings.nat64))
        self.discoverPrefixes = discoverPrefixes
        self.probe = probe
        self.logger = logger
    }

    deinit {
        if let id = subscription.withLockedValue({ $0 }) { RouteNotices.shared.unsubscribe(id) }
    }

    /// Probes once now (the path is known when this returns, a NAT64 discovery may still run) and
    /// starts watching when the settings say so.
    package func start(onPathChanged: @escaping @Sendable (NetworkPathState, NetworkPathState) -> Void) {
        self.onPathChanged.withLockedValue { $0 = onPathChanged }
        if settings.watch {
            let id = RouteNotices.shared.subscribe { [weak self] in self?.handle(.kernelNotice) }
            subscription.withLockedValue { $0 = id }
            if id == nil { logger.debug("no network-change notices on this system; the app feeds its own") }
        }
        handle(.debounceElapsed)  // a probe, without waiting
    }

    /// Probes now (an app that saw a change itself).
    func probeNow() { handle(.debounceElapsed) }

    /// The app names the network the device is on now.
    package func appNamed(_ id: String) { handle(.appNamed(id)) }

    /// Stops watching and waits for running discoveries.
    package func stop() async {
        if let id = subscription.withLockedValue({ s -> Int? in
            defer { s = nil }; return s
        }) {
            RouteNotices.shared.unsubscribe(id)
        }
        await waitForDiscoveries()
    }

    /// Waits for the NAT64 discoveries started so far (tests; shutdown).
    package func waitForDiscoveries() async {
        for task in discoveries.withLockedValue({ $0 }) { await task.value }
    }

    func handle(_ event: NetworkPathMachine.Event) {
        let actions = machine.withLockedValue { $0.handle(event) }
        for action in actions { run(action) }
    }

    private func run(_ action: NetworkPathMachine.Action) {
        switch action {
        case .probe:
            handle(.probed(probe()))
        case .scheduleDebounce:
            MultiThreadedEventLoopGroup.singleton.next().scheduleTask(
                in: TimeAmount(settings.debounce)
            ) { [weak self] in self?.handle(.debounceElapsed) }
        case .discoverPrefixes(let network):
            let task = Task { [discoverPrefixes] in
                let prefixes = await discoverPrefixes()
                self.handle(.discovered(prefixes, network: network))
            }
            discoveries.withLockedValue { tasks in
                tasks.append(task)
                // Bounded: the oldest of nine has all but surely ended (each ends within the lookup timeout).
                if tasks.count > 8 { tasks.removeFirst() }
            }
        case .update:
            // The machine's state now, not the action's copy: two threads handling events at once
            // must not publish out of order.
            let state = machine.withLockedValue { $0.state }
            path.publish(state)
            logger.debug("\(state.summary)")
        case .pathChanged(let old):
            let new = path.state
            logger.debug("network changed", metadata: ["from": "\(old.summary)", "to": "\(new.summary)"])
            onPathChanged.withLockedValue { $0 }?(old, new)
            path.changed()
        }
    }
}
