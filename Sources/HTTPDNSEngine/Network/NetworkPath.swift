// The network path as last detected. This module owns it: NetworkMonitor (here) is the only writer; the
// resolver (which families to ask for) and every engine (which addresses to connect to, and dropping
// pooled connections when the path changes) read it and hear of its changes.

import HTTPDNSCore
import NIOConcurrencyHelpers

/// The current `NetworkPathState`, published by the network monitor.
///
/// Thread-safe. Readers get the state without waiting; `settled()` waits out a running NAT64 prefix
/// discovery (it always ends: discovery is bounded by the lookup timeout).
package final class NetworkPath: Sendable {
    private struct Box {
        var state: NetworkPathState
        var waiters: [CheckedContinuation<NetworkPathState, Never>] = []
        var onChange: [@Sendable () -> Void] = []
    }
    private let box: NIOLockedValueBox<Box>

    /// A path that is not probed yet (both families asked for, nothing synthesized).
    package init(_ state: NetworkPathState = NetworkPathState(id: "local")) {
        box = NIOLockedValueBox(Box(state: state))
    }

    /// The path as last published.
    package var state: NetworkPathState { box.withLockedValue { $0.state } }

    /// The families to ask for on this path (`state.query`, without copying the state).
    package var query: AddressQuery { box.withLockedValue { $0.state.query } }

    /// The path once no prefix discovery is running.
    package func settled() async -> NetworkPathState {
        await withCheckedContinuation { continuation in
            let now = box.withLockedValue { box -> NetworkPathState? in
                guard box.state.discovering else { return box.state }
                box.waiters.append(continuation)
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// `addresses` as this network can connect to them (see `NetworkPathState.connectable(_:)`),
    /// waiting for a prefix discovery still running when IPv4 has no route and there are IPv4
    /// addresses that may need it.
    func connectable(_ addresses: ResolvedAddresses) async -> ResolvedAddresses {
        var state = self.state
        guard !addresses.ipv4.isEmpty, state.stack?.ipv4 == false else { return addresses }
        if state.discovering { state = await settled() }
        return state.connectable(addresses)
    }

    /// `connectable(_:)` for bare address lists.
    package func connectable(ipv4: [IPAddress], ipv6: [IPAddress]) async -> ResolvedAddresses {
        await connectable(ResolvedAddresses(ipv4: ipv4, ipv6: ipv6, source: .staticHosts))
    }

    /// Publishes a new state; wakes `settled()` callers once discovery is over.
    func publish(_ state: NetworkPathState) {
        let wake = box.withLockedValue { box -> [CheckedContinuation<NetworkPathState, Never>] in
            box.state = state
            guard !state.discovering else { return [] }
            defer { box.waiters = [] }
            return box.waiters
        }
        wake.forEach { $0.resume(returning: state) }
    }

    /// Runs `body` on every path change (after `publish` of the new state), e.g. an engine retiring
    /// its pooled connections.
    func onChange(_ body: @escaping @Sendable () -> Void) {
        box.withLockedValue { $0.onChange.append(body) }
    }

    /// Tells the `onChange` subscribers the path changed.
    func changed() {
        let subscribers = box.withLockedValue { $0.onChange }
        subscribers.forEach { $0() }
    }
}
