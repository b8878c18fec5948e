/// Which address families a lookup wants.
public enum AddressQuery: String, Hashable, Sendable, CaseIterable, Codable {
    case ipv4 = "a"
    case ipv6 = "aaaa"
    case both

    package var wantsIPv4: Bool { self != .ipv6 }
    package var wantsIPv6: Bool { self != .ipv4 }
}

/// What one provider said about one address family of one name.
///
/// `addresses` empty means "no such address" (NXDOMAIN or NODATA): a negative answer that may be cached.
package struct FamilyAnswer: Hashable, Sendable, Codable {
    package var addresses: [IPAddress]
    /// Seconds, as the provider gave it (nil when the format carries none).
    package var ttl: UInt32?

    package init(addresses: [IPAddress], ttl: UInt32?) {
        self.addresses = addresses
        self.ttl = ttl
    }

    package static let empty = FamilyAnswer(addresses: [], ttl: nil)
}

/// What one provider said about one name: one answer per family asked (nil = not asked or not given).
package struct HostAnswer: Hashable, Sendable {
    package var ipv4: FamilyAnswer?
    package var ipv6: FamilyAnswer?

    package init(ipv4: FamilyAnswer? = nil, ipv6: FamilyAnswer? = nil) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
    }

    package var allAddresses: [IPAddress] { (ipv4?.addresses ?? []) + (ipv6?.addresses ?? []) }
}

/// Why a provider's answer could not be used. The text says what was wrong with it.
package struct AnswerFormatError: Error, Hashable, Sendable, CustomStringConvertible {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}

/// Lower-cases a hostname and drops a trailing dot: the one form every key and comparison uses.
package func normalizeHostname(_ name: some StringProtocol) -> String {
    var n = name.lowercased()
    if n.hasSuffix(".") { n.removeLast() }
    return n
}

/// True when `name` is already lower case without a trailing dot (a cheap byte scan, no allocation).
package func isNormalizedHostname(_ name: String) -> Bool {
    var last: UInt8 = 0
    for c in name.utf8 {
        if c >= 0x41 && c <= 0x5A { return false }
        last = c
    }
    return last != 0x2E && last != 0
}

/// Checks that `name` is something we may put in a query: 1–253 bytes, labels of 1–63 bytes made of
/// letters, digits, `-` and `_`. Returns the normalized name or throws a message saying what is wrong.
package func validatedHostname(_ name: some StringProtocol) throws -> String {
    let n = normalizeHostname(name)
    guard !n.isEmpty else { throw AnswerFormatError("empty hostname") }
    guard n.utf8.count <= 253 else { throw AnswerFormatError("hostname longer than 253 bytes") }
    for label in n.split(separator: ".", omittingEmptySubsequences: false) {
        guard !label.isEmpty, label.utf8.count <= 63 else {
            throw AnswerFormatError("\"\(name)\" has an empty or over-long label")
        }
        guard
            label.utf8.allSatisfy({ c in
                (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F
            })
        else {
            throw AnswerFormatError("\"\(name)\" is not a hostname (letters, digits, '-', '_' and dots only)")
        }
    }
    return n
}
