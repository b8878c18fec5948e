// HTTP Strict Transport Security (RFC 6797): once an https response from a host carries
// Strict-Transport-Security, later http:// requests to it (and, with includeSubDomains, to its
// subdomains) go over https until max-age runs out. The engine's requests, the loopback proxy's and, where
// the system applies HSTS (Apple platforms), the URLSession route's consult one store: the resolver's
// cache keeps it and saves it in the cache file, so a relaunch still knows (the system's preload list is
// not known here). Pure: headers and a clock in, a verdict out.

import HTTPDNSCore

/// Hosts that asked for https, and until when. Plain value type; the owner keeps it under a lock.
struct StrictTransportSecurity: Hashable, Sendable {
    /// One host's policy.
    struct Entry: Hashable, Sendable, Codable {
        var host: String
        var expires: Timestamp
        var includesSubdomains: Bool
    }

    /// Hosts remembered at most; the entry closest to expiry goes first.
    static let limit = 1024
    /// A max-age beyond this (about 10 years) counts as this: no clock arithmetic overflows on a
    /// hostile value.
    static let longestMaxAge: Double = 10 * 366 * 86_400

    private(set) var entries: [String: Entry] = [:]

    init() {}

    /// Records the `Strict-Transport-Security` value of an https response from `host` (§8.1): a valid
    /// max-age sets or renews the entry, max-age=0 removes it. IP literals and malformed values are
    /// ignored (§8.1.1, §6.1). Returns whether the store changed.
    @discardableResult
    mutating func record(_ value: String, from host: String, now: Timestamp) -> Bool {
        let name = normalizeHostname(host)
        guard IPAddress(name) == nil, let (maxAge, subdomains) = Self.parse(value) else { return false }
        if maxAge == 0 { return entries.removeValue(forKey: name) != nil }
        let entry = Entry(
            host: name,
            expires: now + .seconds(min(maxAge, Self.longestMaxAge)),
            includesSubdomains: subdomains
        )
        // Renewed within the same second with the same terms: nothing to save.
        if let old = entries[name], old.includesSubdomains == subdomains,
            abs(old.expires.nanoseconds - entry.expires.nanoseconds) < 1_000_000_000
        {
            return false
        }
        insert(entry)
        return true
    }

    private mutating func insert(_ entry: Entry) {
        entries[entry.host] = entry
        if entries.count > Self.limit, let soonest = entries.min(by: { $0.value.expires < $1.value.expires })?.key {
            entries[soonest] = nil
        }
    }

    /// Whether an http:// request to `host` goes over https (§8.2): the host itself, or a superdomain
    /// with includeSubDomains, has an entry that has not expired.
    func upgrades(_ host: String, now: Timestamp) -> Bool {
        guard !entries.isEmpty else { return false }
        let name = normalizeHostname(host)
        guard IPAddress(name) == nil else { return false }
        var labels = name.split(separator: ".")
        var exact = true
        while !labels.isEmpty {
            if let entry = entries[labels.joined(separator: ".")], now < entry.expires,
                exact || entry.includesSubdomains
            {
                return true
            }
            labels.removeFirst()
            exact = false
        }
        return false
    }

    /// max-age (seconds) and includeSubDomains; nil without a valid max-age or with a directive twice.
    static func parse(_ value: String) -> (maxAge: Double, includesSubdomains: Bool)? {
        var maxAge: Double?
        var subdomains = false
        var seen: Set<String> = []
        for part in value.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: " \t") }
            guard let name = pair.first?.lowercased(), !name.isEmpty else { continue }
            guard seen.insert(name).inserted else { return nil }
            switch name {
            case "max-age":
                let digits = pair.count == 2 ? pair[1].trimmingCharacters(in: "\"") : ""
                guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit) else { return nil }
                maxAge = Double(digits)
            case "includesubdomains":
                subdomains = true
            default:
                continue
            }
        }
        return maxAge.map { ($0, subdomains) }
    }

    /// The entries not yet expired, for the cache file.
    func snapshot(now: Timestamp) -> [Entry] {
        entries.values.filter { now < $0.expires }.sorted { $0.host < $1.host }
    }

    /// Loads saved entries that have not expired; what is already in memory wins.
    mutating func restore(_ saved: [Entry], now: Timestamp) {
        for entry in saved where now < entry.expires && entries[entry.host] == nil {
            guard let host = try? validatedHostname(entry.host), host == entry.host else { continue }
            insert(entry)
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = self
        while let first = s.first, set.contains(first) { s.removeFirst() }
        while let last = s.last, set.contains(last) { s.removeLast() }
        return String(s)
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String { self[...].trimmingCharacters(in: set) }
}
