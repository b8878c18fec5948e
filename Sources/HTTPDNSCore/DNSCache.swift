// The answer cache: a plain value type that decides, the resolver acts.
//
// Per (network, name, family) it keeps the last answer and when it expires. A lookup returns one of:
//   fresh  — within TTL; once 75% of the TTL has passed the first such lookup is told to prefetch.
//   stale  — expired, but by no more than `maxStale`: served while exactly one refresh runs (the first
//            stale lookup is told to refresh; the rest just get the stale answer).
//   miss   — nothing usable.
// Negative answers (no such address) are kept for `negativeTTL` and are never served stale.
// Keys carry the network identifier, so an answer learnt on one network is never served on another.
// The number of entries is bounded; the least recently used entry goes first.

/// Cache and refresh tuning. Value type, `Sendable`.
package struct CacheConfiguration: Hashable, Sendable {
    /// TTLs below this are raised to it (seconds). Keeps chatty zero-TTL answers from hammering HTTPDNS.
    package var minTTL: UInt32 = 10
    /// TTLs above this are lowered to it (seconds).
    package var maxTTL: UInt32 = 3600
    /// How long past expiry an answer may still be served while one refresh runs.
    package var maxStale: Duration = .seconds(60)
    /// How long a negative answer is kept when the provider gave no TTL (seconds).
    package var negativeTTL: UInt32 = 30
    /// The fraction of the TTL after which a lookup triggers a background refresh.
    package var prefetchFraction: Double = 0.75
    /// Entries kept at most.
    package var capacity: Int = 4096

    package init() {}

    func clamp(_ ttl: UInt32?) -> UInt32 {
        Swift.min(Swift.max(ttl ?? minTTL, minTTL), Swift.max(maxTTL, minTTL))
    }
}

/// One address family.
package enum AddressFamily: String, Hashable, Sendable, Codable, CaseIterable {
    case ipv4
    case ipv6
}

/// Cache key: answers are per network, per name, per family.
package struct CacheKey: Hashable, Sendable, Codable {
    package var network: String
    package var name: String
    package var family: AddressFamily

    package init(network: String, name: String, family: AddressFamily) {
        self.network = network
        self.name = normalizeHostname(name)
        self.family = family
    }

    /// For a name already in normal form (lower case, no trailing dot): skips the copy.
    package init(network: String, normalizedName: String, family: AddressFamily) {
        self.network = network
        self.name = normalizedName
        self.family = family
    }
}

/// A cached answer.
package struct CacheEntry: Hashable, Sendable, Codable {
    package var addresses: [IPAddress]
    /// The TTL applied, after clamping (seconds).
    package var ttl: UInt32
    package var storedAt: Timestamp
    package var expiresAt: Timestamp
    /// Which provider gave it (e.g. `doh:https://…`).
    package var source: String
    /// The address the provider saw the query come from, when it said (DNSPod `clientip=1`).
    package var clientAddress: IPAddress?
    var lastUsed: Timestamp
    var refreshing: Bool = false

    package var isNegative: Bool { addresses.isEmpty }

    enum CodingKeys: String, CodingKey {
        case addresses, ttl, storedAt, expiresAt, source, clientAddress, lastUsed
    }
}

/// What a lookup found.
package enum CacheLookup: Hashable, Sendable {
    /// Within TTL. `prefetch`: the caller should start a background refresh (it is marked as running).
    case fresh(CacheEntry, remaining: Duration, prefetch: Bool)
    /// Expired within `maxStale`. `refresh`: the caller should start the one refresh (marked as running).
    case stale(CacheEntry, refresh: Bool)
    case miss
}

/// The cache state. Not thread-safe by itself: the owner keeps it under a lock.
package struct DNSCache: Sendable {
    package var configuration: CacheConfiguration
    private(set) var entries: [CacheKey: CacheEntry] = [:]

    package init(configuration: CacheConfiguration = CacheConfiguration()) {
        self.configuration = configuration
    }

    package var count: Int { entries.count }

    package mutating func lookup(_ key: CacheKey, now: Timestamp) -> CacheLookup {
        // One hash per lookup: the entry is updated in place through its index.
        guard let index = entries.index(forKey: key) else { return .miss }
        entries.values[index].lastUsed = now
        let entry = entries.values[index]
        if now < entry.expiresAt {
            let prefetch = !entry.isNegative && !entry.refreshing && now >= prefetchPoint(of: entry)
            if prefetch { entries.values[index].refreshing = true }
            return .fresh(entry, remaining: entry.expiresAt - now, prefetch: prefetch)
        }
        if !entry.isNegative, now < entry.expiresAt + configuration.maxStale {
            let refresh = !entry.refreshing
            entries.values[index].refreshing = true
            return .stale(entry, refresh: refresh)
        }
        entries.remove(at: index)
        return .miss
    }

    /// When a fresh lookup of `entry` first asks for a prefetch: `prefetchFraction` into its TTL.
    private func prefetchPoint(of entry: CacheEntry) -> Timestamp {
        entry.storedAt + .seconds(Double(entry.ttl) * configuration.prefetchFraction)
    }

    /// Until when lookups of the fresh `entry` get it as it is, starting nothing: its prefetch point
    /// while that is still ahead of `now`, else (a refresh is running or was asked for) its expiry.
    package func servedAsIsUntil(_ entry: CacheEntry, now: Timestamp) -> Timestamp {
        let prefetchAt = prefetchPoint(of: entry)
        return now < prefetchAt ? prefetchAt : entry.expiresAt
    }

    /// Stores an answer (empty addresses: a negative answer). Clears the refresh mark.
    @discardableResult
    package mutating func store(
        _ key: CacheKey,
        addresses: [IPAddress],
        ttl: UInt32?,
        source: String,
        clientAddress: IPAddress? = nil,
        now: Timestamp
    ) -> CacheEntry {
        let applied =
            addresses.isEmpty
            ? Swift.min(ttl ?? configuration.negativeTTL, configuration.negativeTTL) : configuration.clamp(ttl)
        let entry = CacheEntry(
            addresses: addresses,
            ttl: applied,
            storedAt: now,
            expiresAt: now + .seconds(Int64(applied)),
            source: source,
            clientAddress: clientAddress,
            lastUsed: now
        )
        if entries[key] == nil, entries.count >= configuration.capacity { evictLeastRecentlyUsed() }
        entries[key] = entry
        return entry
    }

    /// A refresh failed: the entry stays (and may still be served stale until `maxStale` runs out);
    /// the next lookup may start another refresh.
    package mutating func refreshFailed(_ key: CacheKey) {
        entries[key]?.refreshing = false
    }

    package mutating func remove(network: String? = nil) {
        if let network { entries = entries.filter { $0.key.network != network } } else { entries.removeAll() }
    }

    /// The names of `network` with an answer used at or after `since`, most recently used first, at
    /// most `limit` (what to re-resolve when the device moves to another network).
    package func namesInUse(network: String, since: Timestamp, limit: Int) -> [String] {
        var latest: [String: Timestamp] = [:]
        for (key, entry) in entries where key.network == network && entry.lastUsed >= since && !entry.isNegative {
            latest[key.name] = Swift.max(latest[key.name] ?? entry.lastUsed, entry.lastUsed)
        }
        return latest.sorted { $0.value > $1.value }.prefix(limit).map(\.key)
    }

    /// Entries fit to persist: positive answers not yet past their stale window.
    package func snapshot(now: Timestamp) -> CacheSnapshot {
        let kept = entries.filter { !$0.value.isNegative && now < $0.value.expiresAt + configuration.maxStale }
        return CacheSnapshot(entries: kept.map { CacheSnapshot.Item(key: $0.key, entry: $0.value) })
    }

    /// Loads persisted entries, skipping expired ones. Entries already in memory win.
    package mutating func restore(_ snapshot: CacheSnapshot, now: Timestamp) {
        for item in snapshot.entries where entries[item.key] == nil {
            guard !item.entry.addresses.isEmpty, now < item.entry.expiresAt + configuration.maxStale else { continue }
            guard item.entry.storedAt <= now, item.entry.expiresAt > item.entry.storedAt else { continue }
            if entries.count >= configuration.capacity { break }
            var e = item.entry
            e.refreshing = false
            e.ttl = configuration.clamp(e.ttl)
            e.expiresAt = Swift.min(e.expiresAt, e.storedAt + .seconds(Int64(e.ttl)))
            entries[item.key] = e
        }
    }

    private mutating func evictLeastRecentlyUsed() {
        if let victim = entries.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key {
            entries[victim] = nil
        }
    }
}

/// The persisted form of the cache (JSON). `version` lets a future format ignore an older file.
package struct CacheSnapshot: Hashable, Sendable, Codable {
    package struct Item: Hashable, Sendable, Codable {
        package var key: CacheKey
        package var entry: CacheEntry
    }

    package static let currentVersion = 1
    package var version: Int = CacheSnapshot.currentVersion
    package var entries: [Item]

    package init(entries: [Item]) { self.entries = entries }
}
