// The system encrypted-DNS mode: the app's process resolves every name through one DoH server, with no
// interception (Network.framework's privacy context, iOS 14+). HTTPDNS adds what the system lacks: a
// health check that gives resolution back to the system's resolver while the server is down
// (EncryptedDNSHealth has the rules and their tests), and a report of how each task resolved.
// The comparison with the other routes is the DocC article "Choosing a route".

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Network)
    import Network
#endif

/// How ``HTTPDNS/enableSystemEncryptedDNS(_:)`` points the system's resolution at a DoH server, and
/// how it checks the server.
public struct EncryptedDNSSettings: Sendable {
    /// The DoH server (RFC 8484, `https://…/dns-query`). Nil: the configuration's first `doh:` or
    /// `doh-post:` resolver (your own `httpdns serve`, or a public DoH service).
    public var url: URL?
    /// The server's addresses, so the system reaches it without asking DNS. Empty: the configuration's
    /// ``HTTPDNS/Configuration/bootstrap`` entry for its host, or the host itself when it is an address.
    public var serverAddresses: [String] = []
    /// The name each health check asks the server for (its A record). Any answer (NOERROR or NXDOMAIN)
    /// is healthy; no answer in time, an HTTP error or SERVFAIL is not.
    public var checkName = "www.apple.com"
    /// How long one check may take.
    public var checkTimeout: Duration = .seconds(5)
    /// How often a healthy server is checked: 60 s by default, so a server that dies leaves the process
    /// without name resolution for at most about 75 s (the next check, its timeout, a confirming check
    /// 5 s later and its timeout) before the system's resolver takes over. Each check is one DoH query.
    public var checkInterval: Duration = .seconds(60)
    /// Failed checks in a row that give resolution back to the system's resolver.
    public var failuresBeforeFallback = 2
    /// The wait before checking a failed server again, doubling per failure up to `maximumRetryAfter`.
    public var retryAfter: Duration = .seconds(30)
    /// The longest wait between checks of a failed server.
    public var maximumRetryAfter: Duration = .seconds(600)
    /// The wait before the check that confirms a first failure (tests shorten it).
    var confirmAfter: Duration = .seconds(5)

    /// Settings for the DoH server at `url` (nil: the configuration's), reached at `serverAddresses`.
    ///
    /// - Parameters:
    ///   - url: The DoH server; nil for the configuration's first `doh:` or `doh-post:` resolver.
    ///   - serverAddresses: The server's addresses, as IP literals; empty for the configuration's
    ///     ``HTTPDNS/Configuration/bootstrap`` entry for its host, or the host itself when it is an address.
    public init(url: URL? = nil, serverAddresses: [String] = []) {
        self.url = url
        self.serverAddresses = serverAddresses
    }
}

/// The system encrypted-DNS mode while it is on: which resolver the system uses now, and the switch
/// to turn it off. Made by ``HTTPDNS/enableSystemEncryptedDNS(_:)``.
public final class SystemEncryptedDNS: Sendable {
    /// Points the system's resolution at the server (`.encrypted`) or gives it back (`.system`).
    typealias Apply = @Sendable (EncryptedDNSMode) -> Void

    private struct Inner {
        var health: EncryptedDNSHealth
        var timer: Task<Void, Never>?
        var handlers: [@Sendable (EncryptedDNSMode) -> Void] = []
    }

    /// The DoH server.
    public let url: URL
    /// Where the system reaches it.
    public let serverAddresses: [HTTPDNSCore.IPAddress]
    private let checkName: String
    private let checkTimeout: Duration
    private let provider: any DNSProvider
    private let apply: Apply
    private let logger: Logger
    private let inner: NIOLockedValueBox<Inner>
    /// What the system was last told; its lock is held while the system is told, so that tellings never
    /// interleave.
    private let told = NIOLockedValueBox<EncryptedDNSMode?>(nil)

    init(
        settings: EncryptedDNSSettings,
        url: URL,
        serverAddresses: [HTTPDNSCore.IPAddress],
        provider: any DNSProvider,
        logger: Logger,
        apply: @escaping Apply
    ) {
        self.url = url
        self.serverAddresses = serverAddresses
        self.checkName = settings.checkName
        self.checkTimeout = settings.checkTimeout
        self.provider = provider
        self.apply = apply
        self.logger = logger
        let health = EncryptedDNSHealth(
            interval: settings.checkInterval,
            failuresBeforeFallback: settings.failuresBeforeFallback,
            initialBackoff: settings.retryAfter,
            maximumBackoff: settings.maximumRetryAfter,
            confirmAfter: settings.confirmAfter
        )
        self.inner = NIOLockedValueBox(Inner(health: health))
    }

    /// Which resolver the system was last pointed at; nil until the first check has ended.
    public var mode: EncryptedDNSMode? { inner.withLockedValue { $0.health.applied } }

    /// Calls `handler` with the mode the system was last told, at once if it has been told one, then
    /// each time the system is pointed at the server or given back its own resolver, on no particular
    /// thread. No change is missed or told twice, whenever the handler is added.
    ///
    /// - Parameter handler: Called with each mode the system is told; it is added to the handlers set before.
    public func onChange(_ handler: @escaping @Sendable (EncryptedDNSMode) -> Void) {
        // Under `told`'s lock, as a telling is: the handler is either in that telling's list or hears
        // its mode here.
        let current = told.withLockedValue { told -> EncryptedDNSMode? in
            inner.withLockedValue { $0.handlers.append(handler) }
            return told
        }
        if let current { handler(current) }
    }

    /// Turns the mode off: the system's own resolver comes back and no more checks run.
    public func stop() {
        run(
            inner.withLockedValue { inner in
                inner.timer?.cancel()
                inner.timer = nil
                return inner.health.stop()
            }
        )
    }

    /// Starts the first check.
    func start() {
        run(inner.withLockedValue { $0.health.start() })
    }

    /// The network changed or the app came back to the foreground: check now.
    func conditionsChanged() {
        run(inner.withLockedValue { $0.health.conditionsChanged() })
    }

    private func run(_ actions: [EncryptedDNSHealth.Action]) {
        for action in actions {
            switch action {
            case .check:
                Task { await self.check() }
            case .apply:
                // What the rules decided last, not what this action says: two runs (a check's end and
                // stop()) may reach here in either order, and the system must end up told the latest.
                let changed = told.withLockedValue {
                    told -> (mode: EncryptedDNSMode, handlers: [@Sendable (EncryptedDNSMode) -> Void])? in
                    let (mode, handlers) = inner.withLockedValue { ($0.health.applied ?? .system, $0.handlers) }
                    guard mode != told else { return nil }
                    told = mode
                    logger.notice(
                        "system encrypted DNS: \(mode == .encrypted ? "resolving through" : "back to the system's resolver, away from") \(url)"
                    )
                    apply(mode)
                    return (mode, handlers)
                }
                // Outside the lock: a handler may call stop().
                if let changed {
                    for handler in changed.handlers { handler(changed.mode) }
                }
            case .schedule(let wait):
                let timer = Task { [weak self] in
                    guard (try? await Task.sleep(for: wait)) != nil, let self else { return }
                    self.run(self.inner.withLockedValue { $0.health.timerFired() })
                }
                inner.withLockedValue { inner in
                    inner.timer?.cancel()
                    inner.timer = timer
                }
            }
        }
    }

    /// One health check: a DoH query for `checkName`, to the server's addresses, the URL's host as SNI.
    private func check() async {
        let deadline = NIODeadline.now() + TimeAmount.nanoseconds(Int64(checkTimeout.nanoseconds))
        let healthy: Bool
        do {
            _ = try await provider.resolve(checkName, family: .ipv4, deadline: deadline)
            healthy = true
        } catch {
            logger.info("system encrypted DNS: health check of \(url) failed: \(error)")
            healthy = false
        }
        run(inner.withLockedValue { $0.health.checkFinished(healthy: healthy) })
    }
}

extension HTTPDNS {
    /// Points the system's name resolution for this app's whole process at a DoH server: every
    /// connection the process makes (URLSession, Network.framework, third-party SDKs, players' requests
    /// made in the process) resolves through it, encrypted, with no interception. Not what runs in other
    /// processes: background URLSession transfers (nsurlsessiond) and web views (WebKit's processes).
    ///
    /// The server is the system's fallback resolver: it is used only when the system has no encrypted
    /// resolver of its own. A DNS settings profile or app, iCloud Private Relay, or a network that
    /// designates an encrypted resolver take precedence, and then the health check below still passes
    /// against a server the process does not use; `resolutionReport(for:)` says whether a task's names
    /// were resolved encrypted, not by which server (Network.framework does not tell).
    ///
    /// The server is health-checked (``EncryptedDNSSettings``): nothing changes until a first check
    /// passes; `failuresBeforeFallback` failed checks in a row give resolution back to the system's
    /// resolver (with encryption required the system would not fall back by itself), and the first
    /// check that passes again points it back at the server. A network change
    /// (``networkChanged(to:)``) checks at once. `resolutionReport(for:)` (Apple platforms) tells, per task,
    /// whether the names were resolved encrypted.
    ///
    /// This route has no per-host policy and connects wherever the server's answer says: a hijacking
    /// LocalDNS is bypassed, but the addresses are not cached, ranked or checked by HTTPDNS. The DocC
    /// article "Choosing a route" compares it with the URLProtocol and the proxy configuration.
    ///
    /// Calling it again replaces the settings.
    ///
    /// - Parameter settings: The DoH server, its addresses and how it is checked.
    /// - Returns: The mode, on: which resolver the system uses now, and the switch to turn it off.
    /// - Throws: `HTTPDNSConfigurationError`: `.invalidResolverSpec` when there is no https DoH URL or no
    ///   address to reach it by, `.unavailableOnPlatform` where Network.framework is missing (Linux).
    @discardableResult
    public func enableSystemEncryptedDNS(_ settings: EncryptedDNSSettings = .init()) throws -> SystemEncryptedDNS {
        #if canImport(Network)
            // COMPILED FOR iOS 16 BY THE APPLE CHECK, NEVER RUN HERE: the privacy context is Apple's. The
            // health rules, the check and the switching are what the Linux tests run (the applier aside).
            observeAppLifecycle()
            return try startSystemEncryptedDNS(settings) { url, addresses in
                let port = UInt16(url.port ?? 443)
                return { mode in
                    // Made here, not captured: Network's types are not Sendable in the iOS 16 SDKs.
                    let endpoints = addresses.map {
                        NWEndpoint.hostPort(
                            host: NWEndpoint.Host($0.description),
                            port: NWEndpoint.Port(rawValue: port) ?? .https
                        )
                    }
                    let context = NWParameters.PrivacyContext.default
                    switch mode {
                    case .encrypted:
                        context.requireEncryptedNameResolution(
                            true,
                            fallbackResolver: .https(url, serverAddresses: endpoints)
                        )
                    case .system:
                        context.requireEncryptedNameResolution(false, fallbackResolver: nil)
                    }
                }
            }
        #else
            throw HTTPDNSConfigurationError(
                .unavailableOnPlatform,
                "system encrypted DNS is Network.framework's privacy context, on Apple platforms only; here, send requests through HTTPDNS (urlSessionConfiguration(), the engine or the loopback proxy)"
            )
        #endif
    }

    /// Starts the mode with `applier` making the function that points the system at the server or
    /// back; the Linux tests give one that records what it is told.
    func startSystemEncryptedDNS(
        _ settings: EncryptedDNSSettings,
        applier: (_ url: URL, _ addresses: [HTTPDNSCore.IPAddress]) -> SystemEncryptedDNS.Apply
    ) throws -> SystemEncryptedDNS {
        let (url, endpoint, addresses) = try encryptedDNSServer(settings)
        let provider = try ProviderFactory.make(
            .doh(endpoint, usePOST: false),
            engine: resolverEngine,
            bootstrap: [normalizeHostname(endpoint.host): addresses]
        )
        let mode = SystemEncryptedDNS(
            settings: settings,
            url: url,
            serverAddresses: addresses,
            provider: provider,
            logger: logger,
            apply: applier(url, addresses)
        )
        let replaced = encryptedDNS.withLockedValue { current in
            defer { current = mode }
            return current
        }
        replaced?.stop()
        mode.start()
        return mode
    }

    /// The server's URL, endpoint and addresses from `settings`, or from the configuration.
    private func encryptedDNSServer(_ settings: EncryptedDNSSettings) throws -> (
        URL, ResolverEndpoint, [HTTPDNSCore.IPAddress]
    ) {
        let endpoint: ResolverEndpoint
        if let url = settings.url {
            endpoint = try ResolverEndpoint(url: url.absoluteString)
        } else {
            let first = configuration.resolvers.lazy.compactMap { spec -> ResolverEndpoint? in
                if case .doh(let endpoint, _) = spec { return endpoint }
                return nil
            }.first
            guard let first else {
                throw HTTPDNSConfigurationError(
                    .invalidResolverSpec,
                    "system encrypted DNS needs a DoH server: give EncryptedDNSSettings(url:) or configure a doh: resolver"
                )
            }
            endpoint = first
        }
        guard endpoint.isTLS, let url = URL(string: endpoint.description) else {
            throw HTTPDNSConfigurationError(
                .invalidResolverSpec,
                "system encrypted DNS needs an https DoH URL (\(endpoint) is not): the system only sends DNS over HTTPS with TLS"
            )
        }
        var addresses: [HTTPDNSCore.IPAddress] = []
        for text in settings.serverAddresses {
            guard let address = HTTPDNSCore.IPAddress(text) else {
                throw HTTPDNSConfigurationError(
                    .invalidResolverSpec,
                    "system encrypted DNS server address \"\(text)\" is not an IP address"
                )
            }
            addresses.append(address)
        }
        if addresses.isEmpty {
            addresses =
                endpoint.bootstrapAddresses(in: configuration.bootstrap) ?? HTTPDNSCore.IPAddress(endpoint.host).map {
                    [$0]
                } ?? []
        }
        guard !addresses.isEmpty else {
            throw HTTPDNSConfigurationError(
                .invalidResolverSpec,
                "system encrypted DNS server \(endpoint.host) has no address: give EncryptedDNSSettings.serverAddresses or a bootstrap entry (the system must reach it without DNS)"
            )
        }
        return (url, endpoint, addresses)
    }
}

#if canImport(Darwin)
    extension HTTPDNS {
        /// Whether a URLSession task's names were resolved encrypted, from the metrics its delegate gets
        /// (`urlSession(_:task:didFinishCollecting:)`): each transaction that looked its name up, and how
        /// (`domainResolutionProtocol`). With ``enableSystemEncryptedDNS(_:)`` on and healthy, every lookup
        /// is `.https`; `.udp` or `.tcp` means the system's cleartext resolver answered.
        ///
        /// COMPILED FOR iOS 16 BY THE APPLE CHECK, NEVER RUN HERE; the report's rules are ResolutionReport's,
        /// tested on Linux.
        ///
        /// - Parameter metrics: The metrics the task's delegate was given.
        /// - Returns: How each of the task's lookups was resolved.
        public static func resolutionReport(for metrics: URLSessionTaskMetrics) -> ResolutionReport {
            let lookups = metrics.transactionMetrics.compactMap { transaction -> ResolutionTransport? in
                // A reused connection, an address literal or a cached response: nothing was looked up.
                guard !transaction.isReusedConnection, transaction.domainLookupStartDate != nil else { return nil }
                switch transaction.domainResolutionProtocol {
                case .https: return .https
                case .tls: return .tls
                case .udp: return .udp
                case .tcp: return .tcp
                default: return .unknown
                }
            }
            return ResolutionReport(lookups: lookups)
        }
    }
#endif
