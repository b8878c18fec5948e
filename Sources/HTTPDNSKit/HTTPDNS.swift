// The front door. One `HTTPDNS` owns what an app needs: the resolver (providers, policy, cache), the
// engine that reaches the providers, the engine that sends the app's own requests with the real
// hostname as SNI and Host while connecting to the resolved address, and their lifecycle. Everything
// else is handed out from here: a URLSession configuration, the loopback proxy, a SwiftNIO resolver,
// curl's --resolve entries.
//
//     import HTTPDNSKit
//     let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
//     let session = URLSession(configuration: httpdns.urlSessionConfiguration())

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLocalProxy
import HTTPDNSLookup
import HTTPDNSNetwork
import HTTPDNSURLSession
import Logging
import NIOCore
import NIOPosix
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Resolves hostnames through a trusted HTTPDNS or DNS-over-HTTPS service and connects to the answer,
/// keeping the hostname for TLS SNI, the certificate check and the Host header.
///
/// Make one per app, early, and keep it: it is thread-safe. Call ``shutdown()`` before the process
/// exits to save the cache (when ``Configuration/persistencePath`` is set) and close connections.
public final class HTTPDNS: Sendable {
    /// Everything an `HTTPDNS` is made from. A value; build it once.
    public struct Configuration: Sendable {
        /// HTTPDNS and DoH services, in order of preference; the next is asked when one fails.
        public var resolvers: [ResolverSpec]
        /// Resolvers of the app's own (`HTTPDNSProvider`), asked after `resolvers` in order of
        /// preference, and treated like them: validation, cache, failover, fallback.
        public var providers: [any HTTPDNSProvider] = []
        /// Which names go through HTTPDNS. The default selects none: an app opts its own names in.
        public var policy: HostPolicy = .none
        /// The network's own resolver: names outside the policy, and the fallback.
        public var localDNS: ResolverSpec = .system
        /// Fall back to `localDNS` when every resolver fails (names in `policy.strict` never do).
        public var fallbackToLocalDNS = true
        /// Bound on one lookup, every resolver and the fallback included.
        public var lookupTimeout: Duration = .seconds(5)
        /// Addresses of resolvers named by hostname (a resolver must be reachable without DNS).
        public var bootstrap: [String: [IPAddress]] = [:]
        /// A file the cache is kept in across launches (nil: memory only).
        public var persistencePath: String?
        /// Follow the device's network by itself (the default): which address families have a route,
        /// the NAT64 prefix of an IPv6-only network, and changes of network, from the operating
        /// system's notices (rtnetlink on Linux, `NWPathMonitor` on Apple platforms). On a change the
        /// cache switches to the new network's answers, pooled connections are retired and the names in
        /// use are resolved again in the background. Off: the app tells changes with
        /// ``HTTPDNS/networkChanged(to:)``.
        public var watchesNetwork = true
        /// The app's own identifier of the network at start (nil: derived from the network).
        package var networkID: String?
        /// NAT64 prefix discovery (RFC 7050) on IPv6-only networks, off, or a configured prefix.
        package var nat64: NAT64Mode = .discover
        /// PEM files of certificate authorities trusted on top of the system's (a private resolver or
        /// origin); loaded when the `HTTPDNS` is made.
        public var trustedCertificateFiles: [String] = []
        /// Public-key pins: host to the base64 SHA-256 of the certificate's SubjectPublicKeyInfo. A host
        /// listed here connects only when one of its keys matches (on top of the normal verification).
        public var pins: [String: Set<String>] = [:]
        /// The networks the library's connections may use, its lookups' and the app's requests' alike:
        /// cellular, expensive (a personal hotspot) and constrained (Low Data Mode) networks. On Apple
        /// platforms Network.framework honours it for each connection, and a URLSession request narrows it
        /// further by its session's and its own rules (`allowsCellularAccess` and the like). Linux's
        /// sockets cannot honour it: there it only keeps connections made under other rules apart.
        public var networkAccess = NetworkAccess.unrestricted
        /// Bound on connecting to one address (the next address is tried meanwhile, RFC 8305).
        public var connectTimeout: Duration = .seconds(10)
        /// Longest wait for the next byte of a response.
        public var readTimeout: Duration = .seconds(30)
        /// Bound on a whole request, body included (nil: none beyond the other timeouts).
        public var requestTimeout: Duration?
        /// http:// hosts (patterns such as `api.example.com`, `*.example.com`) whose requests are sent
        /// over https instead, HTTP/2 when the server offers it (URLSession and the proxy).
        public var upgradeToHTTPS: [String] = []
        /// The cache's TTL floor and ceiling, per-host TTLs and serve-expired window (off beyond a 60 s
        /// grace; set hours or days, with ``persistencePath``, for cold start). Clear it with
        /// `resolver.clearCache()` or `resolver.clearCache(host)`.
        public var cache = CacheConfiguration()
        /// Names pinned to addresses, answered before ``policy``, the cache and every resolver; nothing
        /// is asked for them (like curl's `--resolve`). For a staging or test server, or a name pinned
        /// while a service moves. The addresses are tried in order per family, raced as any answer is,
        /// so a spare may follow the main one. Names are hostnames (`api.example.com`, no patterns); an
        /// entry that is not one, or that has no address, fails ``HTTPDNS/init(_:logger:)`` with
        /// `.invalidAddressOverride`. Answers carry the source `.override`.
        public var addressOverrides: [String: [IPAddress]] = [:]
        /// The HTTP versions the app's requests offer to https servers (the CLI's `--http1.1` /
        /// `--http2`); the resolvers' own connections always let ALPN choose.
        public var httpVersions: HTTPVersionPolicy = .automatic
        /// HTTP proxies every connection goes through (the app's requests and the DoH/HTTPDNS queries
        /// alike), by CONNECT tunnels to the addresses HTTPDNS gave; TLS, SNI and the certificate check
        /// stay end to end on the hostname. Nil (the default): no proxy. `HTTPProxySettings.environment()`
        /// reads curl's `https_proxy`, `http_proxy`, `all_proxy` and `no_proxy`. Classic DNS resolvers
        /// (`dns:`, `system`) do not go through it.
        public var proxy: HTTPProxySettings?
        /// A client subnet to ask on behalf of: sent to the resolvers as an EDNS Client Subnet option
        /// (RFC 7871) in DoH and Do53 queries and as `ip=` to DNSPod (encrypted with `dn` in the AES
        /// and DES forms) and Alibaba, never to LocalDNS. For a server or proxy asking for its clients,
        /// so a CDN answers for where they are. Nil (the default): nothing is sent, as it says where the
        /// user is.
        public var clientSubnet: ClientSubnet?
        /// Fetch the vendor's service-IP list (Alibaba Cloud EMAS `/ACCOUNT/ss`, Tencent DNSPod `/conf`)
        /// for the resolvers that have one, and send their queries to the listed addresses, the
        /// resolver's own address last, as the vendors' SDKs do. The list is refreshed when it ages out
        /// and saved beside ``persistencePath``. Nil (the default): queries go to the configured address.
        public var serviceLists: ServiceListSettings?
        /// When the app's URLSession delegate is asked about an origin's certificate: when our check
        /// refuses it (the default), or for every new connection. Its answer is honoured as the system
        /// stack would (see `HTTPDNSServerTrustSpace`); HTTP 401 and proxy 407 challenges always go
        /// to the delegate.
        public var serverTrustChallenges = ServerTrustChallenges.whenOurCheckFails
        /// HTTP/1.1 connections to one origin at most; further requests wait for one to be free. An
        /// HTTP/2 origin gets one connection and up to 100 concurrent streams on it. Below 1 counts as 1.
        public var maxConnectionsPerHost = 8
        /// HTTP/2 without TLS to http:// URLs on the app's engine (the CLI's `--http2` on http://).
        package var http2PriorKnowledge = false
        /// Where spans go (swift-distributed-tracing): a CLIENT span per request attempt with the
        /// lookup and connection in it, and a span per `HTTPDNSResolver.resolve(_:_:)` and
        /// `HTTPDNSResolver.compare(_:_:)` the app calls. Nil (the default): the tracer bootstrapped
        /// in `InstrumentationSystem` when this `HTTPDNS` is made, so bootstrap first. With none
        /// bootstrapped, or `NoOpTracer()` here, there are no spans and nothing is paid for them.
        public var tracer: (any Tracer)?
        /// Put the request span's trace context into each request's headers (W3C `traceparent` with an
        /// OpenTelemetry tracer), so the server's spans join the app's trace. Off by default: it tells
        /// every origin the app's trace IDs.
        public var propagatesTraceContext = false

        /// A configuration asking `resolvers` for the names `policy` selects.
        public init(resolvers: [ResolverSpec], policy: HostPolicy = .none) {
            self.resolvers = resolvers
            self.policy = policy
        }
    }

    /// What this instance was made from.
    package let configuration: Configuration
    let upgradeToHTTPS: [HostPattern]
    /// The resolver: async, completion-handler, blocking and cached-or-start lookups, hijack checks.
    public let resolver: HTTPDNSResolver
    /// The engine for the app's own requests, resolving through ``resolver`` at connect time.
    public let engine: HTTPEngine
    /// The engine that reaches the resolvers themselves (never through DNS).
    let resolverEngine: HTTPEngine
    let logger: Logger

    /// Makes the resolver and both engines from `configuration`.
    ///
    /// Throws `HTTPDNSConfigurationError` when a resolver cannot be reached as configured (a resolver
    /// named by hostname without a ``Configuration/bootstrap`` address), the TLS settings are invalid or
    /// an address override or the cache settings are unusable.
    public init(_ configuration: Configuration, logger: Logger = Logger(label: "httpdns")) throws {
        self.configuration = configuration
        self.logger = logger
        self.upgradeToHTTPS = try configuration.upgradeToHTTPS.map(HostPattern.init)
        var http = HTTPEngine.Configuration()
        http.tls = HTTPEngineTLS(
            additionalTrustRoots: try configuration.trustedCertificateFiles.flatMap(HTTPEngineTLS.loadPEM(file:)),
            pins: configuration.pins
        )
        http.timeouts.connect = configuration.connectTimeout
        http.timeouts.idleRead = configuration.readTimeout
        http.timeouts.total = configuration.requestTimeout
        if let problem = configuration.proxy?.problem {
            throw HTTPDNSConfigurationError(.invalidProxyConfiguration, "proxy: \(problem)")
        }
        http.proxy = configuration.proxy
        http.networkAccess = configuration.networkAccess
        // The network path, made once here and given to all three: the resolver (whose monitor writes it:
        // its NAT64 discovery asks the resolver's LocalDNS) and both engines, which read it.
        let path = NetworkPath()
        let resolverEngine = try HTTPEngine(configuration: http, path: path, logger: logger)
        var resolverConfiguration = ResolverConfiguration(providers: configuration.resolvers)
        resolverConfiguration.policy = configuration.policy
        resolverConfiguration.localDNS = configuration.localDNS
        resolverConfiguration.fallbackToLocalDNS = configuration.fallbackToLocalDNS
        resolverConfiguration.appProviders = configuration.providers
        resolverConfiguration.timeout = configuration.lookupTimeout
        resolverConfiguration.bootstrap = configuration.bootstrap
        resolverConfiguration.cache = configuration.cache
        resolverConfiguration.persistencePath = configuration.persistencePath
        resolverConfiguration.addressOverrides = configuration.addressOverrides
        resolverConfiguration.clientSubnet = configuration.clientSubnet
        resolverConfiguration.serviceLists = configuration.serviceLists
        resolverConfiguration.network.networkID = configuration.networkID
        resolverConfiguration.network.watch = configuration.watchesNetwork
        resolverConfiguration.network.nat64 = configuration.nat64
        let tracing = EngineTracing(
            configuration.tracer ?? InstrumentationSystem.tracer,
            propagatesContext: configuration.propagatesTraceContext
        )
        resolverConfiguration.tracer = tracing?.tracer
        let resolver = try HTTPDNSResolver(
            configuration: resolverConfiguration,
            engine: resolverEngine,
            path: path,
            logger: logger
        )
        self.resolverEngine = resolverEngine
        self.resolver = resolver
        var app = http
        app.tracing = tracing
        app.versions = configuration.httpVersions
        app.maxConnectionsPerHost = configuration.maxConnectionsPerHost
        app.http2PriorKnowledge = configuration.http2PriorKnowledge
        self.engine = try HTTPEngine(configuration: app, addressSource: resolver, path: path, logger: logger)
    }

    /// The short form: resolver specs and name patterns as text.
    ///
    /// `resolvers` take the CLI's forms (`doh:URL`, `doh-post:URL`, `doh-json:URL`, `dnspod:URL`,
    /// `json:URL`, `dns:IP[:PORT]`, `system`); `only` the names to resolve through them (`example.com`,
    /// `*.example.com`, `*` for every name); `trusting` PEM files of certificate authorities trusted on
    /// top of the system's, for a resolver or origin with a private CA (``Configuration/trustedCertificateFiles``).
    /// Throws `HTTPDNSConfigurationError` naming a bad entry.
    public convenience init(resolvers: [String], only: [String], trusting: [String] = []) throws {
        var configuration = Configuration(
            resolvers: try resolvers.map(ResolverSpec.init(parsing:)),
            policy: try HostPolicy(only: only)
        )
        configuration.trustedCertificateFiles = trusting
        try self.init(configuration)
    }

    // MARK: URLSession

    /// A copy of `base` whose sessions send the requests ``Configuration/policy`` selects through
    /// HTTPDNS (other requests go on as usual). Makes this instance the one every such session uses.
    public func urlSessionConfiguration(
        _ base: URLSessionConfiguration = .default
    ) -> URLSessionConfiguration {
        install()
        return base.withHTTPDNS()
    }

    /// Enables HTTPDNS on a configuration another stack built and will make its session from
    /// (AFNetworking/Alamofire-style code). Makes this instance the one every such session uses.
    public func enable(on configuration: URLSessionConfiguration) {
        install()
        configuration.enableHTTPDNS()
    }

    /// Also intercepts the requests of sessions made without a configuration from this instance, where
    /// the platform consults globally registered protocols (`URLSession.shared` on Apple platforms).
    public func registerGlobally() {
        install()
        HTTPDNSURLProtocol.registerGlobally()
    }

    /// Marks `request` so HTTPDNS leaves it to URLSession's own loading. On Apple platforms the mark is
    /// a URLProtocol property and nothing goes on the wire; swift-corelibs-foundation drops those, so
    /// there it is an `X-HTTPDNS-Handled` header, which servers ignore.
    public static func markHandled(_ request: inout URLRequest) {
        HTTPDNSURLProtocol.markHandled(&request)
    }

    /// The key, in the `userInfo` of the `URLError`s intercepted requests fail with, of the engine's
    /// own `HTTPEngineError` (its code, and every address tried).
    public static let engineErrorKey = HTTPDNSURLProtocol.engineErrorKey

    /// Per-request timing of the URLSession integration: called once per load, just before the task
    /// completes, on no particular thread.
    public func onURLSessionMetrics(_ handler: @escaping @Sendable (HTTPDNSTaskMetrics) -> Void) {
        HTTPDNSURLProtocol.install(setup(onMetrics: handler))
    }

    private func install() {
        if HTTPDNSURLProtocol.current?.resolver !== resolver {
            HTTPDNSURLProtocol.install(setup(onMetrics: nil))
        }
    }

    private func setup(onMetrics: (@Sendable (HTTPDNSTaskMetrics) -> Void)?) -> HTTPDNSURLProtocol.Setup {
        var setup = HTTPDNSURLProtocol.Setup(resolver: resolver, engine: engine, intercept: configuration.policy)
        setup.upgradeToHTTPS = upgradeToHTTPS
        setup.serverTrustChallenges = configuration.serverTrustChallenges
        setup.onMetrics = onMetrics
        return setup
    }

    // MARK: Clients outside URLSession

    /// Starts the loopback proxy for clients that only take a proxy setting (web views, players, other
    /// processes). Stop it with its `stop()`.
    public func startProxy(_ configuration: HTTPDNSProxy.Configuration = .init()) async throws -> HTTPDNSProxy {
        var configuration = configuration
        configuration.upgradeToHTTPS = upgradeToHTTPS
        return try await HTTPDNSProxy.start(configuration, resolver: resolver, engine: engine, logger: logger)
    }

    /// A SwiftNIO `Resolver` for one `ClientBootstrap` connect, so any NIO client (gRPC, a database
    /// driver) resolves through HTTPDNS: `ClientBootstrap(group:).resolver(httpdns.nioResolver(on: loop))`.
    public func nioResolver(on eventLoop: any EventLoop) -> any Resolver & Sendable {
        HTTPDNSNIOResolver(resolver, eventLoop: eventLoop)
    }

    // MARK: Lifecycle

    /// Resolves every name in `hosts` ahead of use (at launch, for the names the app will need), so
    /// the first requests find their answers cached.
    public func preResolve(_ hosts: [String]) async {
        await resolver.preResolve(hosts)
    }

    /// Tells HTTPDNS the device moved to another network (Wi-Fi to cellular, another Wi-Fi), named by
    /// the app (never a user-visible name such as an SSID): answers are cached per network, failure
    /// back-offs start afresh, pooled connections are retired, the address families and NAT64 prefix
    /// are detected again, and the names in use are resolved again in the background. From the first
    /// call on, the app names the networks; with ``Configuration/watchesNetwork`` on, the operating
    /// system's notices still re-detect the families and prefix.
    public func networkChanged(to networkID: String) {
        resolver.networkChanged(to: networkID)
    }

    /// Saves the cache (when ``Configuration/persistencePath`` is set), closes every connection and
    /// stops URLSession interception if this instance had it. Requests started afterwards fail.
    public func shutdown() async {
        if HTTPDNSURLProtocol.current?.resolver === resolver { HTTPDNSURLProtocol.uninstall() }
        await resolver.shutdown()
        engine.shutdown()
        resolverEngine.shutdown()
    }
}
