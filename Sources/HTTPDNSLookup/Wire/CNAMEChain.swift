// Following CNAMEs in an answer section, once for every format that carries records (the DNS wire format
// in DNSMessage.swift, JSON DoH in JSONFormats.swift): the addresses that answer a question are the
// records owned by the question name or by a name a CNAME chain from it leads to. Chains may come in any
// order; a few passes settle them, at most 16 and at most one per alias, so a hostile answer of many
// aliases costs little.

import HTTPDNSCore

/// The names an answer to `question` may be owned by, and the smallest TTL of the aliases that led there.
/// Value type, `Sendable`.
struct CNAMEChain: Hashable, Sendable {
    /// The question name and every alias target reached from it, normalized (`normalizeHostname`).
    private(set) var names: Set<String>
    /// The smallest TTL among the CNAME records followed; nil when none was followed (or none had a TTL).
    /// The answer's TTL is at most this: an address is only as fresh as the alias that led to it.
    private(set) var ttl: UInt32?

    /// Follows `aliases` (each a CNAME record: the name that owns it, the name it points to, its TTL)
    /// from `question`.
    init(from question: String, aliases: [(owner: String, target: String, ttl: UInt32?)]) {
        names = [normalizeHostname(question)]
        for _ in 0..<min(aliases.count, 16) {
            var grew = false
            for alias in aliases where names.contains(normalizeHostname(alias.owner)) {
                if names.insert(normalizeHostname(alias.target)).inserted {
                    grew = true
                    if let t = alias.ttl { ttl = min(ttl ?? t, t) }
                }
            }
            if !grew { break }
        }
    }

    /// Whether a record owned by `owner` answers the question.
    func answers(_ owner: String) -> Bool { names.contains(normalizeHostname(owner)) }
}
