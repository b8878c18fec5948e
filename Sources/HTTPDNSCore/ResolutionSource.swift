// Where a name's addresses came from: a resolver's answer, the cache, LocalDNS, or (for a request's
// metrics) how the engine found them without a resolver. Typed end to end, from the resolver's answer to
// `RequestMetrics.dnsSource`; the text form is what the CLI prints.

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
    /// The app pinned the name to these addresses (`HTTPDNS.Configuration.addressOverrides`): nothing
    /// was asked.
    case override
    /// The operating system's resolver, inside the connect: an engine with no resolver (only in a
    /// request's metrics).
    case system
    /// An HTTP proxy that resolves names itself was given the name (only in a request's metrics).
    case proxy
    /// Addresses configured for the host (an engine's static hosts; only in a request's metrics).
    case staticHosts
    /// A resolver endpoint's bootstrap addresses (only in the resolver's own queries' metrics).
    case bootstrap
    /// A resolver endpoint's service-IP list (only in the resolver's own queries' metrics).
    case serviceList

    /// The source as the CLI prints it: the provider, `cache(provider)`, `stale(provider)`, `localdns(…)`.
    public var description: String {
        switch self {
        case .literal: return "literal"
        case .httpdns(let p): return p
        case .cache(let p): return "cache(\(p))"
        case .stale(let p): return "stale(\(p))"
        case .localDNS(let p): return "localdns(\(p))"
        case .fallback(let p): return "fallback(\(p))"
        case .override: return "override"
        case .system: return "system"
        case .proxy: return "proxy"
        case .staticHosts: return "static"
        case .bootstrap: return "bootstrap"
        case .serviceList: return "service list"
        }
    }

    /// Whether the cache answered, as spans say it: "hit", "stale" (an expired answer served while it
    /// is refreshed) or "miss" (a provider was asked); nil where no cache is involved.
    package var cacheState: String? {
        switch self {
        case .cache: return "hit"
        case .stale: return "stale"
        case .httpdns: return "miss"
        case .literal, .localDNS, .fallback, .override, .system, .proxy, .staticHosts, .bootstrap, .serviceList:
            return nil
        }
    }

    /// True when the answer came from an HTTPDNS service (fresh, cached or stale), false for LocalDNS,
    /// the system, an override, a literal and the other sources.
    public var isHTTPDNS: Bool {
        switch self {
        case .httpdns, .cache, .stale: return true
        case .literal, .localDNS, .fallback, .override, .system, .proxy, .staticHosts, .bootstrap, .serviceList:
            return false
        }
    }
}
