// Which kinds of network a connection may use: the rules an app sets on a URLSession configuration or a
// URLRequest (cellular, expensive, constrained networks) and on `HTTPDNS.Configuration` for the engine.
//
// Where Network.framework carries the connections (Apple platforms) they become the connection's
// NWParameters: cellular off prohibits the cellular interface, expensive off sets
// `prohibitExpensivePaths`, constrained off (Low Data Mode) sets `prohibitConstrainedPaths`; a connection
// with no allowed path fails at once instead of waiting. BSD sockets cannot honour them, so on Linux they
// only keep connections apart in the pool (a connection opened under one set of rules never serves a
// request made under another). The rules combine by AND: each layer can only narrow what is allowed.

/// Which kinds of network a connection may go over (Apple platforms; elsewhere it is recorded only).
public struct NetworkAccess: Sendable, Hashable, CustomStringConvertible {
    /// Cellular interfaces (`URLSessionConfiguration.allowsCellularAccess`).
    public var allowsCellular: Bool
    /// Networks the system marks expensive: cellular, a personal hotspot
    /// (`allowsExpensiveNetworkAccess`).
    public var allowsExpensive: Bool
    /// Networks in Low Data Mode (`allowsConstrainedNetworkAccess`).
    public var allowsConstrained: Bool

    /// Every network, as the system's defaults are.
    ///
    /// - Parameters:
    ///   - allowsCellular: Whether cellular interfaces may be used.
    ///   - allowsExpensive: Whether networks the system marks expensive (cellular, a personal hotspot) may be used.
    ///   - allowsConstrained: Whether networks in Low Data Mode may be used.
    public init(allowsCellular: Bool = true, allowsExpensive: Bool = true, allowsConstrained: Bool = true) {
        self.allowsCellular = allowsCellular
        self.allowsExpensive = allowsExpensive
        self.allowsConstrained = allowsConstrained
    }

    /// Every network.
    public static let unrestricted = NetworkAccess()

    /// What both allow.
    ///
    /// - Parameter other: The rules to combine with these.
    /// - Returns: Rules allowing a kind of network only where both allow it.
    public func narrowed(by other: NetworkAccess) -> NetworkAccess {
        NetworkAccess(
            allowsCellular: allowsCellular && other.allowsCellular,
            allowsExpensive: allowsExpensive && other.allowsExpensive,
            allowsConstrained: allowsConstrained && other.allowsConstrained
        )
    }

    public var description: String {
        let denied = [
            allowsCellular ? nil : "cellular",
            allowsExpensive ? nil : "expensive",
            allowsConstrained ? nil : "constrained",
        ].compactMap { $0 }
        return denied.isEmpty ? "any network" : "no " + denied.joined(separator: ", no ")
    }
}
