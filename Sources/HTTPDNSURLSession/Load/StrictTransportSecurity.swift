// HTTP Strict Transport Security (RFC 6797) for intercepted loads, as Apple's URL loading applies it:
// once an https response from a host carries Strict-Transport-Security, later http:// requests to it
// (and, with includeSubDomains, to its subdomains) go over https until max-age runs out. The system
// keeps its own store, which a URLProtocol cannot read, so the protocol keeps one of its own from the
// responses it serves (the system's preload list is not known to it). swift-corelibs-foundation has no
// HSTS, so there it is not applied: the app would see a difference from the system. Pure: headers and a
// clock in, a verdict out.

import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers

struct StrictTransportSecurity: Equatable {
    struct Entry: Equatable {
        var expires: Date
        var includesSubdomains: Bool
    }

    /// Hosts remembered at most; the entry closest to expiry goes first.
    static let limit = 1024

    private(set) var entries: [String: Entry] = [:]

    /// Records the `Strict-Transport-Security` value of an https response from `host` (§8.1): a valid
    /// max-age sets or renews the entry, max-age=0 removes it. IP literals and malformed values are
    /// ignored (§8.1.1, §6.1).
    mutating func record(_ value: String, from host: String, now: Date) {
        let name = normalizeHostname(host)
        guard IPAddress(name) == nil, let (maxAge, subdomains) = Self.parse(value) else { return }
        if maxAge == 0 {
            entries[name] = nil
            return
        }
        entries[name] = Entry(expires: now.addingTimeInterval(maxAge), includesSubdomains: subdomains)
        if entries.count > Self.limit, let soonest = entries.min(by: { $0.value.expires < $1.value.expires })?.key {
            entries[soonest] = nil
        }
    }

    /// Whether an http:// request to `host` goes over https (§8.2): the host itself, or a superdomain
    /// with includeSubDomains, has an entry that has not expired.
    func upgrades(_ host: String, now: Date) -> Bool {
        let name = normalizeHostname(host)
        guard IPAddress(name) == nil else { return false }
        var labels = name.split(separator: ".")
        var exact = true
        while !labels.isEmpty {
            if let entry = entries[labels.joined(separator: ".")], entry.expires > now,
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
    static func parse(_ value: String) -> (maxAge: TimeInterval, includesSubdomains: Bool)? {
        var maxAge: TimeInterval?
        var subdomains = false
        var seen: Set<String> = []
        for part in value.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let name = pair.first?.lowercased(), !name.isEmpty else { continue }
            guard seen.insert(name).inserted else { return nil }
            switch name {
            case "max-age":
                guard pair.count == 2,
                    let seconds = TimeInterval(pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))),
                    seconds >= 0
                else { return nil }
                maxAge = seconds
            case "includesubdomains":
                subdomains = true
            default:
                continue
            }
        }
        return maxAge.map { ($0, subdomains) }
    }

    /// The protocol's store: where the system applies HSTS (Apple platforms), the one responses fill
    /// and requests consult; nil where it does not (corelibs).
    static let shared: NIOLockedValueBox<StrictTransportSecurity>? = {
        #if canImport(Darwin)
            return NIOLockedValueBox(StrictTransportSecurity())
        #else
            return nil
        #endif
    }()
}
