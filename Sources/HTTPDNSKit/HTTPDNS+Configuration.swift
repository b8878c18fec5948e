// What an `HTTPDNS` is made from: at the top, what is resolved and by whom (the resolver's part, kept
// as the resolver's own configuration so it is handed over as it is); then one group per concern
// (timeouts, TLS, network, HTTP, tracing), each handed as it is to the parts that use it.
//
//     var configuration = HTTPDNS.Configuration(resolvers: [.doh(url)], policy: try HostPolicy(only: ["*.example.com"]))
//     configuration.timeouts.lookup = .seconds(3)
//     configuration.tls.pins["api.example.com"] = ["base64 SHA-256 of the SPKI"]
//     configuration.network.proxy = HTTPProxySettings.environment()

import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup

extension HTTPDNS {
    /// Everything an `HTTPDNS` is made from. A value; build it once.
    public struct Configuration: Sendable {
        /// The resolver's part, given to it as it is; the properties below read and write it.
        var resolution: ResolverConfiguration
        /// How long a lookup, a connect, a read and a whole request may take.
        public var timeouts = TimeoutSettings()
        /// Extra trust (private CAs), pins, and when a URLSession delegate is asked about certificates.
        public var tls = TLSSettings()
        /// Following the device's network, which networks connections may use, and a proxy.
        public var network = NetworkSettings()
        /// HTTP versions, connections per host, and http:// hosts upgraded to https.
        public var http = HTTPSettings()
        /// Where spans go, and whether requests carry the trace context.
        public var tracing = TracingSettings()

        /// A configuration asking `resolvers` for the names `policy` selects.
        ///
        /// - Parameters:
        ///   - resolvers: HTTPDNS and DoH services, in order of preference.
        ///   - policy: The names to resolve through them; by default none.
        public init(resolvers: [ResolverSpec], policy: HostPolicy = .none) {
            resolution = ResolverConfiguration(providers: resolvers)
            resolution.policy = policy
        }

        /// HTTPDNS and DoH services, in order of preference; the next is asked when one fails.
        public var resolvers: [ResolverSpec] {
            get { resolution.providers }
            set { resolution.providers = newValue }
        }
        /// Resolvers of the app's own (`HTTPDNSProvider`), asked after `resolvers` in order of
        /// preference, and treated like them: validation, cache, failover, fallback.
        public var providers: [any HTTPDNSProvider] {
            get { resolution.appProviders }
            set { resolution.appProviders = newValue }
        }
        /// Which names go through HTTPDNS. The default selects none: an app opts its own names in.
        public var policy: HostPolicy {
            get { resolution.policy }
            set { resolution.policy = newValue }
        }
        /// The network's own resolver: names outside the policy, and the fallback. `.system` by default.
        public var localDNS: ResolverSpec {
            get { resolution.localDNS }
            set { resolution.localDNS = newValue }
        }
        /// Fall back to `localDNS` when every resolver fails (names in `policy.strict` never do). On by
        /// default.
        public var fallbackToLocalDNS: Bool {
            get { resolution.fallbackToLocalDNS }
            set { resolution.fallbackToLocalDNS = newValue }
        }
        /// Addresses of resolvers named by hostname (a resolver must be reachable without DNS).
        public var bootstrap: [String: [IPAddress]] {
            get { resolution.bootstrap }
            set { resolution.bootstrap = newValue }
        }
        /// Names pinned to addresses, answered before ``policy``, the cache and every resolver; nothing
        /// is asked for them (like curl's `--resolve`). For a staging or test server, or a name pinned
        /// while a service moves. The addresses are tried in order per family, raced as any answer is,
        /// so a spare may follow the main one. Names are hostnames (`api.example.com`, no patterns); an
        /// entry that is not one, or that has no address, fails ``HTTPDNS/init(_:logger:)`` with
        /// `.invalidAddressOverride`. Answers carry the source `.override`.
        public var addressOverrides: [String: [IPAddress]] {
            get { resolution.addressOverrides }
            set { resolution.addressOverrides = newValue }
        }
        /// A client subnet to ask on behalf of: sent to the resolvers as an EDNS Client Subnet option
        /// (RFC 7871) in DoH and Do53 queries and as `ip=` to DNSPod (encrypted with `dn` in the AES
        /// and DES forms) and Alibaba, never to LocalDNS. For a server or proxy asking for its clients,
        /// so a CDN answers for where they are. Nil (the default): nothing is sent, as it says where the
        /// user is.
        public var clientSubnet: ClientSubnet? {
            get { resolution.clientSubnet }
            set { resolution.clientSubnet = newValue }
        }
        /// Fetch the vendor's service-IP list (Alibaba Cloud EMAS `/ACCOUNT/ss`, Tencent DNSPod `/conf`)
        /// for the resolvers that have one, and send their queries to the listed addresses, the
        /// resolver's own address last, as the vendors' SDKs do. The list is refreshed when it ages out
        /// and saved beside ``persistencePath``. Nil (the default): queries go to the configured address.
        public var serviceLists: ServiceListSettings? {
            get { resolution.serviceLists }
            set { resolution.serviceLists = newValue }
        }
        /// The cache's TTL floor and ceiling, per-host TTLs and serve-expired window (off beyond a 60 s
        /// grace; set hours or days, with ``persistencePath``, for cold start). Clear it with
        /// `resolver.clearCache()` or `resolver.clearCache(host)`.
        public var cache: CacheConfiguration {
            get { resolution.cache }
            set { resolution.cache = newValue }
        }
        /// A file the cache is kept in across launches (nil: memory only).
        public var persistencePath: String? {
            get { resolution.persistencePath }
            set { resolution.persistencePath = newValue }
        }
        /// Whether ``HTTPDNS`` opens its first resolver's connection (TCP and TLS) as soon as it is
        /// created, so the app's first lookup costs one round trip on a warm connection instead of
        /// three. Off by default: making `HTTPDNS` sends nothing, and the first lookup opens the
        /// connection. An app is often made at launch before the user has accepted its privacy policy
        /// (network traffic before consent is a finding in the compliance scans Chinese app stores
        /// run), and background launches would wake the radio for nothing. Turn it on where `HTTPDNS`
        /// is made after consent, as the vendors' SDKs tell apps to initialise theirs.
        ///
        /// Only when ``policy`` selects a name (an embedded library whose app has not configured its
        /// policy opens nothing), and only for a resolver that keeps a connection (DoH, JSON DoH, the
        /// vendors' HTTP APIs; not `dns:` over UDP or `system`). The connection is pooled as a query's:
        /// closed after 60 s without a lookup, and the next lookup connects again. When no lookup
        /// comes, it costs one TCP and TLS handshake with the resolver (a few kilobytes) and one socket
        /// for those 60 s. A failure is logged at debug level; the first lookup then connects itself.
        public var connectsResolverAtStart = false
    }
}
