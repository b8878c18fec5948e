// Reading a persisted cache file: a file on disk is input like any other (another version of the
// program, another user with write access to the directory, a torn write, a disk error), so it is read
// by size first, then checked entry by entry. A file that is too big, not JSON of the expected shape,
// or of another version is refused whole; an entry that could not have been written by this version is
// dropped and counted, and the rest of the file is used. Fuzzed by Fuzz/Targets/FuzzCacheFile.swift.

import HTTPDNSCore
import Foundation

extension CacheSnapshot {
    /// Largest cache file read (8 MiB); a bigger one is refused without being parsed.
    static let maxFileBytes = 8 * 1024 * 1024
    /// Entries kept by default when loading (the default `CacheConfiguration.capacity`).
    static let defaultLoadCapacity = 4096
    /// Addresses one entry may hold.
    static let maxAddressesPerEntry = 64
    /// Longest TTL an entry may carry (seconds): 7 days.
    static let maxEntryTTL: UInt32 = 7 * 24 * 3600
    /// Longest network identifier (bytes of UTF-8).
    static let maxNetworkBytes = 256
    /// Longest provider description in `source` (bytes of UTF-8).
    static let maxSourceBytes = 512

    /// A loaded cache file: the entries kept and how many were dropped as invalid, duplicate or over
    /// capacity.
    struct LoadResult: Hashable, Sendable {
        var snapshot: CacheSnapshot
        var dropped: Int
    }

    /// Parses and validates a cache file's bytes.
    ///
    /// Throws for a file over `maxFileBytes`, one that is not a cache file, or one of another version.
    /// Drops entries whose name is not a normalized valid hostname, whose network id is over
    /// `maxNetworkBytes`, that hold an address of the other family, an unspecified address or more than
    /// `maxAddressesPerEntry` addresses, whose TTL is over `maxEntryTTL`, that expire before they were
    /// stored, whose `source` is over `maxSourceBytes`, or whose key came earlier in the file (an entry
    /// with no address is a negative answer). Keeps at most `capacity` entries, the most recently used.
    /// HTTPS records are dropped on the same grounds, and when a record does not read as off the wire
    /// or there are more than `maxRecordsPerName`; at most `DNSCache.recordsCapacity` names are kept.
    /// HSTS entries whose host is not a normalized valid hostname are dropped; at most
    /// `StrictTransportSecurity.limit` are kept, those that expire last.
    static func load(from bytes: [UInt8], capacity: Int = defaultLoadCapacity) throws(CacheFileError)
        -> LoadResult
    {
        guard bytes.count <= maxFileBytes else { throw CacheFileError(.tooLarge(bytes: bytes.count)) }
        let file: FileBody
        do {
            file = try JSONDecoder().decode(FileBody.self, from: Data(bytes))
        } catch {
            throw CacheFileError(.notACacheFile)
        }
        guard file.version == currentVersion, let lenient = file.entries else {
            throw CacheFileError(.otherVersion(file.version))
        }
        let entries = kept(
            lenient.map(\.item),
            isValid: isValid,
            key: \.key,
            lastUsed: \.entry.lastUsed,
            capacity: capacity
        )
        let lenientRecords = file.records ?? []
        let records = kept(
            lenientRecords.map(\.item),
            isValid: isValid,
            key: \.key,
            lastUsed: \.lastUsed,
            capacity: DNSCache.recordsCapacity
        )
        let lenientHSTS = file.hsts ?? []
        let hsts = kept(
            lenientHSTS.map(\.item),
            isValid: { (try? validatedHostname($0.host)) == $0.host },
            key: \.host,
            lastUsed: \.expires,
            capacity: StrictTransportSecurity.limit
        )
        var snapshot = CacheSnapshot(entries: entries, records: records)
        snapshot.strictTransport = hsts
        return LoadResult(
            snapshot: snapshot,
            dropped: lenient.count - entries.count + lenientRecords.count - records.count
                + lenientHSTS.count - hsts.count
        )
    }

    /// The items a file's list keeps: those that decoded and are valid, the first of each key, at most
    /// `capacity`, the most recently used.
    private static func kept<Element, Key: Hashable>(
        _ decoded: [Element?],
        isValid: (Element) -> Bool,
        key: (Element) -> Key,
        lastUsed: (Element) -> Timestamp,
        capacity: Int
    ) -> [Element] {
        var seen: Set<Key> = []
        var kept: [Element] = []
        for item in decoded.lazy.compactMap({ $0 }) where isValid(item) && seen.insert(key(item)).inserted {
            kept.append(item)
        }
        if kept.count > max(capacity, 0) {
            kept.sort { lastUsed($0) > lastUsed($1) }
            kept.removeLast(kept.count - max(capacity, 0))
        }
        return kept
    }

    /// Whether this version could have written `item`.
    static func isValid(_ item: Item) -> Bool {
        let key = item.key
        let entry = item.entry
        guard (try? validatedHostname(key.name)) == key.name, key.network.utf8.count <= maxNetworkBytes else {
            return false
        }
        guard entry.addresses.count <= maxAddressesPerEntry else { return false }
        for ip in entry.addresses where ip.isIPv6 != (key.family == .ipv6) || ip.isUnspecified {
            return false
        }
        return entry.ttl <= maxEntryTTL && entry.storedAt <= entry.expiresAt
            && entry.source.utf8.count <= maxSourceBytes
    }

    /// Whether this version could have written `item`.
    static func isValid(_ item: RecordsItem) -> Bool {
        guard (try? validatedHostname(item.key.name)) == item.key.name,
            item.key.network.utf8.count <= maxNetworkBytes, item.source.utf8.count <= maxSourceBytes,
            item.storedAt <= item.expiresAt
        else { return false }
        return item.answer != nil
    }

    /// The file's bytes as `CachePersistence` writes them (JSON, keys sorted).
    func fileBytes() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(self))
    }

    /// The file's shape: the version first, entries read one by one so that a malformed entry (a bad
    /// address, a missing field) costs only itself.
    private struct FileBody: Decodable {
        var version: Int
        var entries: [LenientItem]?
        /// Absent from a file written before records were kept.
        var records: [LenientRecords]?
        /// Absent from a file written before HSTS was kept.
        var hsts: [LenientHSTS]?

        enum CodingKeys: String, CodingKey { case version, entries, records, hsts }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            version = try c.decode(Int.self, forKey: .version)
            guard version == CacheSnapshot.currentVersion else { return }
            entries = try c.decode([LenientItem].self, forKey: .entries)
            records = try c.decodeIfPresent([LenientRecords].self, forKey: .records)
            hsts = try c.decodeIfPresent([LenientHSTS].self, forKey: .hsts)
        }
    }

    private struct LenientHSTS: Decodable {
        var item: StrictTransportSecurity.Entry?
        init(from decoder: any Decoder) { item = try? StrictTransportSecurity.Entry(from: decoder) }
    }

    private struct LenientItem: Decodable {
        var item: Item?
        init(from decoder: any Decoder) { item = try? Item(from: decoder) }
    }

    private struct LenientRecords: Decodable {
        var item: RecordsItem?
        init(from decoder: any Decoder) { item = try? RecordsItem(from: decoder) }
    }
}

/// Why a cache file was refused whole. The resolver then starts with an empty cache.
struct CacheFileError: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Code: Hashable, Sendable {
        case tooLarge(bytes: Int)
        case notACacheFile
        case otherVersion(Int)
    }

    var code: Code
    init(_ code: Code) { self.code = code }

    var description: String {
        switch code {
        case .tooLarge(let bytes):
            return "cache file of \(bytes) bytes is larger than the \(CacheSnapshot.maxFileBytes)-byte limit"
        case .notACacheFile:
            return "not a cache file (torn, corrupt or foreign JSON)"
        case .otherVersion(let v):
            return "cache file of version \(v); this version reads version \(CacheSnapshot.currentVersion)"
        }
    }
}
