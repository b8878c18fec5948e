// The client's subnet, sent on its behalf so a CDN-backed name is answered for where the client is, not
// where the resolver is: as an EDNS Client Subnet option (RFC 7871) in DoH and Do53 queries, and as the
// vendors' `ip=` parameter (DNSPod, Alibaba). Only ever sent when configured: it says where the user is.

import Foundation
import HTTPDNSCore

/// A client subnet (RFC 7871): an address and how many of its leading bits are sent.
public struct ClientSubnet: Sendable, Hashable, CustomStringConvertible {
    /// The address, with the bits past `prefixLength` cleared.
    public let address: IPAddress
    /// How many leading bits of `address` are sent (RFC 7871's SOURCE PREFIX-LENGTH).
    public let prefixLength: Int

    /// The prefix RFC 7871 §11.1 recommends when none is given: /24 for IPv4, /56 for IPv6.
    ///
    /// - Parameter address: The address whose family decides.
    /// - Returns: 24 for an IPv4 address, 56 for an IPv6 one.
    public static func defaultPrefixLength(for address: IPAddress) -> Int { address.isIPv6 ? 56 : 24 }

    /// `address` cut to `prefixLength` bits (the recommended /24 or /56 when nil).
    ///
    /// - Parameters:
    ///   - address: The client's address, or any address in its subnet.
    ///   - prefixLength: How many leading bits to send; nil for the recommended /24 or /56.
    /// - Throws: `HTTPDNSConfigurationError` (`.invalidClientSubnet`) for a prefix longer than the address, or
    ///   negative.
    public init(address: IPAddress, prefixLength: Int? = nil) throws {
        let bits = address.isIPv6 ? 128 : 32
        let length = prefixLength ?? Self.defaultPrefixLength(for: address)
        guard (0...bits).contains(length) else {
            throw HTTPDNSConfigurationError(
                .invalidClientSubnet,
                "client subnet \(address)/\(length): the prefix length must be 0 to \(bits)"
            )
        }
        var bytes = address.bytes
        for index in bytes.indices {
            let kept = max(0, min(8, length - index * 8))
            bytes[index] &= kept == 8 ? 0xFF : UInt8(truncatingIfNeeded: 0xFF << (8 - kept))
        }
        self.address = IPAddress(bytes: bytes)!
        self.prefixLength = length
    }

    /// Parses `203.0.113.0/24`, `2001:db8::/56`, or a bare address (given the recommended prefix).
    ///
    /// - Parameter text: The subnet, `ADDRESS` or `ADDRESS/PREFIX`.
    /// - Throws: `HTTPDNSConfigurationError` (`.invalidClientSubnet`) saying what is wrong.
    public init(_ text: String) throws {
        let parts = text.trimmingCharacters(in: .whitespaces).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = IPAddress(parts[0]) else {
            throw HTTPDNSConfigurationError(
                .invalidClientSubnet,
                "client subnet \"\(text)\" is not ADDRESS or ADDRESS/PREFIX (203.0.113.0/24, 2001:db8::/56)"
            )
        }
        var length: Int?
        if parts.count == 2 {
            guard let value = Int(parts[1]) else {
                throw HTTPDNSConfigurationError(
                    .invalidClientSubnet,
                    "client subnet \"\(text)\": \"\(parts[1])\" is not a prefix length"
                )
            }
            length = value
        }
        try self.init(address: address, prefixLength: length)
    }

    /// `203.0.113.0/24`.
    public var description: String { "\(address)/\(prefixLength)" }

    /// The EDNS option (code 8) as it goes into an OPT record's data: FAMILY, SOURCE PREFIX-LENGTH,
    /// SCOPE PREFIX-LENGTH 0, then only the bytes the prefix covers (RFC 7871 §6).
    var ednsOption: [UInt8] {
        let addressBytes = Array(address.bytes.prefix((prefixLength + 7) / 8))
        let length = 4 + addressBytes.count
        return [0, 8, UInt8(length >> 8), UInt8(length & 0xFF), 0, address.isIPv6 ? 2 : 1, UInt8(prefixLength), 0]
            + addressBytes
    }
}
