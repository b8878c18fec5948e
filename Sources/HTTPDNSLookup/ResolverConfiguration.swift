import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOPosix
import Tracing

/// Everything the resolver needs to know. A `Sendable` value; build it once and hand it to
/// `HTTPDNSResolver`.
package struct ResolverConfiguration: Sendable {
    /// HTTPDNS providers in order of preference; the next is tried when one fails.
    package var providers: [ResolverSpec]
    /// The app's own providers, asked after `providers` in order of preference.
    package var appProviders: [any HTTPDNSProvider] = []
    /// The network's own resolver, used for names outside the policy and as the fallback.
    package var localDNS: ResolverSpec = .system
    /// Fall back to `localDNS` when every provider fails (names matching `policy.strict` never do).
    package var fallbackToLocalDNS = true
    /// Which names go through HTTPDNS. The default selects none.
    package var policy: HostPolicy = .none
    package var cache = CacheConfiguration()
    /// Bound on one lookup, every provider and the fallback included.
    package var timeout: Duration = .seconds(5)
    /// A span for each `resolve` and `compare` the app calls; nil: none. The engine's own
    /// lookups are traced by the engine, as part of its request's span.
    package var tracer: (any Tracer)?
    /// IPs of resolver endpoints named by hostname (a resolver must be reachable without DNS).
    package var bootstrap: [String: [IPAddress]] = [:]
    /// A file the cache is saved to and loaded from (nil: memory only).
    package var persistencePath: String?
    /// Names answered from this table before the policy, the cache and every resolver (see
    /// `HTTPDNSResolver+Overrides.swift`).
    package var addressOverrides: [String: [IPAddress]] = [:]
    /// Network detection: watching for changes, NAT64, the app's own network identifier (answers are
    /// cached per network; by default the identifier is derived from the network).
    package var network = NetworkMonitor.Settings()
    /// Sent to the HTTPDNS providers on the client's behalf (ECS in DoH and Do53 queries, `ip=` to
    /// DNSPod and Alibaba); never to LocalDNS. Nil (the default): nothing is sent.
    package var clientSubnet: ClientSubnet?
    /// Fetch the vendors' service-IP lists and send queries to those addresses (nil: off).
    package var serviceLists: ServiceListSettings?
    /// Whether HTTPS records are asked for at all (`HTTPSettings.usesHTTPSRecords`): by the engine's
    /// connects and, next to the addresses, by pre-resolving.
    package var asksServiceBindings = true

    package init(providers: [ResolverSpec] = []) {
        self.providers = providers
    }
}

/// Builds the provider for a spec.
package enum ProviderFactory {
    /// `clientSubnet` goes into every query the provider makes (see `ResolverConfiguration.clientSubnet`).
    package static func make(
        _ spec: ResolverSpec,
        engine: HTTPEngine,
        bootstrap: [String: [IPAddress]],
        clientSubnet: ClientSubnet? = nil,
        serviceLists: ServiceListSettings? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> any DNSProvider {
        func client(_ endpoint: ResolverEndpoint, lists: Bool = false) throws -> EndpointClient {
            try EndpointClient(
                engine: engine,
                endpoint: endpoint,
                bootstrap: bootstrap,
                serviceLists: lists ? serviceLists : nil
            )
        }
        if let problem = spec.credentialProblem {
            throw HTTPDNSConfigurationError(.invalidResolverSpec, problem.reason)
        }
        switch spec {
        case .doh(let endpoint, let post):
            return DoHProvider(
                client: try client(endpoint),
                usePOST: post,
                clientSubnet: clientSubnet
            )
        case .dohJSON(let endpoint):
            return DoHJSONProvider(client: try client(endpoint))
        case .dnspod(let endpoint, let auth):
            return DNSPodProvider(
                client: try client(endpoint, lists: auth != nil),
                auth: auth,
                clientSubnet: clientSubnet
            )
        case .json(let endpoint, let secret, let encryption):
            return AlibabaJSONProvider(
                client: try client(endpoint, lists: true),
                secret: secret,
                encryption: encryption,
                clientSubnet: clientSubnet
            )
        case .dns(let ip, let port):
            return try Do53Provider(server: ip, port: port, path: engine.path, clientSubnet: clientSubnet, group: group)
        case .system:
            return SystemProvider()
        }
    }
}
