// The answer cache: a plain value type that decides, the resolver acts.
//
// Per (network, name, family) it keeps the last answer and when it expires. A lookup returns one of:
//   fresh  — within TTL; once 75% of the TTL has passed the first such lookup is told to prefetch.
//   stale  — expired, but by no more than `serveExpired`: served while exactly one refresh runs (the
//            first stale lookup is told to refresh; the rest just get the stale answer).
//   miss   — nothing usable.
// Negative answers (no such address) are kept for at most `negativeTTL`. A negative answer is served
// stale only beside addresses of the name's other family (an A-only host's missing AAAA, so a relaunch
// on a dual-stack network needs no query before its connect); a name with no address at all is asked
// again. The name's HTTPS records (RFC 9460), none included, are kept beside its addresses with the
// same fresh / stale / miss rules (DNSCache+Records.swift).
// Keys carry the network identifier, so an answer learnt on one network is never served on another.
// The number of entries is bounded; the least recently used entry goes first.

import HTTPDNSCore

/// Cache key: answers are per network, per name, per family.
package struct CacheKey: Hashable, Sendable, Codable {
    var network: String
    var name: String
    var family: AddressFamily

    package init(network: String, name: String, family: AddressFamily) {
        self.network = network
        self.name = normalizeHostname(name)
        self.family = family
    }

    /// For a name already in normal form (lower case, no trailing dot): skips the copy.
    init(network: String, normalizedName: String, family: AddressFamily) {
        self.network = network
        self.name = normalizedName
        self.family = family
    }
}

/// A cached answer.
package struct CacheEntry: Hashable, Sendable, Codable {
    var addresses: [IPAddress]
    /// The TTL applied, after clamping (seconds).
    var ttl: UInt32
    var storedAt: Timestamp
    var expiresAt: Timestamp
    /// Which provider gave it (e.g. `doh:https://…`).
    var source: String
    /// The address the provider saw the query come from, when it said (DNSPod `clientip=1`).
    var clientAddress: IPAddress?
    var lastUsed: Timestamp
    var refreshing: Bool = false

    var isNegative: Bool { addresses.isEmpty }

    enum CodingKeys: String, CodingKey {
        case addresses, ttl, storedAt, expiresAt, source, clientAddress, lastUsed
    }
}

/// What a lookup found.
enum CacheLookup: Hashable, Sendable {
    /// Within TTL. `prefetch`: the caller should start a background refresh (it is marked as running).
    case fresh(CacheEntry, remaining: Duration, prefetch: Bool)
    /// Expired within `serveExpired`. `refresh`: the caller should start the one refresh (marked as running).
    case stale(CacheEntry, refresh: Bool)
    case miss
}

/// The cache state. Not thread-safe by itself: the owner keeps it under a lock.
package struct DNSCache: Sendable {
    var configuration: CacheConfiguration
    private(set) var entries: [CacheKey: CacheEntry] = [:]
    /// Hosts that asked for https (HSTS), saved with the answers: not DNS, but what a relaunch needs to
    /// send its first http:// request straight to https.
    var strictTransport = StrictTransportSecurity()
    /// HTTPS records by network and name (DNSCache+Records.swift).
    var records: [RecordsKey: RecordsEntry] = [:]

    package init(configuration: CacheConfiguration = CacheConfiguration()) {
        self.configuration = configuration
    }

    var count: Int { entries.count }

    mutating func lookup(_ key: CacheKey, now: Timestamp) -> CacheLookup {
        // One hash per lookup: the entry is updated in place through its index.
        guard let index = entries.index(forKey: key) else { return .miss }
        entries.values[index].lastUsed = now
        let entry = entries.values[index]
        if now < entry.expiresAt {
            let prefetch = !entry.isNegative && !entry.refreshing && now >= prefetchPoint(of: entry)
            if prefetch { entries.values[index].refreshing = true }
            return .fresh(entry, remaining: entry.expiresAt - now, prefetch: prefetch)
        }
        if now < entry.expiresAt + configuration.serveExpired,
            !entry.isNegative || otherFamilyHasAddresses(key, now: now)
        {
            let refresh = !entry.refreshing
            entries.values[index].refreshing = true
            return .stale(entry, refresh: refresh)
        }
        entries.remove(at: index)
        return .miss
    }

    /// Whether `key`'s name has addresses of the other family, fresh or within the stale window: a
    /// negative answer beside them may be served stale.
    private func otherFamilyHasAddresses(_ key: CacheKey, now: Timestamp) -> Bool {
        var other = key
        other.family = key.family == .ipv4 ? .ipv6 : .ipv4
        guard let entry = entries[other] else { return false }
        return !entry.isNegative && now < entry.expiresAt + configuration.serveExpired
    }

    /// When a fresh lookup of `entry` first asks for a prefetch: `prefetchFraction` into its TTL.
    private func prefetchPoint(of entry: CacheEntry) -> Timestamp {
        entry.storedAt + .seconds(Double(entry.ttl) * configuration.prefetchFraction)
    }

    /// Until when lookups of the fresh `entry` get it as it is, starting nothing: its prefetch point
    /// while that is still ahead of `now`, else (a refresh is running or was asked for) its expiry.
    func servedAsIsUntil(_ entry: CacheEntry, now: Timestamp) -> Timestamp {
        let prefetchAt = prefetchPoint(of: entry)
        return now < prefetchAt ? prefetchAt : entry.expiresAt
    }

    /// The addresses stored for `key`, expired or not, without counting a use.
    func addresses(of key: CacheKey) -> [IPAddress]? { entries[key]?.addresses }

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
            ? Swift.min(ttl ?? configuration.negativeTTL, configuration.negativeTTL)
            : configuration.ttl(ttl, for: key.name)
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

    /// A refresh failed: the entry stays (and may still be served stale until `serveExpired` runs out);
    /// the next lookup may start another refresh.
    mutating func refreshFailed(_ key: CacheKey) {
        entries[key]?.refreshing = false
    }

    /// Connecting to `failed` addresses of `key`'s answer failed: the entry loses them, and goes when none
    /// is left (an empty entry would read as a negative answer). Returns whether the entry changed.
    @discardableResult
    mutating func forget(_ failed: Set<IPAddress>, of key: CacheKey) -> Bool {
        guard let index = entries.index(forKey: key), !entries.values[index].isNegative else { return false }
        let kept = entries.values[index].addresses.filter { !failed.contains($0) }
        guard kept.count < entries.values[index].addresses.count else { return false }
        if kept.isEmpty {
            entries.remove(at: index)
        } else {
            entries.values[index].addresses = kept
        }
        return true
    }

    mutating func remove(network: String? = nil) {
        if let network {
            entries = entries.filter { $0.key.network != network }
            records = records.filter { $0.key.network != network }
        } else {
            entries.removeAll()
            records.removeAll()
        }
    }

    /// Forgets every answer for `name` (normal form), its HTTPS records included, on every network.
    mutating func remove(name: String) {
        entries = entries.filter { $0.key.name != name }
        records = records.filter { $0.key.name != name }
    }

    /// The names of `network` with an answer used at or after `since`, most recently used first, at
    /// most `limit` (what to re-resolve when the device moves to another network).
    func namesInUse(network: String, since: Timestamp, limit: Int) -> [String] {
        var latest: [String: Timestamp] = [:]
        for (key, entry) in entries where key.network == network && entry.lastUsed >= since && !entry.isNegative {
            latest[key.name] = Swift.max(latest[key.name] ?? entry.lastUsed, entry.lastUsed)
        }
        return latest.sorted { $0.value > $1.value }.prefix(limit).map(\.key)
    }

    /// What a relaunch needs: answers, negative ones included, and HTTPS records, not yet past their
    /// stale window.
    package func snapshot(now: Timestamp) -> CacheSnapshot {
        let kept = entries.filter { now < $0.value.expiresAt + configuration.serveExpired }
        var snapshot = CacheSnapshot(entries: kept.map { CacheSnapshot.Item(key: $0.key, entry: $0.value) })
        snapshot.records = recordsSnapshot(now: now)
        snapshot.strictTransport = strictTransport.snapshot(now: now)
        return snapshot
    }

    /// Loads persisted answers and records, skipping expired ones; TTLs are clamped again by this
    /// configuration. What is already in memory wins.
    mutating func restore(_ snapshot: CacheSnapshot, now: Timestamp) {
        for item in snapshot.entries where entries[item.key] == nil {
            guard now < item.entry.expiresAt + configuration.serveExpired else { continue }
            guard item.entry.storedAt <= now, item.entry.expiresAt > item.entry.storedAt else { continue }
            if entries.count >= configuration.capacity { break }
            var e = item.entry
            e.refreshing = false
            e.ttl =
                e.isNegative
                ? Swift.min(e.ttl, configuration.negativeTTL) : configuration.ttl(e.ttl, for: item.key.name)
            e.expiresAt = Swift.min(e.expiresAt, e.storedAt + .seconds(Int64(e.ttl)))
            entries[item.key] = e
        }
        restoreRecords(snapshot.records, now: now)
        strictTransport.restore(snapshot.strictTransport, now: now)
    }

    private mutating func evictLeastRecentlyUsed() {
        if let victim = entries.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key {
            entries[victim] = nil
        }
    }
}

/// The persisted form of the cache (JSON). `version` lets a future format ignore an older file.
package struct CacheSnapshot: Hashable, Sendable, Codable {
    struct Item: Hashable, Sendable, Codable {
        var key: CacheKey
        var entry: CacheEntry
    }

    static let currentVersion = 1
    var version: Int = CacheSnapshot.currentVersion
    var entries: [Item]
    /// HTTPS records (absent from files written before they were kept: none).
    var records: [RecordsItem] = []
    /// Hosts that asked for https (absent from files written before they were kept: none).
    var strictTransport: [StrictTransportSecurity.Entry] = []

    init(entries: [Item], records: [RecordsItem] = []) {
        self.entries = entries
        self.records = records
    }

    private enum CodingKeys: String, CodingKey {
        case version, entries, records
        case strictTransport = "hsts"
    }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        entries = try c.decode([Item].self, forKey: .entries)
        records = try c.decodeIfPresent([RecordsItem].self, forKey: .records) ?? []
        strictTransport = try c.decodeIfPresent([StrictTransportSecurity.Entry].self, forKey: .strictTransport) ?? []
    }
}
