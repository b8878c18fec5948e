/// Which address families a lookup wants.
public enum AddressQuery: Hashable, Sendable, CaseIterable {
    /// A records only.
    case ipv4
    /// AAAA records only.
    case ipv6
    /// A and AAAA, looked up in parallel.
    case both

    package var wantsIPv4: Bool { self != .ipv6 }
    package var wantsIPv6: Bool { self != .ipv4 }
}

extension AddressFamily {
    /// The query for this family alone.
    package var query: AddressQuery { self == .ipv4 ? .ipv4 : .ipv6 }
}
