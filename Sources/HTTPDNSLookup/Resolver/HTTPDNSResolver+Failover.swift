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
// And what the engine asks before an http:// request: whether the host is a known https origin (HSTS it
// asked for, kept in the cache and saved with it; or its HTTPS records, RFC 9460 §9.5).

import HTTPDNSCore
import HTTPDNSEngine
import NIOCore

extension HTTPDNSResolver {
    /// The route the policy gives `host` when it goes through HTTPDNS (`strict` or not); nil otherwise.
    private func httpdnsRoute(_ host: String) -> (name: String, strict: Bool)? {
        guard IPAddress(host) == nil, let name = try? validatedHostname(host),
            case .httpdns(let strict) = configuration.policy.lookup(for: name)
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
        let limit = NIODeadline.now() + TimeAmount(configuration.timeout)
        let r = try await fallBack(
            name,
            path.query,
            started: .now,
            deadline: min(limit, deadline ?? .distantFuture),
            reason: nil
        )
        return ResolvedAddresses(ipv4: r.ipv4, ipv6: r.ipv6, source: r.source)
    }

    package var keepsStrictTransportSecurity: Bool { true }

    package func strictTransportSecurity(_ value: String, from host: String) {
        persistence { machine, now in machine.strictTransportSecurity(value, from: host, now: now) }
    }

    package func knownHTTPSOrigin(_ host: String, byRecords: Bool) -> Bool {
        let now = clock.now()
        if state.withLockedValue({ $0.machine.cache.strictTransport.upgrades(host, now: now) }) { return true }
        guard byRecords, IPAddress(host) == nil, let bindings = cachedServiceBindings(normalizeHostname(host)) else {
            return false
        }
        return ServiceEndpoint.choose(bindings, port: 443, versions: .automatic) != nil
    }
}
