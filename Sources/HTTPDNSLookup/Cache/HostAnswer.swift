import HTTPDNSCore

/// What one provider said about one address family of one name.
///
/// `addresses` empty means "no such address" (NXDOMAIN or NODATA): a negative answer that may be cached.
package struct FamilyAnswer: Hashable, Sendable, Codable {
    package var addresses: [IPAddress]
    /// Seconds, as the provider gave it (nil when the format carries none).
    package var ttl: UInt32?
    /// The address the service saw the query come from, when it says (DNSPod `clientip=1`, Alibaba
    /// `client_ip`).
    var clientAddress: IPAddress?

    package init(addresses: [IPAddress], ttl: UInt32?, clientAddress: IPAddress? = nil) {
        self.addresses = addresses
        self.ttl = ttl
        self.clientAddress = clientAddress
    }

    package static let empty = FamilyAnswer(addresses: [], ttl: nil)
}

/// What one provider said about one name: one answer per family asked (nil = not asked or not given).
package struct HostAnswer: Hashable, Sendable {
    var ipv4: FamilyAnswer?
    var ipv6: FamilyAnswer?

    package init(ipv4: FamilyAnswer? = nil, ipv6: FamilyAnswer? = nil) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
    }

    var allAddresses: [IPAddress] { (ipv4?.addresses ?? []) + (ipv6?.addresses ?? []) }

    /// The answer for one family, if it was asked.
    subscript(family: AddressFamily) -> FamilyAnswer? {
        family == .ipv4 ? ipv4 : ipv6
    }

    /// The same answer with `clientAddress` recorded on each family given.
    func seenFrom(_ clientAddress: IPAddress?) -> HostAnswer {
        guard let clientAddress else { return self }
        var copy = self
        copy.ipv4?.clientAddress = clientAddress
        copy.ipv6?.clientAddress = clientAddress
        return copy
    }
}

/// The client's address as a service reports it (`|clientip`, `client_ip`, `cip`): nil when absent or
/// empty; an `AnswerFormatError` naming `field` when it is not an IP address.
func reportedClientAddress(_ text: (some StringProtocol)?, field: String) throws -> IPAddress? {
    guard let text, !text.isEmpty else { return nil }
    guard let ip = IPAddress(text) else {
        throw AnswerFormatError("\(field) \"\(text.prefix(60))\" is not an IP address")
    }
    return ip
}
