// How the resolver's cache keeps answers (the cache itself is the resolver's: HTTPDNSLookup's
// Cache/DNSCache.swift), and the address families it keeps them by: set by apps, read by every module.

/// How the resolver's cache keeps answers: TTL bounds and per-host TTLs, and how long an expired answer
/// is still served (serve-expired, for cold start). Set it on `HTTPDNS.Configuration.cache`.
public struct CacheConfiguration: Hashable, Sendable {
    /// TTLs below this are raised to it, in seconds (10 by default): keeps chatty zero-TTL answers from
    /// hammering HTTPDNS.
    public var minTTL: UInt32 = 10
    /// TTLs above this are lowered to it, in seconds (3600 by default).
    public var maxTTL: UInt32 = 3600
    /// Serve-expired: how long past its TTL an answer is still served, at once, while exactly one
    /// refresh runs in the background (the refreshed answer replaces it; a failed refresh leaves it
    /// until this window ends). 60 s by default, a grace for a refresh in flight. For cold start, set
    /// hours or days (at most ``maxServeExpired``) with a persistence file: an app relaunched later
    /// connects at once to the last good answer, as the vendors' SDKs do with expired-IP reuse.
    /// Persisted answers are kept and loaded, per network, for as long as this allows. Zero turns it
    /// off: an expired answer is never served.
    public var serveExpired: Duration = .seconds(60)
    /// TTLs the app sets itself, in seconds, by host pattern (`api.example.com`, `*.example.com`): they
    /// replace what the service said, `minTTL` and `maxTTL` included. An exact name wins over a
    /// wildcard, and a longer wildcard over a shorter one.
    public var ttlOverrides: [String: UInt32] = [:] {
        didSet { overrides = TTLOverrides(ttlOverrides) }
    }
    /// How long a negative answer (no such name, no address of that family) is kept when the provider
    /// gave no TTL, in seconds; 0 keeps none. 30 by default.
    public var negativeTTL: UInt32 = 30
    /// How far into an answer's TTL a lookup that finds it also refreshes it in the background, so a
    /// name in use never expires: more than 0, at most 1 (1: only once it has expired). 0.75 by default.
    public var prefetchFraction: Double = 0.75
    /// Names kept at most (the least recently used goes first); 1 or more. 4096 by default.
    public var capacity: Int = 4096
    /// `ttlOverrides`, parsed for lookups.
    private(set) var overrides = TTLOverrides([:])

    /// The longest ``serveExpired`` window: 7 days.
    public static let maxServeExpired: Duration = .seconds(7 * 24 * 3600)

    /// The defaults.
    public init() {}

    /// Why these settings cannot be used, or nil: a TTL floor above the ceiling, a serve-expired window
    /// outside 0 … 7 days, a prefetch fraction outside (0, 1], a capacity below 1, a TTL override whose
    /// pattern is not a host pattern or whose TTL is zero.
    package var problem: String? {
        if minTTL > maxTTL { return "minTTL \(minTTL) is above maxTTL \(maxTTL)" }
        if !(prefetchFraction > 0 && prefetchFraction <= 1) {
            return
                "prefetchFraction \(prefetchFraction) is outside (0, 1]: give 0.75 to refresh names in use before they expire"
        }
        if capacity < 1 { return "capacity \(capacity) keeps no name: give 1 or more (4096 by default)" }
        if serveExpired < .zero || serveExpired > Self.maxServeExpired {
            return "serveExpired \(serveExpired) is outside 0 to 7 days"
        }
        for (pattern, ttl) in ttlOverrides.sorted(by: { $0.key < $1.key }) {
            do { _ = try HostPattern(pattern) } catch { return "ttlOverrides \"\(pattern)\": \(error)" }
            if ttl == 0 { return "ttlOverrides \"\(pattern)\": a TTL of 0 would cache nothing; give 1 or more" }
        }
        return nil
    }

    func clamp(_ ttl: UInt32?) -> UInt32 {
        Swift.min(Swift.max(ttl ?? minTTL, minTTL), Swift.max(maxTTL, minTTL))
    }

    /// The TTL to apply to a positive answer for `name` (normal form): an override, or `ttl` within
    /// `minTTL`…`maxTTL`.
    package func ttl(_ ttl: UInt32?, for name: String) -> UInt32 {
        overrides.ttl(for: name) ?? clamp(ttl)
    }
}

/// `CacheConfiguration.ttlOverrides`, ready for lookups: the patterns most specific first (exact names,
/// then longer wildcards before shorter, `*` last), so the first that matches wins. Entries that do not
/// parse are skipped here (the configuration's `problem` reports them).
struct TTLOverrides: Hashable, Sendable {
    struct Rule: Hashable, Sendable {
        var pattern: HostPattern
        var ttl: UInt32

        /// Exact names first, then wildcards by length, `*` last.
        var specificity: (Int, Int) {
            switch pattern.kind {
            case .exact(let name): return (2, name.utf8.count)
            case .suffix(let suffix): return (1, suffix.utf8.count)
            case .any: return (0, 0)
            }
        }
    }

    var rules: [Rule]

    init(_ table: [String: UInt32]) {
        rules = table.compactMap { text, ttl in
            guard ttl > 0, let pattern = try? HostPattern(text) else { return nil }
            return Rule(pattern: pattern, ttl: ttl)
        }
        .sorted { a, b in
            a.specificity != b.specificity
                ? a.specificity > b.specificity : a.pattern.description < b.pattern.description
        }
    }

    func ttl(for name: String) -> UInt32? {
        rules.isEmpty ? nil : rules.first { $0.pattern.matches(name) }?.ttl
    }
}

/// One address family: A records (IPv4) or AAAA records (IPv6).
public enum AddressFamily: String, Hashable, Sendable, Codable, CaseIterable {
    /// IPv4: A records.
    case ipv4
    /// IPv6: AAAA records.
    case ipv6
}
