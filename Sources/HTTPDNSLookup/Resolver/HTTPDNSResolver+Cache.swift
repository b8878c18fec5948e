// Answers from the cache: the hot memo (HotAnswers) and every family under one lock; clearing it.
// Queries past the cache are HTTPDNSResolver+Queries.swift.

import HTTPDNSCore
import NIOCore

extension HTTPDNSResolver {
    /// Drops every cached answer (all networks).
    public func clearCache() {
        state.withLockedValue {
            $0.machine.cache.remove()
            hot.withLockedValue { $0.removeAll() }
        }
    }

    /// Drops the cached answers for `host` (all networks): its next lookup asks HTTPDNS. For a name
    /// whose addresses the app knows have changed.
    ///
    /// - Parameter host: The name whose answers to drop.
    public func clearCache(_ host: String) {
        let name = normalizeHostname(host)
        state.withLockedValue {
            $0.machine.cache.remove(name: name)
            hot.withLockedValue { $0.forget(name) }
        }
    }

    /// Answers from the cache alone, without waiting: nil when any family asked needs the network.
    /// Never blocks beyond a short lock; starts the background refresh of a stale or aging answer.
    package func cached(_ host: String, _ query: AddressQuery = .both) -> Resolution? {
        cachedResolution(normalizeHostname(host), query, started: .now)
    }

    /// The hot answer for `host` (see `HotAnswers`), with the TTL left; its `elapsed` is zero.
    ///
    /// `host` needs no normalizing first: the memo's keys are names in normal form (lower-case ASCII
    /// letters, digits, hyphens and dots), and no other string is equal to one of those, so a host
    /// that is not in normal form simply misses.
    func hotResolution(_ host: String, _ query: AddressQuery) -> Resolution? {
        let now = clock.now().nanoseconds
        let families = (query.wantsIPv4 ? 1 : 0) + (query.wantsIPv6 ? 1 : 0)
        guard let found = hot.withLockedValue({ $0.serve(host, query, now: now, families: families) }) else {
            return nil
        }
        metrics.cacheHits.increment(by: families)
        return found.resolution
    }

    /// Every family asked is answered by the cache under one lock, no task spawned. A whole fresh answer
    /// that started nothing is kept as the name's hot answer.
    func cachedResolution(_ name: String, _ query: AddressQuery, started: ContinuousClock.Instant)
        -> Resolution?
    {
        let now = clock.now()
        return state.withLockedValue { state -> Resolution? in
            var resolution = Resolution(name: name, ipv4: [], ipv6: [], ttl: nil, source: .literal, elapsed: .zero)
            var stale = false
            var origin = ""
            var servedAsIsUntil = Int64.max
            var expiresAt = Int64.max
            var quiet = true
            for family in AddressFamily.allCases where family == .ipv4 ? query.wantsIPv4 : query.wantsIPv6 {
                let key = CacheKey(network: state.network, normalizedName: name, family: family)
                // On a miss the families already looked at stay claimed (LRU, refresh marks); the slow
                // path finds them again.
                guard case .serve(let found, let refresh) = state.machine.cacheLookup(key, now: now),
                    let hit = served(found, key, refresh: refresh, &state)
                else { return nil }
                if family == .ipv4 {
                    resolution.ipv4 = hit.answer.addresses
                } else {
                    resolution.ipv6 = hit.answer.addresses
                }
                if case .stale(let entry, _) = found {
                    stale = true
                    resolution.expiredFor = max(resolution.expiredFor ?? .zero, now - entry.expiresAt)
                }
                if refresh != nil { quiet = false }
                if case .fresh(let entry, _, _) = found {
                    servedAsIsUntil = min(
                        servedAsIsUntil,
                        state.machine.cache.servedAsIsUntil(entry, now: now).nanoseconds
                    )
                    if !entry.isNegative { expiresAt = min(expiresAt, entry.expiresAt.nanoseconds) }
                }
                resolution.clientAddress = resolution.clientAddress ?? hit.answer.clientAddress
                if let ttl = hit.answer.ttl, !hit.answer.addresses.isEmpty {
                    resolution.ttl = min(resolution.ttl ?? ttl, ttl)
                }
                origin = hit.source
            }
            guard !resolution.ipv4.isEmpty || !resolution.ipv6.isEmpty else { return nil }
            resolution.source = stale ? .stale(origin) : .cache(origin)
            resolution.remembered = true
            if !stale, quiet, expiresAt != .max {
                hot.withLockedValue {
                    $0.remember(
                        name,
                        query,
                        resolution,
                        now: now.nanoseconds,
                        servedAsIsUntil: servedAsIsUntil,
                        expiresAt: expiresAt
                    )
                }
            }
            resolution.elapsed = ContinuousClock.now - started
            return resolution
        }
    }
}
