import HTTPDNSCore

/// Where an answer came from.
public enum ResolutionSource: Hashable, Sendable, CustomStringConvertible {
    /// The host was an IP literal.
    case literal
    /// Straight from an HTTPDNS provider (named).
    case httpdns(String)
    /// From the cache, first learnt from the named provider.
    case cache(String)
    /// Expired but within the stale window, while a refresh runs.
    case stale(String)
    /// The name is outside the HTTPDNS policy: LocalDNS answered.
    case localDNS(String)
    /// Every HTTPDNS provider failed and LocalDNS answered instead.
    case fallback(String)

    public var description: String {
        switch self {
        case .literal: return "literal"
        case .httpdns(let p): return p
        case .cache(let p): return "cache(\(p))"
        case .stale(let p): return "stale(\(p))"
        case .localDNS(let p): return "localdns(\(p))"
        case .fallback(let p): return "fallback(\(p))"
        }
    }

    /// True when the answer is an HTTPDNS answer (fresh, cached or stale).
    public var isHTTPDNS: Bool {
        switch self {
        case .httpdns, .cache, .stale: return true
        case .literal, .localDNS, .fallback: return false
        }
    }
}

/// The addresses of a name, ready to connect to.
public struct Resolution: Hashable, Sendable {
    public var name: String
    public var ipv4: [IPAddress]
    public var ipv6: [IPAddress]
    /// Seconds the answer stays valid (the smaller of the two families'; nil when unknown, e.g. system).
    public var ttl: UInt32?
    public var source: ResolutionSource
    public var elapsed: Duration

    /// The answer for an IP-literal host: the address itself, no lookup.
    static func literal(_ host: String, _ ip: IPAddress) -> Resolution {
        Resolution(
            name: host,
            ipv4: ip.isIPv6 ? [] : [ip],
            ipv6: ip.isIPv6 ? [ip] : [],
            ttl: nil,
            source: .literal,
            elapsed: .zero
        )
    }

    /// All addresses, IPv6 and IPv4 interleaved with IPv6 first (RFC 8305 §4), the order to try them in.
    public var addresses: [IPAddress] {
        var out: [IPAddress] = []
        out.reserveCapacity(ipv4.count + ipv6.count)
        for i in 0..<max(ipv4.count, ipv6.count) {
            if i < ipv6.count { out.append(ipv6[i]) }
            if i < ipv4.count { out.append(ipv4[i]) }
        }
        return out
    }
}

/// Why a name could not be resolved. Compare by `code`; `description` says what happened with each
/// provider that was asked.
package struct ResolverError: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Code: Hashable, Sendable {
        /// The name is not a valid hostname.
        case invalidName
        /// The name exists nowhere, or has no address of the families asked.
        case noAddress
        /// Every provider failed (and the fallback, if allowed).
        case allProvidersFailed
    }

    package let code: Code
    package let name: String
    package let message: String

    package init(_ code: Code, name: String, _ message: String) {
        self.code = code
        self.name = name
        self.message = message
    }

    package static func == (l: ResolverError, r: ResolverError) -> Bool { l.code == r.code && l.name == r.name }
    package func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(name)
    }

    package var description: String { message }
}

/// LocalDNS and HTTPDNS answers for one name side by side.
public struct HijackReport: Sendable {
    public var name: String
    public var httpdns: Result<Resolution, ResolverError>
    public var localDNS: Result<Resolution, ResolverError>

    /// True when both answered and LocalDNS gave none of the addresses HTTPDNS gave, or LocalDNS gave
    /// addresses for a name HTTPDNS says does not exist. False when they agree on at least one address,
    /// or when either could not be asked (see the results).
    ///
    /// CDNs legitimately hand different resolvers different edges, so a mismatch is a signal to
    /// investigate (or to prefer HTTPDNS), not proof.
    public var hijacked: Bool {
        guard case .success(let local) = localDNS else { return false }
        switch httpdns {
        case .success(let trusted):
            return Set(local.addresses).isDisjoint(with: trusted.addresses)
        case .failure(let error):
            return error.code == .noAddress && !local.addresses.isEmpty
        }
    }
}
