// What the engine asks when connecting to the resolver's addresses failed, or is slow (the engine's
// ConnectFailover decides when): forget the addresses that failed, ask again past the cache, then the
// fallback the policy allows.
//
// - `forget`: the cached answer loses the addresses that failed (on the network in use), so no later
//   lookup is served them; the hot memo forgets the name; the change is saved like a store.
// - `freshAddresses`: HTTPDNS past the cache, joining the refresh a stale or aging answer started (one
//   query per name and family, however many connects ask), else a query of its own; the answer is
//   cached as any other.
// - `fallbackAddresses`: LocalDNS, as after HTTPDNS failed: never for a strict name, nor when fallback
//   is off, nor for a name the policy does not send through HTTPDNS.

import HTTPDNSCore
import HTTPDNSEngine
import NIOCore

extension HTTPDNSResolver {
    /// The route the policy gives `host` when it goes through HTTPDNS (`strict` or not); nil otherwise.
    private func httpdnsRoute(_ host: String) -> (name: String, strict: Bool)? {
        guard IPAddress(host) == nil, let name = try? validatedHostname(host),
            case .httpdns(let strict) = configuration.policy.route(for: name)
        else { return nil }
        return (name, strict)
    }

    package func forget(_ failed: [IPAddress], of host: String) {
        guard !failed.isEmpty, let (name, _) = httpdnsRoute(host) else { return }
        let dead = Set(failed)
        let now = clock.now()
        let write = state.withLockedValue { state -> Bool in
            var write = false
            for family in AddressFamily.allCases {
                let key = CacheKey(network: state.network, normalizedName: name, family: family)
                if apply(state.machine.addressesFailed(key, dead, now: now), &state) { write = true }
            }
            hot.withLockedValue { $0.forget(name) }
            return write
        }
        if write { writeCacheLogging() }
    }

    package func freshAddresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses? {
        guard let (name, _) = httpdnsRoute(host) else { return nil }
        let r = try await resolveThroughHTTPDNS(
            name,
            path.query,
            started: .now,
            reserveForFallback: false,
            until: deadline ?? .distantFuture,
            pastCache: true
        )
        return ResolvedAddresses(ipv4: r.ipv4, ipv6: r.ipv6, source: r.source)
    }

    package func fallbackAddresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses? {
        guard let (name, strict) = httpdnsRoute(host), !strict, configuration.fallbackToLocalDNS else { return nil }
        state.withLockedValue { $0.statistics.fallbacks += 1 }
        metrics.fallbacks.increment()
        logger.debug("connect failed at HTTPDNS's addresses: falling back to LocalDNS", metadata: ["name": "\(name)"])
        let limit = NIODeadline.now() + TimeAmount(configuration.timeout)
        let r = try await resolveLocally(
            name,
            path.query,
            started: .now,
            deadline: min(limit, deadline ?? .distantFuture),
            fallback: true,
            reason: nil
        )
        return ResolvedAddresses(ipv4: r.ipv4, ipv6: r.ipv6, source: r.source)
    }
}
