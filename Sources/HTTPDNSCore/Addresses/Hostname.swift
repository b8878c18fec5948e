// Hostnames, in the one form every cache key, policy match and comparison uses: lower case, no trailing
// dot. `normalizeHostname` makes that form from anything; `validatedHostname` also checks that the name
// can go into a DNS query (and is what every parser of a user- or peer-supplied name calls).
// Host-and-port text (`[::1]:443`) is in HostPort.swift.

/// Lower-cases a hostname and drops a trailing dot: the one form every key and comparison uses.
package func normalizeHostname(_ name: some StringProtocol) -> String {
    var n = name.lowercased()
    if n.hasSuffix(".") { n.removeLast() }
    return n
}

/// True when `name` is already lower case without a trailing dot (a cheap byte scan, no allocation).
package func isNormalizedHostname(_ name: String) -> Bool {
    func scan(_ bytes: some Sequence<UInt8>) -> Bool {
        var last: UInt8 = 0
        for c in bytes {
            if c >= 0x41 && c <= 0x5A { return false }
            last = c
        }
        return last != 0x2E && last != 0
    }
    // A native string's bytes are contiguous: scanned as a buffer, not through the UTF-8 view's index.
    return name.utf8.withContiguousStorageIfAvailable { scan($0) } ?? scan(name.utf8)
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

/// Why a provider's answer could not be used. The text says what was wrong with it.
package struct AnswerFormatError: Error, Hashable, Sendable, CustomStringConvertible {
    var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}

extension StringProtocol {
    /// The text without `set`'s characters at either end.
    package func trimmed(of set: String) -> String {
        let chars = Set(set)
        var s = Substring(self)
        while let f = s.first, chars.contains(f) { s.removeFirst() }
        while let l = s.last, chars.contains(l) { s.removeLast() }
        return String(s)
    }
}
