// A name's HTTPS records (RFC 9460) in the answer cache, beside its addresses: per network and name, an
// answer with no record included (most names have none, and knowing it saves the query). The rules are
// the addresses' (DNSCache.swift): fresh within the TTL; stale past it, within `serveExpired`, served
// while exactly one refresh runs; a miss otherwise. The TTL is the answer's (the smallest of its
// records'), at least `minTTL` and at most a day; an answer without one (none found) keeps
// `negativeTTL`. At most `recordsCapacity` names; the least recently used goes first.
//
// Persisted in the cache file as each record's RDATA (base64), so a file is read back through the same
// parser as an answer off the wire (ServiceBinding(rdata:)), which checks every field.

import Foundation
import HTTPDNSCore

/// The key of a name's HTTPS records: per network, per name (normal form).
struct RecordsKey: Hashable, Sendable, Codable {
    var network: String
    var name: String

    init(network: String, name: String) {
        self.network = network
        self.name = name
    }
}

/// A name's cached HTTPS records.
struct RecordsEntry: Hashable, Sendable {
    var answer: ServiceBindingAnswer
    /// Which provider gave them.
    var source: String
    var storedAt: Timestamp
    var expiresAt: Timestamp
    var lastUsed: Timestamp
    var refreshing = false
}

/// What a records lookup found.
enum RecordsLookup: Hashable, Sendable {
    case fresh(RecordsEntry)
    /// Past the TTL within `serveExpired`. `refresh`: the caller should start the one refresh (marked as
    /// running).
    case stale(RecordsEntry, refresh: Bool)
    case miss
}

extension DNSCache {
    /// Names whose records are kept at most.
    static let recordsCapacity = 512
    /// The longest TTL records are kept for (seconds): a day.
    static let maxRecordsTTL: UInt32 = 86_400

    /// `key`'s records: fresh, stale (the first stale lookup is told to refresh) or a miss.
    mutating func lookupRecords(_ key: RecordsKey, now: Timestamp) -> RecordsLookup {
        guard let index = records.index(forKey: key) else { return .miss }
        records.values[index].lastUsed = now
        let entry = records.values[index]
        if now < entry.expiresAt { return .fresh(entry) }
        guard now < entry.expiresAt + configuration.serveExpired else {
            records.remove(at: index)
            return .miss
        }
        let refresh = !entry.refreshing
        records.values[index].refreshing = true
        return .stale(entry, refresh: refresh)
    }

    /// `key`'s records while fresh, without counting a use.
    func freshRecords(_ key: RecordsKey, now: Timestamp) -> RecordsEntry? {
        guard let entry = records[key], now < entry.expiresAt else { return nil }
        return entry
    }

    /// Stores `answer` for `key` (no bindings: the name has none). Clears the refresh mark.
    @discardableResult
    mutating func storeRecords(
        _ key: RecordsKey,
        _ answer: ServiceBindingAnswer,
        source: String,
        now: Timestamp
    ) -> RecordsEntry {
        let ttl = Swift.max(
            configuration.minTTL,
            Swift.min(answer.ttl ?? configuration.negativeTTL, Self.maxRecordsTTL)
        )
        let entry = RecordsEntry(
            answer: answer,
            source: source,
            storedAt: now,
            expiresAt: now + .seconds(Int64(ttl)),
            lastUsed: now
        )
        if records[key] == nil, records.count >= Self.recordsCapacity,
            let victim = records.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key
        {
            records[victim] = nil
        }
        records[key] = entry
        return entry
    }

    /// A refresh of `key`'s records failed: the stale entry stays, and the next lookup may try again.
    mutating func recordsRefreshFailed(_ key: RecordsKey) {
        records[key]?.refreshing = false
    }

    /// Records fit to persist: not past their stale window, each record's RDATA as the wire has it.
    func recordsSnapshot(now: Timestamp) -> [CacheSnapshot.RecordsItem] {
        records.compactMap { key, entry in
            guard now < entry.expiresAt + configuration.serveExpired else { return nil }
            return CacheSnapshot.RecordsItem(key: key, entry: entry)
        }
    }

    /// Loads persisted records, skipping expired ones; what is in memory wins.
    mutating func restoreRecords(_ items: [CacheSnapshot.RecordsItem], now: Timestamp) {
        for item in items where records[item.key] == nil {
            guard now < item.expiresAt + configuration.serveExpired, item.storedAt <= now,
                item.storedAt < item.expiresAt, records.count < Self.recordsCapacity,
                let answer = item.answer
            else { continue }
            records[item.key] = RecordsEntry(
                answer: answer,
                source: item.source,
                storedAt: item.storedAt,
                expiresAt: Swift.min(item.expiresAt, item.storedAt + .seconds(Int64(Self.maxRecordsTTL))),
                lastUsed: item.lastUsed
            )
        }
    }
}

extension CacheSnapshot {
    /// One name's HTTPS records in the cache file.
    struct RecordsItem: Hashable, Sendable, Codable {
        var key: RecordsKey
        /// Each record's RDATA, base64: read back through the wire parser.
        var rdata: [String]
        /// The answer's TTL as the provider gave it (nil: none).
        var ttl: UInt32?
        var source: String
        var storedAt: Timestamp
        var expiresAt: Timestamp
        var lastUsed: Timestamp

        /// The entry as the file keeps it, or nil when a record has no wire form (one read off the
        /// wire always has; an answer that cannot be written is left out, and a relaunch asks again).
        init?(key: RecordsKey, entry: RecordsEntry) {
            var rdata: [String] = []
            for binding in entry.answer.bindings {
                guard let bytes = try? binding.rdata() else { return nil }
                rdata.append(Data(bytes).base64EncodedString())
            }
            self.key = key
            self.rdata = rdata
            ttl = entry.answer.ttl
            source = entry.source
            storedAt = entry.storedAt
            expiresAt = entry.expiresAt
            lastUsed = entry.lastUsed
        }

        /// The records, each read as off the wire; nil when one does not read or there are too many.
        var answer: ServiceBindingAnswer? {
            guard rdata.count <= CacheSnapshot.maxRecordsPerName else { return nil }
            var bindings: [ServiceBinding] = []
            for text in rdata {
                guard let bytes = Data(base64Encoded: text), let binding = try? ServiceBinding(rdata: Array(bytes))
                else {
                    return nil
                }
                bindings.append(binding)
            }
            return ServiceBindingAnswer(bindings: bindings, ttl: ttl)
        }
    }

    /// HTTPS records one name may keep in the file (an answer keeps 32 at most).
    static let maxRecordsPerName = 32
}
