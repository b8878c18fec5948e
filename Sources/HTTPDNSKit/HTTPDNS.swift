// The front door. One `HTTPDNS` owns what an app needs: the resolver (providers, policy, cache), the
// engine that reaches the providers, the engine that sends the app's own requests with the real
// hostname as SNI and Host while connecting to the resolved address, and their lifecycle. Everything
// else is handed out from here: a URLSession configuration, a SwiftNIO resolver, curl's --resolve
// entries; the loopback proxy from the opt-in module HTTPDNSLoopbackProxy, whose state an instance keeps
// as an attachment (HTTPDNS+Attachments.swift).
//
//     import HTTPDNSKit
//     let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
//     let session = URLSession(configuration: httpdns.urlSessionConfiguration())

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSURLSession
import Logging
import NIOConcurrencyHelpers
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
    /// What this instance was made from.
    package let configuration: Configuration
    package let upgradeToHTTPS: [HostPattern]
    /// The resolver: async, completion-handler, blocking and cached-or-start lookups, hijack checks.
    public let resolver: HTTPDNSResolver
    /// The engine for the app's own requests, resolving through ``resolver`` at connect time.
    public let engine: HTTPEngine
    /// The engine that reaches the resolvers themselves (never through DNS).
    let resolverEngine: HTTPEngine
    package let logger: Logger
    /// What the opt-in route modules keep for this instance (the loopback proxy's keeper), made on first use.
    let attachments = NIOLockedValueBox(Attachments())
    /// The resolver's connection being opened at creation (``Configuration/connectsResolverAtStart``).
    let resolverWarmUp: Task<Void, any Error>?
    /// The system encrypted-DNS mode, while it is on (`enableSystemEncryptedDNS(_:)`).
    let encryptedDNS = NIOLockedValueBox<SystemEncryptedDNS?>(nil)
    /// What follows the app's background and foreground notices (UIKit platforms).
    let appLifecycleObservers = NIOLockedValueBox(AppLifecycleObservers())
    /// This instance's URLSession interception: the sessions enabled through it load with its resolver,
    /// engine, policy and metrics handler, whatever other instances the process has.
    let interception: Interception

    /// Makes the resolver and both engines from `configuration`.
    ///
    /// - Parameters:
    ///   - configuration: The resolvers, the host policy and the cache, TLS, network and HTTP settings.
    ///   - logger: Where the resolver, both engines, the loopback proxy and the URLSession interception log.
    /// - Throws: `HTTPDNSConfigurationError` when a resolver cannot be reached as configured (a resolver
    ///   named by hostname without a ``Configuration/bootstrap`` address), the TLS settings are invalid, or
    ///   an address override, the proxy settings, an `upgradeToHTTPS` pattern or the cache settings are unusable.
    public init(_ configuration: Configuration, logger: Logger = Logger(label: "httpdns")) throws {
        self.configuration = configuration
        self.logger = logger
        self.upgradeToHTTPS = try configuration.http.upgradeToHTTPS.map(HostPattern.init)
        if let problem = configuration.network.proxy?.problem {
            throw HTTPDNSConfigurationError(.invalidProxyConfiguration, "proxy: \(problem)")
        }
        // Each group goes as it is to the parts that use it (see `Settings.swift` in HTTPDNSEngine).
        var resolverHTTP = HTTPEngine.Configuration()
        resolverHTTP.tls = try HTTPEngineTLS(loading: configuration.tls)
        resolverHTTP.timeouts = configuration.timeouts
        resolverHTTP.network = configuration.network
        // The network path, made once here and given to all three: the resolver (whose monitor writes it:
        // its NAT64 discovery asks the resolver's LocalDNS) and both engines, which read it.
        let path = NetworkPath()
        let resolverEngine = try HTTPEngine(configuration: resolverHTTP, path: path, logger: logger)
        let tracing = EngineTracing(configuration.tracing)
        var resolution = configuration.resolution
        resolution.timeout = configuration.timeouts.lookup
        resolution.asksServiceBindings = configuration.http.usesHTTPSRecords
        resolution.network = configuration.network.monitor
        resolution.tracer = tracing?.tracer
        let resolver = try HTTPDNSResolver(
            configuration: resolution,
            engine: resolverEngine,
            path: path,
            logger: logger
        )
        self.resolverEngine = resolverEngine
        self.resolver = resolver
        var app = resolverHTTP
        app.http = configuration.http
        app.tracing = tracing
        let engine = try HTTPEngine(configuration: app, addressSource: resolver, path: path, logger: logger)
        self.engine = engine
        var setup = HTTPDNSURLProtocol.Setup(resolver: resolver, engine: engine, intercept: configuration.policy)
        setup.upgradeToHTTPS = upgradeToHTTPS
        setup.serverTrustChallenges = configuration.tls.serverTrustChallenges
        setup.logger = logger
        interception = Interception(setup)
        if configuration.connectsResolverAtStart, !configuration.policy.selectsNothing {
            resolverWarmUp = Task {
                do { try await resolver.warmUp() } catch {
                    logger.debug("could not open the resolver's connection early", metadata: ["error": "\(error)"])
                    throw error
                }
            }
        } else {
            resolverWarmUp = nil
        }
    }

    /// The short form: resolver specs and name patterns as text.
    ///
    /// - Parameters:
    ///   - resolvers: The resolvers, in the CLI's forms (`doh:URL`, `doh-post:URL`, `doh-json:URL`, `dnspod:URL`,
    ///     `json:URL`, `dns:IP[:PORT]`, `system`).
    ///   - only: The names to resolve through them (`example.com`, `*.example.com`, `*` for every name).
    ///   - trusting: PEM files of certificate authorities trusted on top of the system's, for a resolver or
    ///     origin with a private CA (`TLSSettings.trustedCertificateFiles`).
    /// - Throws: `HTTPDNSConfigurationError` naming a bad entry, or as ``init(_:logger:)`` throws.
    public convenience init(resolvers: [String], only: [String], trusting: [String] = []) throws {
        var configuration = Configuration(
            resolvers: try resolvers.map(ResolverSpec.init(parsing:)),
            policy: try HostPolicy(only: only)
        )
        configuration.tls.trustedCertificateFiles = trusting
        try self.init(configuration)
    }

    // MARK: URLSession

    /// A copy of `base` whose sessions send the requests ``Configuration/policy`` selects through
    /// HTTPDNS (other requests go on as usual), with this instance's resolver and engine. Sessions of
    /// other instances keep theirs.
    ///
    /// - Parameter base: The configuration to copy; `base` itself is left as it is.
    /// - Returns: The copy, with HTTPDNS enabled on it.
    public func urlSessionConfiguration(
        _ base: URLSessionConfiguration = .default
    ) -> URLSessionConfiguration {
        interception.enabled(base)
    }

    /// Enables HTTPDNS on a configuration another stack built and will make its session from
    /// (AFNetworking/Alamofire-style code): its sessions resolve through this instance.
    ///
    /// - Parameter configuration: The configuration to enable HTTPDNS on, changed in place.
    public func enable(on configuration: URLSessionConfiguration) {
        interception.enable(on: configuration)
    }

    /// Also intercepts the requests of sessions made without a configuration from this instance, where
    /// the platform consults globally registered protocols (`URLSession.shared` on Apple platforms).
    /// There is one such registration per process: the instance that called this last serves them.
    public func registerGlobally() {
        interception.registerGlobally()
    }

    /// Marks `request` so HTTPDNS leaves it to URLSession's own loading. On Apple platforms the mark is
    /// a URLProtocol property and nothing goes on the wire; swift-corelibs-foundation drops those, so
    /// there it is an `X-HTTPDNS-Handled` header, which servers ignore.
    ///
    /// - Parameter request: The request to mark, changed in place.
    public static func markHandled(_ request: inout URLRequest) {
        HTTPDNSURLProtocol.markHandled(&request)
    }

    /// The key, in the `userInfo` of the `URLError`s intercepted requests fail with, of the engine's
    /// own `HTTPEngineError` (its code, and every address tried).
    public static let engineErrorKey = HTTPDNSURLProtocol.engineErrorKey

    /// Per-request timing of the URLSession integration: called once per load, just before the task
    /// completes, on no particular thread.
    ///
    /// - Parameter handler: Called with each load's metrics; it replaces a handler set before.
    public func onURLSessionMetrics(_ handler: @escaping @Sendable (HTTPDNSTaskMetrics) -> Void) {
        interception.update { $0.onMetrics = handler }
    }

    // MARK: Clients outside URLSession

    /// A SwiftNIO `Resolver` for one `ClientBootstrap` connect, so any NIO client (gRPC, a database
    /// driver) resolves through HTTPDNS: `ClientBootstrap(group:).resolver(httpdns.nioResolver(on: loop))`.
    ///
    /// - Parameter eventLoop: The event loop of the bootstrap's connect, where the resolver's futures complete.
    /// - Returns: A new resolver, for that one connect.
    public func nioResolver(on eventLoop: any EventLoop) -> any Resolver & Sendable {
        HTTPDNSNIOResolver(resolver, eventLoop: eventLoop)
    }

    // MARK: Lifecycle

    /// Resolves every name in `hosts` ahead of use (at launch, for the names the app will need), so
    /// the first requests find their answers cached. A name may be given as an origin, as
    /// ``preconnect(_:)`` takes them (`https://api.example.com:8443`).
    ///
    /// With active probing on (`NetworkSettings.probing`), it then waits for the probes of each
    /// name's addresses (at the origin's port, 443 for a bare name), so the first requests try the
    /// fastest address first.
    ///
    /// - Parameter hosts: The names, or origins, to resolve.
    public func preResolve(_ hosts: [String]) async {
        let origins = hosts.map { (given: $0, origin: try? HTTPURL(origin: $0)) }
        await resolver.preResolve(origins.map { $0.origin?.host ?? $0.given })
        guard engine.configuration.network.probing != nil else { return }
        await withTaskGroup(of: Void.self) { group in
            for case let origin? in origins.map(\.origin) {
                group.addTask { await self.engine.probe(origin) }
            }
        }
    }

    /// Resolves every name in `hosts` ahead of use and, with `preconnect`, then opens a connection to
    /// each as ``preconnect(_:)`` does: the first request to each finds its answer cached and its
    /// connection ready (to the fastest address, with active probing on).
    ///
    /// - Parameters:
    ///   - hosts: The names, or origins, to resolve.
    ///   - preconnect: Whether to open a connection to each after resolving them.
    /// - Returns: The origins that could not be connected to, with why; empty without `preconnect`.
    @discardableResult
    public func preResolve(_ hosts: [String], preconnect: Bool) async -> [String: HTTPEngineError] {
        await preResolve(hosts)
        return preconnect ? await self.preconnect(hosts) : [:]
    }

    /// Opens a connection to each of `origins` and completes its TLS handshake ahead of the first
    /// request, which then runs on it: the lookup, TCP and TLS round trips are paid before the user
    /// waits, and the first request costs one round trip.
    ///
    /// An origin is a host name (`api.example.com`, meaning `https://api.example.com`) or a URL's
    /// origin (`https://api.example.com:8443`, `http://…`); a path is ignored. The connections are
    /// pooled like any other: closed after 60 s without a request (the pool's idle timeout), and opened again
    /// on the new network after ``networkChanged(to:)`` while in use.
    /// With `serveExpired`, a stale answer's address is connected to at once; if its refresh gives other
    /// addresses, later requests go there and the stale connection closes when idle.
    ///
    /// A pre-connected connection serves requests with the default settings: not those of a URLSession
    /// whose delegate evaluates the server's certificate itself, sends its own proxy credentials or has a
    /// lower `httpMaximumConnectionsPerHost` than `HTTPSettings.maxConnectionsPerHost`.
    ///
    /// Nothing throws (the first request connects on its own then). An origin with a connection open or on
    /// its way is left as it is.
    ///
    /// - Parameter origins: Host names or URL origins to connect to.
    /// - Returns: The origins that could not be connected to, with why.
    @discardableResult
    public func preconnect(_ origins: [String]) async -> [String: HTTPEngineError] {
        await withTaskGroup(of: (String, HTTPEngineError?).self) { group in
            for origin in origins {
                group.addTask {
                    do {
                        try await self.engine.preconnect(try HTTPURL(origin: origin))
                        return (origin, nil)
                    } catch let error as HTTPEngineError {
                        return (origin, error)
                    } catch {
                        return (origin, HTTPEngineError(.connectFailed, "\(origin): \(error)", underlying: error))
                    }
                }
            }
            var failed: [String: HTTPEngineError] = [:]
            for await (origin, error) in group {
                guard let error else { continue }
                logger.debug("pre-connect failed", metadata: ["origin": "\(origin)", "error": "\(error)"])
                failed[origin] = error
            }
            return failed
        }
    }

    /// Waits until the resolver's connection, opened at creation, is up (see
    /// ``Configuration/connectsResolverAtStart``); returns at once when none is being opened. For
    /// `httpdns fetch --warm-resolver`, which models an app's first request after launch. Throws the
    /// connect's error.
    package func resolverConnected() async throws {
        try await resolverWarmUp?.value
    }

    /// Tells HTTPDNS the device moved to another network (Wi-Fi to cellular, another Wi-Fi), named by
    /// the app (never a user-visible name such as an SSID): answers are cached per network, failure
    /// back-offs start afresh, pooled connections are retired, the address families and NAT64 prefix
    /// are detected again, and the names in use are resolved again in the background. From the first
    /// call on, the app names the networks; with `NetworkSettings.watchesChanges` on, the operating
    /// system's notices still re-detect the families and prefix.
    ///
    /// - Parameter networkID: The app's name for the network the device is on now.
    public func networkChanged(to networkID: String) {
        resolver.networkChanged(to: networkID)
        encryptedDNS.withLockedValue { $0 }?.conditionsChanged()
    }

    /// Saves the cache (when ``Configuration/persistencePath`` is set), closes every connection and
    /// stops this instance's URLSession interception (its sessions' requests go to the system's own
    /// loading from then on; other instances' sessions are not touched). Requests started afterwards
    /// through the resolver or the engine fail.
    public func shutdown() async {
        resolverWarmUp?.cancel()
        interception.end()
        encryptedDNS.withLockedValue { $0 }?.stop()
        for token in appLifecycleObservers.withLockedValue({ $0.tokens }) {
            NotificationCenter.default.removeObserver(token)
        }
        for attachment in attachments.withLockedValue({ $0.close() }) {
            await attachment.shutdown()
        }
        await resolver.shutdown()
        engine.shutdown()
        resolverEngine.shutdown()
    }
}
