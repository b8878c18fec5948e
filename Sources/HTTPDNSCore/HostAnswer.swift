/// Which address families a lookup wants.
public enum AddressQuery: String, Hashable, Sendable, CaseIterable, Codable {
    case ipv4 = "a"
    case ipv6 = "aaaa"
    case both

    public var wantsIPv4: Bool { self != .ipv6 }
    public var wantsIPv6: Bool { self != .ipv4 }
}

/// What one provider said about one address family of one name.
///
/// `addresses` empty means "no such address" (NXDOMAIN or NODATA): a negative answer that may be cached.
public struct FamilyAnswer: Hashable, Sendable, Codable {
    public var addresses: [IPAddress]
    /// Seconds, as the provider gave it (nil when the format carries none).
    public var ttl: UInt32?

    public init(addresses: [IPAddress], ttl: UInt32?) {
        self.addresses = addresses
        self.ttl = ttl
    }

    public static let empty = FamilyAnswer(addresses: [], ttl: nil)
}

/// What one provider said about one name: one answer per family asked (nil = not asked or not given).
public struct HostAnswer: Hashable, Sendable {
    public var ipv4: FamilyAnswer?
    public var ipv6: FamilyAnswer?

    public init(ipv4: FamilyAnswer? = nil, ipv6: FamilyAnswer? = nil) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
    }

    public var allAddresses: [IPAddress] { (ipv4?.addresses ?? []) + (ipv6?.addresses ?? []) }
}

/// Why a provider's answer could not be used. The text says what was wrong with it.
public struct AnswerFormatError: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Lower-cases a hostname and drops a trailing dot: the one form every key and comparison uses.
public func normalizeHostname(_ name: some StringProtocol) -> String {
    var n = name.lowercased()
    if n.hasSuffix(".") { n.removeLast() }
    return n
}

/// True when `name` is already lower case without a trailing dot (a cheap byte scan, no allocation).
public func isNormalizedHostname(_ name: String) -> Bool {
    var last: UInt8 = 0
    for c in name.utf8 {
        if c >= 0x41 && c <= 0x5A { return false }
        last = c
    }
    return last != 0x2E && last != 0
}

/// Checks that `name` is something we may put in a query: 1–253 bytes, labels of 1–63 bytes made of
/// letters, digits, `-` and `_`. Returns the normalized name or throws a message saying what is wrong.
public func validatedHostname(_ name: some StringProtocol) throws -> String {
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
