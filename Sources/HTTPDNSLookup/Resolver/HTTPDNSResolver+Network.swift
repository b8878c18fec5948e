// What a network change does to the resolver: the new path's cache partition, fresh provider
// back-offs, no hot answers, and the names in use on the old network resolved again in the background.
// NetworkMonitor decides that the path changed; this is the resolver's side.

import HTTPDNSCore
import HTTPDNSEngine
import Logging
import NIOCore

extension HTTPDNSResolver {
    /// The app says the device moved to network `networkID` (its own name for it): from then on the
    /// app names the networks, and the change is handled as `pathChanged(from:to:)` describes.
    package func networkChanged(to networkID: String) {
        monitor.appNamed(networkID)
    }

    /// How long ago a name counts as in use when the network changes.
    static let inUseWindow: Duration = .seconds(600)
    /// At most this many names are re-resolved after a change.
    static let reResolveLimit = 64

    /// The device changed network path: later lookups use (and fill) the new network's cache, failure
    /// back-offs start afresh, and the names used recently on the old network are resolved again on
    /// the new one in the background (the engines retire their pooled connections themselves).
    func pathChanged(from old: NetworkPathState, to new: NetworkPathState) {
        let since = clock.now() + (.zero - Self.inUseWindow)
        let names = state.withLockedValue { state -> [String] in
            let names = state.machine.cache.namesInUse(network: state.network, since: since, limit: Self.reResolveLimit)
            state.network = new.id
            state.health = ProviderHealth()
            hot.withLockedValue { $0.removeAll() }
            return names
        }
        for provider in providers { provider.networkChanged() }
        guard !names.isEmpty else { return }
        logger.debug("re-resolving the names in use", metadata: ["names": "\(names.count)"])
        let task = Task { await self.preResolve(names, withRecords: false) }
        state.withLockedValue { state in
            let previous = state.reResolving
            state.reResolving = Task {
                await previous?.value
                await task.value
            }
        }
    }

    /// Waits for the background work a network change started (re-resolving, NAT64 discovery).
    func waitForNetworkWork() async {
        await monitor.waitForDiscoveries()
        await state.withLockedValue { $0.reResolving }?.value
    }

    /// RFC 7050: the AAAA records of `ipv4only.arpa` from the network's own resolver, read for the
    /// well-known addresses. No answer, or one without them, is no prefix.
    static func discoverNAT64(_ localDNS: any DNSProvider, timeout: Duration, logger: Logger) async -> [NAT64Prefix] {
        do {
            let answer = try await localDNS.resolve(
                NAT64Prefix.discoveryName,
                family: .ipv6,
                deadline: .now() + TimeAmount(timeout)
            )
            let prefixes = NAT64Prefix.discover(fromAAAA: answer.addresses)
            logger.debug(
                "NAT64 discovery",
                metadata: [
                    "answer": "\(answer.addresses.map(\.description))",
                    "prefixes": "\(prefixes.map(\.description))",
                ]
            )
            return prefixes
        } catch {
            logger.debug("NAT64 discovery failed", metadata: ["error": "\(error)"])
            return []
        }
    }
}
