// The resolver's memo of whole answers the cache gave lately (the hot path), as a value: time is
// passed in (wall-clock nanoseconds), so its rules are tested without a clock (HotAnswersTests).
//
// A whole answer (every family asked for) is kept so the next lookups of the name are one table read:
// no key per family, no cache rules run, no `Resolution` built. It is served only while the cache
// itself would serve the same addresses without starting anything: until the first family's prefetch
// point (or its expiry, once a refresh runs), and for at most `window`, so the cache still sees each
// name in use (its LRU order, the names re-resolved after a network change). Storing an answer for the
// name, a network change and `clearCache()` drop it. Bounded like the cache: past its capacity it
// starts again.
//
// Each entry is served as it was stored, TTL included: it is served only until the TTL left would read
// one second less, so a read copies the answer out and computes nothing.
//
// The table is open addressing with linear probing, keyed by the name's bytes under a hash of our own
// (`NameHash`, keyed with a random number per process), not a `Dictionary`: Swift's `Hasher`
// (SipHash-1-3, set up and finalized on every call) was 340 of a cached lookup's 1,160 instructions,
// this hash is about 90. A name whose probe would pass `maxProbes` slots is not kept (it is answered by
// the cache instead), so names made to collide cost at most that many comparisons.

import HTTPDNSCore

struct HotAnswers {
    /// One remembered answer. A class, so reading one out of the table is one retain.
    final class Entry: Sendable {
        let name: String
        let hash: UInt64
        let query: AddressQuery
        /// The answer served, TTL included; `elapsed` zero.
        let resolution: Resolution
        /// Served before this.
        let until: Int64

        init(name: String, hash: UInt64, query: AddressQuery, resolution: Resolution, until: Int64) {
            self.name = name
            self.hash = hash
            self.query = query
            self.resolution = resolution
            self.until = until
        }
    }

    /// How long an answer is served before the cache sees the name again.
    static let window: Int64 = 1_000_000_000
    /// The most slots a lookup or an insertion looks at.
    static let maxProbes = 8

    let capacity: Int
    /// Twice the entries at least (doubled as they come, from 16), so probes stay short.
    private var slots: [Entry?] = Array(repeating: nil, count: 16)
    private var mask = 15
    private let hasher: NameHash
    private(set) var count = 0
    /// Families answered from the memo (the resolver's statistics add them to the cache's hits).
    private(set) var hits = 0

    init(capacity: Int, hasher: NameHash = NameHash()) {
        self.hasher = hasher
        self.capacity = max(1, capacity)
    }

    /// The entry that answers `name` for `query` at `now`, if one is served.
    func entry(_ name: String, _ query: AddressQuery, now: Int64) -> Entry? {
        guard let slot = slot(of: name, hash: hasher.hash(name)), let entry = slots[slot],
            entry.query == query, now < entry.until
        else { return nil }
        return entry
    }

    /// `entry(name, query, now:)`, counting `families` hits when there is one.
    mutating func serve(_ name: String, _ query: AddressQuery, now: Int64, families: Int) -> Entry? {
        guard let entry = entry(name, query, now: now) else { return nil }
        hits += families
        return entry
    }

    /// Remembers the whole answer the cache gave at `now`, with the TTL left then: served until the
    /// cache would stop serving it as it is (`servedAsIsUntil`), for `window`, or until that TTL would
    /// read a second less, whichever comes first.
    mutating func remember(
        _ name: String,
        _ query: AddressQuery,
        _ resolution: Resolution,
        now: Int64,
        servedAsIsUntil: Int64,
        expiresAt: Int64
    ) {
        let second: Int64 = 1_000_000_000
        // Never 0 while served: a TTL of 0 means "do not cache" to whoever reads it.
        let ttl = max(1, (expiresAt - now) / second)
        // The TTL read at a later time is (expiresAt - then) / second, floored: the same while then <=
        // expiresAt - ttl seconds. At 1 it stays 1 until expiry.
        let ttlChanges = ttl > 1 ? expiresAt - ttl * second + 1 : Int64.max
        var served = resolution
        served.ttl = UInt32(clamping: ttl)
        served.elapsed = .zero
        let hash = hasher.hash(name)
        let entry = Entry(
            name: name,
            hash: hash,
            query: query,
            resolution: served,
            until: min(now + Self.window, servedAsIsUntil, ttlChanges)
        )
        if let slot = slot(of: name, hash: hash) {
            slots[slot] = entry
            return
        }
        if count >= capacity { removeAll() }
        if 2 * (count + 1) > slots.count { grow() }
        insert(entry)
    }

    /// Puts `entry` (a name not in the table) in the first free slot of its probe; when every slot near
    /// its own is taken it is not kept, and the cache answers it instead.
    private mutating func insert(_ entry: Entry) {
        var index = Int(truncatingIfNeeded: entry.hash) & mask
        for _ in 0..<Self.maxProbes {
            if slots[index] == nil {
                slots[index] = entry
                count += 1
                return
            }
            index = (index + 1) & mask
        }
    }

    /// Twice the slots, every entry placed again.
    private mutating func grow() {
        let entries = slots.compactMap { $0 }
        slots = Array(repeating: nil, count: 2 * slots.count)
        mask = slots.count - 1
        count = 0
        for entry in entries { insert(entry) }
    }

    mutating func forget(_ name: String) {
        guard var hole = slot(of: name, hash: hasher.hash(name)) else { return }
        // Backward-shift deletion: later entries of the run move into the hole when their own slot is
        // at or before it, so every entry stays reachable from its own slot without tombstones.
        var next = hole
        while true {
            next = (next + 1) & mask
            guard let moving = slots[next] else { break }
            let home = Int(truncatingIfNeeded: moving.hash) & mask
            // Whether `home` lies cyclically outside (hole, next]: then the entry may fill the hole.
            let outside = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next)
            if outside {
                slots[hole] = moving
                hole = next
            }
        }
        slots[hole] = nil
        count -= 1
    }

    mutating func removeAll() {
        guard count > 0 else { return }
        for index in slots.indices { slots[index] = nil }
        count = 0
    }

    /// The slot holding `name`, if it is kept.
    private func slot(of name: String, hash: UInt64) -> Int? {
        var index = Int(truncatingIfNeeded: hash) & mask
        for _ in 0..<Self.maxProbes {
            guard let entry = slots[index] else { return nil }
            if entry.hash == hash, entry.name == name { return index }
            index = (index + 1) & mask
        }
        return nil
    }
}

/// A fast hash of a name's UTF-8 bytes, eight at a time, keyed with a random number picked once per
/// process (so which names collide is not known in advance). Not cryptographic: `HotAnswers` bounds its
/// probes instead.
struct NameHash: Sendable {
    /// Mixed into every hash; tests pass a fixed one.
    private let key: UInt64

    init(key: UInt64 = UInt64.random(in: .min ... .max)) { self.key = key }

    func hash(_ name: String) -> UInt64 {
        if let hash = name.utf8.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0)) }) {
            return hash
        }
        var copy = name
        copy.makeContiguousUTF8()
        return copy.utf8.withContiguousStorageIfAvailable { hash(UnsafeRawBufferPointer($0)) }!
    }

    private func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h = key ^ UInt64(bytes.count)
        var offset = 0
        while offset + 8 <= bytes.count {
            h = mix(h ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            offset += 8
        }
        if offset < bytes.count {
            // The last eight bytes, overlapping ones already mixed, when there are eight; else byte by byte.
            var tail: UInt64 = 0
            if bytes.count >= 8 {
                tail = bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)
            } else {
                for i in offset..<bytes.count { tail |= UInt64(bytes[i]) << (8 * UInt64(i - offset)) }
            }
            h = mix(h ^ tail)
        }
        return mix(h)
    }

    private func mix(_ x: UInt64) -> UInt64 {
        let y = (x ^ (x >> 32)) &* 0x9E37_79B9_7F4A_7C15
        return y ^ (y >> 29)
    }
}
