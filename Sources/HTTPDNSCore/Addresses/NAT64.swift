// NAT64 (RFC 6052, RFC 7050): how an IPv6-only device reaches an IPv4-only address. The network's
// translator owns an IPv6 prefix; an IPv4 address written into that prefix (at a place fixed by the
// prefix length) is routed to the translator, which forwards to the IPv4 address.
//
// The prefix is never assumed: it is discovered by asking the network's own resolver (a DNS64) for
// the AAAA records of `ipv4only.arpa`, a name that only has the A records 192.0.0.170 and
// 192.0.0.171. The DNS64 synthesizes AAAA answers from them, and where those well-known addresses sit
// in the answer gives the prefix and its length.

/// A NAT64 prefix (RFC 6052 "Pref64::/n"): where an IPv6-only device writes an IPv4 address to reach it
/// through the network's translator.
package struct NAT64Prefix: Hashable, Sendable, CustomStringConvertible {
    /// The prefix lengths RFC 6052 allows.
    static let lengths = [32, 40, 48, 56, 64, 96]

    /// The sixteen bytes of the prefix, zero past `length`.
    let bytes: [UInt8]
    /// The prefix length in bits: 32, 40, 48, 56, 64 or 96.
    let length: Int

    /// The prefix `address`/`length`; nil when `address` is not IPv6, the length is not one RFC 6052
    /// allows, or the reserved octet (bits 64–71) is not zero. Bits past `length` are ignored.
    init?(_ address: IPAddress, length: Int) {
        guard case .v6(let b) = address, Self.lengths.contains(length) else { return nil }
        let kept = length / 8
        var bytes = Array(b.prefix(kept))
        bytes += [UInt8](repeating: 0, count: 16 - kept)
        // RFC 6052 section 2.2: bits 64 to 71 are the "u" octet and must be zero (for /96 they are part
        // of the prefix, which a /96 keeps zero there too).
        guard bytes[8] == 0 else { return nil }
        self.bytes = bytes
        self.length = length
    }

    /// Parses `64:ff9b::/96`; nil for anything else (see `init(_:length:)`).
    package init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let ip = IPAddress(parts[0]), parts[1].count <= 3, let n = Int(parts[1]) else {
            return nil
        }
        self.init(ip, length: n)
    }

    /// The well-known prefix 64:ff9b::/96 (RFC 6052 section 2.1).
    static let wellKnown = NAT64Prefix(IPAddress("64:ff9b::")!, length: 96)!

    /// Where the four bytes of an IPv4 address go in an IPv6 address under this prefix length
    /// (RFC 6052 section 2.2: byte 8, the "u" octet, is skipped and stays zero).
    var positions: [Int] {
        switch length {
        case 32: return [4, 5, 6, 7]
        case 40: return [5, 6, 7, 9]
        case 48: return [6, 7, 9, 10]
        case 56: return [7, 9, 10, 11]
        case 64: return [9, 10, 11, 12]
        default: return [12, 13, 14, 15]
        }
    }

    /// The IPv6 address that reaches `ipv4` through this translator; nil for an IPv6 `ipv4`.
    package func synthesize(_ ipv4: IPAddress) -> IPAddress? {
        guard case .v4(let a, let b, let c, let d) = ipv4 else { return nil }
        var out = bytes
        for (position, byte) in zip(positions, [a, b, c, d]) { out[position] = byte }
        return .v6(out)
    }

    /// The IPv4 address inside `ipv6` when it is an address under this prefix; nil otherwise.
    func extract(_ ipv6: IPAddress) -> IPAddress? {
        guard case .v6(let b) = ipv6, b.prefix(length / 8).elementsEqual(bytes.prefix(length / 8)) else {
            return nil
        }
        if length < 96, b[8] != 0 { return nil }
        let p = positions
        return .v4(b[p[0]], b[p[1]], b[p[2]], b[p[3]])
    }

    /// `fd00:64:64::/96`.
    package var description: String { "\(IPAddress.v6(bytes))/\(length)" }

    /// The addresses `ipv4only.arpa` has (RFC 7050 section 2.2): the "well-known IPv4-only addresses".
    static let wellKnownIPv4 = [IPAddress.v4(192, 0, 0, 170), .v4(192, 0, 0, 171)]

    /// The name whose AAAA answer from a DNS64 reveals the prefix.
    package static let discoveryName = "ipv4only.arpa"

    /// The prefixes the AAAA answers of `ipv4only.arpa` reveal (RFC 7050 section 3), in answer order,
    /// each once.
    ///
    /// Each answer is searched for 192.0.0.170 or 192.0.0.171 at the place each prefix length puts an
    /// IPv4 address, the /96 place first, then /64 down to /32; the first place that holds one decides
    /// the length. An answer holding neither (a resolver that is not a DNS64, or a forged answer) gives
    /// nothing: no prefix is ever assumed.
    package static func discover(fromAAAA answers: [IPAddress]) -> [NAT64Prefix] {
        var found: [NAT64Prefix] = []
        for answer in answers where answer.isIPv6 {
            for length in lengths.reversed() {
                guard let prefix = NAT64Prefix(answer, length: length),
                    let embedded = prefix.extract(answer), wellKnownIPv4.contains(embedded)
                else { continue }
                if !found.contains(prefix) { found.append(prefix) }
                break
            }
        }
        return found
    }
}

extension IPAddress {
    /// True for IPv4 addresses never sent through a NAT64 translator: this host and its loopback
    /// (0/8, 127/8), link-local 169.254/16, multicast and broadcast. They are reached, or not, as they
    /// are.
    package var staysOffNAT64: Bool {
        guard case .v4(let a, let b, _, _) = self else { return true }
        return a == 0 || a == 127 || (a == 169 && b == 254) || a >= 224
    }
}
