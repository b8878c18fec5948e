#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An IPv4 or IPv6 address, as bytes in network order.
///
/// Parsing and formatting use the C library's `inet_pton` / `inet_ntop`, so every textual form the
/// platform accepts is accepted (and nothing else: no hostnames, no zone IDs).
/// Value type, `Sendable`.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible, Codable {
    /// An IPv4 address, its four bytes in network order.
    case v4(UInt8, UInt8, UInt8, UInt8)
    /// An IPv6 address, its sixteen bytes in network order.
    case v6([UInt8])

    /// Parses a textual IPv4 or IPv6 address. Brackets around IPv6 (`[::1]`) are accepted.
    ///
    /// - Parameter text: The address as text; nil is made for anything else, hostnames and zone IDs included.
    public init?(_ text: some StringProtocol) {
        var s = String(text)
        if s.hasPrefix("["), s.hasSuffix("]") { s = String(s.dropFirst().dropLast()) }
        guard !s.isEmpty, s.utf8.count <= 64 else { return nil }
        // inet_pton reads a C string: "1.2.3.4\0junk" would parse as 1.2.3.4. Only hex digits, dots and
        // colons can make an address.
        guard
            s.utf8.allSatisfy({ c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46) || c == 0x2E
                    || c == 0x3A
            })
        else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, s, &v4) == 1 {
            let b = withUnsafeBytes(of: &v4) { Array($0) }
            self = .v4(b[0], b[1], b[2], b[3])
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, s, &v6) == 1 {
            self = .v6(withUnsafeBytes(of: &v6) { Array($0) })
            return
        }
        return nil
    }

    /// Builds an address from its raw bytes in network order (a `sockaddr`'s, a DNS record's).
    ///
    /// - Parameter bytes: 4 bytes (IPv4) or 16 (IPv6).
    /// - Returns: nil for any other length.
    public init?(bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        switch b.count {
        case 4: self = .v4(b[0], b[1], b[2], b[3])
        case 16: self = .v6(b)
        default: return nil
        }
    }

    /// The address bytes in network order: 4 for IPv4, 16 for IPv6 (to fill a `sockaddr`).
    public var bytes: [UInt8] {
        switch self {
        case .v4(let a, let b, let c, let d): return [a, b, c, d]
        case .v6(let b): return b
        }
    }

    /// True for an IPv6 address.
    public var isIPv6: Bool {
        if case .v6 = self { return true }
        return false
    }

    /// The canonical text form (`inet_ntop`), e.g. `127.0.0.1`, `::1`.
    public var description: String {
        var out = [CChar](repeating: 0, count: 64)
        let family = self.isIPv6 ? AF_INET6 : AF_INET
        let ok = self.bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &out, socklen_t(out.count)) != nil
        }
        guard ok else { return "<invalid>" }
        return String(decoding: out.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `0.0.0.0` or `::`: never a usable destination.
    package var isUnspecified: Bool { self.bytes.allSatisfy { $0 == 0 } }

    /// Loopback, private (RFC 1918 / ULA), link-local, CGNAT shared space and other non-global ranges.
    /// A public name answering with one of these is a classic poisoning sign. IPv6 addresses that embed
    /// an IPv4 address (v4-mapped, v4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the
    /// IPv4 address inside: a DNS64 resolver legitimately answers 64:ff9b::a.b.c.d for a public a.b.c.d,
    /// while 64:ff9b::7f00:1 is loopback in disguise.
    package var isNonGlobal: Bool {
        let b = self.bytes
        switch self {
        case .v4:
            switch (b[0], b[1]) {
            case (0, _), (10, _), (127, _): return true
            case (100, 64...127): return true  // RFC 6598 shared address space
            case (169, 254), (192, 168): return true
            case (172, 16...31): return true
            case (192, 0) where b[2] == 0 || b[2] == 2: return true  // IETF protocol assignments, TEST-NET-1
            case (198, 18...19): return true  // benchmarking
            case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: return true  // TEST-NET-2/3
            case (224...255, _): return true  // multicast, reserved, broadcast
            default: return false
            }
        case .v6:
            if b[0..<15].allSatisfy({ $0 == 0 }) { return true }  // :: and ::1
            if b[0] & 0xFE == 0xFC { return true }  // fc00::/7 unique local
            if b[0] == 0xFE, b[1] & 0xC0 == 0x80 { return true }  // fe80::/10 link local
            if b[0] == 0xFF { return true }  // multicast
            if b[0] == 0x01, b[1] == 0x00, b[2...7].allSatisfy({ $0 == 0 }) { return true }  // 100::/64 discard
            if b[0] == 0x20, b[1] == 0x01, b[2] == 0x0D, b[3] == 0xB8 { return true }  // documentation
            if b[0] == 0xFE, b[1] & 0xC0 == 0xC0 { return true }  // fec0::/10 site-local (deprecated)
            if let embedded = embeddedIPv4 { return embedded.isNonGlobal }
            return false
        }
    }

    /// The IPv4 address inside an IPv6 one of a form that carries it in a fixed place: v4-mapped
    /// (::ffff:0:0/96), v4-compatible (::/96, deprecated), NAT64's well-known prefix (64:ff9b::/96,
    /// RFC 6052) and 6to4 (2002::/16, RFC 3056). Nil for IPv4 and other IPv6 addresses.
    var embeddedIPv4: IPAddress? {
        guard case .v6(let b) = self else { return nil }
        if b[0..<10].allSatisfy({ $0 == 0 }), (b[10] == 0xFF && b[11] == 0xFF) || (b[10] == 0 && b[11] == 0) {
            return .v4(b[12], b[13], b[14], b[15])  // v4-mapped, v4-compatible (:: and ::1 handled before)
        }
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xFF, b[3] == 0x9B, b[4..<12].allSatisfy({ $0 == 0 }) {
            return .v4(b[12], b[13], b[14], b[15])  // 64:ff9b::/96
        }
        if b[0] == 0x20, b[1] == 0x02 { return .v4(b[2], b[3], b[4], b[5]) }  // 2002:V4ADDR::/48
        return nil
    }

    /// Decodes the textual form.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let ip = IPAddress(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not an IP address")
            )
        }
        self = ip
    }

    /// Encodes the textual form.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(self.description)
    }
}
