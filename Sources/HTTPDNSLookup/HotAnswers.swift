// The resolver's memo of whole answers the cache gave lately (issue 15's hot path), as a value: time is
// passed in (wall-clock nanoseconds), so its rules are tested without a clock (HotAnswersTests).
//
// A whole answer (every family asked for) is kept so the next lookups of the name are one dictionary
// read: no key per family, no cache rules run, no `Resolution` built. It is served only while the cache
// itself would serve the same addresses without starting anything: until the first family's prefetch
// point (or its expiry, once a refresh runs), and for at most `window`, so the cache still sees each
// name in use (its LRU order, the names re-resolved after a network change). Storing an answer for the
// name, a network change and `clearCache()` drop it. Bounded like the cache: past its capacity it
// starts again.

import HTTPDNSCore

struct HotAnswers {
    /// One remembered answer. A class, so reading one out of the table is one retain.
    final class Entry: Sendable {
        let query: AddressQuery
        let resolution: Resolution
        /// Served before this.
        let until: Int64
        /// When the first family with addresses expires (for the TTL served).
        let expiresAt: Int64

        init(query: AddressQuery, resolution: Resolution, until: Int64, expiresAt: Int64) {
            self.query = query
            self.resolution = resolution
            self.until = until
            self.expiresAt = expiresAt
        }

        /// The answer as served at `now`: the TTL left (at least 1 s); `elapsed` zero.
        func resolution(at now: Int64) -> Resolution {
            var resolution = self.resolution
            resolution.ttl = UInt32(max(1, (expiresAt - now) / 1_000_000_000))
            return resolution
        }
    }

    /// How long an answer is served before the cache sees the name again.
    static let window: Int64 = 1_000_000_000

    let capacity: Int
    private var entries: [String: Entry] = [:]

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    /// The entry that answers `name` for `query` at `now`, if one is served.
    func entry(_ name: String, _ query: AddressQuery, now: Int64) -> Entry? {
        guard let entry = entries[name], entry.query == query, now < entry.until else { return nil }
        return entry
    }

    /// Remembers the whole answer the cache gave at `now`: served until the cache would stop serving
    /// it as it is (`servedAsIsUntil`) or for `window`, whichever comes first.
    mutating func remember(
        _ name: String,
        _ query: AddressQuery,
        _ resolution: Resolution,
        now: Int64,
        servedAsIsUntil: Int64,
        expiresAt: Int64
    ) {
        if entries.count >= capacity { entries.removeAll() }
        let until = min(now + Self.window, servedAsIsUntil)
        entries[name] = Entry(query: query, resolution: resolution, until: until, expiresAt: expiresAt)
    }

    mutating func forget(_ name: String) { entries[name] = nil }

    mutating func removeAll() { entries.removeAll() }
}
