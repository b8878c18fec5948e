// The self-hostable HTTPDNS server: one process speaking every format our clients speak.
//
//   GET  /d?dn=NAME[,NAME…][&type=aaaa|addrs][&ttl=1][&clientip=1][&query=1][&ip=CLIENT]
//                                                                    DNSPod text (single or batch); with
//                                                                    &id=ID&alg=aes|des or &id=ID&token=T,
//                                                                    Tencent Cloud's enterprise forms
//   GET  /resolve?host=NAME[&query=4|6|4,6]                          Alibaba-style JSON
//   GET  /ACCOUNT/d?host=…, /ACCOUNT/sign_d?host=…&t=&s=             Alibaba Cloud EMAS (unsigned, signed)
//   GET  /v2/d?id=ACCOUNT&m=0&dn=NAME&q=4|6|4,6[&exp=&v=&s=]          Alibaba Cloud EMAS v2, plain mode
//   GET  /dns-query?dns=BASE64URL, POST /dns-query                   RFC 8484 wire format
//   GET  /dns-query?name=NAME&type=A|AAAA (or Accept: dns-json)      JSON DoH
//   GET  /healthz                                                    liveness: 200 while the process runs
//   GET  /readyz                                                     readiness: 503 until the upstream
//                                                                    answered once, and while draining
//   GET  /metrics                                                    Prometheus text, when configured
//
// Answers come from a hosts(5) file (re-read when it changes) and, for other names, from an upstream
// DNS server through the project's resolver (its TTL cache makes TTLs count down). A name found nowhere
// is NXDOMAIN / the format's "no answer"; a name with addresses of the other family only is NODATA.
// Client subnet: a vendor request's `ip=` (DNSPod, decrypted in the AES and DES forms; Alibaba), else
// the configured `clientSubnet` (the connecting client's own /24 or /56, or a fixed subnet), is passed
// to a `dns:` or `doh:` upstream as an EDNS Client Subnet option (RFC 7871). Such answers depend on
// the subnet, so they are asked for each request and not cached; without a subnet, the cache serves.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Tracing

/// Which client subnet `httpdns serve` passes upstream when a request names none (`ip=`).
package enum SubnetPolicy: Sendable, Hashable {
    /// None: the upstream sees only the server.
    case none
    /// The connecting client's own address, cut to /24 (IPv4) or /56 (IPv6).
    case client
    /// This subnet for every request.
    case fixed(ClientSubnet)
}

package final class HTTPDNSService: Sendable {
    package struct Configuration: Sendable {
        /// Addresses to listen on (`port` 0: any free port).
        package var listen: [(host: String, port: Int)] = [("127.0.0.1", 0)]
        /// Serve HTTPS (ALPN h2 and http/1.1) with this certificate; plain HTTP/1.1 and h2c otherwise.
        package var tls: TLSIdentity?
        /// hosts(5) file answered first, re-read within `hostsReloadInterval` of changing.
        package var hostsFile: String?
        /// How often the hosts file is checked for changes; nil: only when `reloadHosts()` is called
        /// (tests, or an operator's signal handler).
        var hostsReloadInterval: Duration? = .seconds(1)
        /// How long a changed hosts file must stay unchanged before the poll reads it (HostsReloadRule):
        /// a file rewritten in place is not read half written. `reloadHosts()` (SIGHUP) does not wait.
        var hostsSettle: Duration = .seconds(2)
        /// Static names (for embedding, e.g. the demo), answered like the hosts file.
        package var staticHosts: [String: [IPAddress]] = [:]
        /// HTTPS records (RFC 9460) answered for these names before the upstream is asked, with `ttl`
        /// (`--https-record`). A name in the hosts data without records here has none (NODATA).
        package var httpsRecords: [String: [ServiceBinding]] = [:]
        /// Upstream DNS server for everything else (nil: names outside the hosts are NXDOMAIN).
        package var upstream: ResolverSpec?
        /// The subnet the upstream is asked for when a request gives no `ip=` (see the file comment).
        package var clientSubnet: SubnetPolicy = .none
        /// TTL of hosts-file answers, seconds.
        package var ttl: UInt32 = 60
        /// Names in one `/d` batch at most.
        var maxBatch = 50
        package var limits = HTTPListener.Limits()
        /// Names asked of the upstream at once at most (see UpstreamLookups.swift).
        package var maxUpstreamLookups = 256
        /// The accounts of the authenticated forms (Tencent Cloud DNSPod, Alibaba Cloud EMAS).
        package var accounts = VendorAccounts()
        /// Refuse every unauthenticated form (free `/d`, `/resolve`, `/ACCOUNT/d`, unsigned `/v2/d`,
        /// `/dns-query`).
        package var requireAuth = false
        /// The service addresses answered to the vendors' scheduling requests (Alibaba `/ACCOUNT/ss`,
        /// DNSPod `/conf`), so a self-hosted deployment can move its clients between replicas; empty:
        /// those requests get 404.
        package var serviceAddresses: [IPAddress] = []
        /// The ports of the service addresses that have their own, sent to Alibaba's clients as
        /// `service_ip_port` / `service_ipv6_port`; DNSPod's list cannot carry them.
        package var servicePorts: [IPAddress: Int] = [:]
        /// How long clients keep that list, in minutes (DNSPod's `ttl:`; Alibaba's clients keep it a day).
        package var serviceListMinutes = 60
        /// Unix seconds now, for signature expiry; tests move it to make signatures expired or early.
        var unixTime: @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }
        /// What `/metrics` answers (Prometheus text format); nil: no `/metrics` (404), and requests are
        /// not counted.
        package var metricsText: (@Sendable () -> String)?
        /// One JSON line per answered request (ServerOperations.swift).
        package var accessLog: AccessLog?
        /// A SERVER span per answered request, joined to the client's trace when the request
        /// carries one (`traceparent`); nil: none.
        package var tracer: (any Tracer)?
        /// The name the start-up readiness probe asks the upstream, once a second until it answers
        /// (any DNS answer counts, NXDOMAIN or REFUSED included: the upstream is reachable).
        var readinessProbeName = "readiness-probe.httpdns.invalid"

        package init() {}
    }

    /// A certificate chain and its key, PEM.
    package struct TLSIdentity: Sendable {
        var chain: [NIOSSLCertificate]
        var key: NIOSSLPrivateKey

        init(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
            self.chain = chain
            self.key = key
        }

        package static func load(certificate: String, key: String) throws -> TLSIdentity {
            TLSIdentity(
                chain: try NIOSSLCertificate.fromPEMFile(certificate),
                key: try NIOSSLPrivateKey(file: key, format: .pem)
            )
        }
    }

    package let listeners: [HTTPListener]
    let readiness: ServiceReadiness
    let hosts: NIOLockedValueBox<Hosts>
    let resolver: HTTPDNSResolver?
    let configuration: Configuration
    let logger: Logger
    /// The hosts reload poll and the readiness probe.
    let background: [Task<Void, Never>]

    struct Hosts {
        var table: [String: [IPAddress]]
        var stamp: String?
        /// DoH answers made from this table lately; a new table starts without them.
        var dohAnswers = DoHAnswerTable()
    }

    /// Ports actually bound, in `listen` order.
    package var ports: [Int] { listeners.map(\.port) }

    package static func start(_ configuration: Configuration, logger: Logger = Logger(label: "httpdns.server"))
        async throws -> HTTPDNSService
    {
        var table = configuration.staticHosts
        var stamp: String?
        if let path = configuration.hostsFile {
            let (parsed, s) = try Self.readHosts(path)
            table.merge(parsed) { $1 }
            stamp = s
        }
        var resolver: HTTPDNSResolver?
        var subnetUpstream: (any SubnetQuerying)?
        if let upstream = configuration.upstream {
            var rc = ResolverConfiguration(providers: [upstream])
            rc.policy = .all
            rc.fallbackToLocalDNS = false
            rc.cache.minTTL = 1
            rc.timeout = .seconds(3)
            let engine = try HTTPEngine()
            resolver = try HTTPDNSResolver(configuration: rc, engine: engine, logger: logger)
            subnetUpstream = try ProviderFactory.make(upstream, engine: engine, bootstrap: [:]) as? any SubnetQuerying
        }
        let tlsContext: NIOSSLContext? = try configuration.tls.map { identity in
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: identity.chain.map { .certificate($0) },
                privateKey: .privateKey(identity.key)
            )
            tls.applicationProtocols = ["h2", "http/1.1"]
            return try NIOSSLContext(configuration: tls)
        }
        let hosts = NIOLockedValueBox(Hosts(table: table, stamp: stamp))
        let readiness = ServiceReadiness(hasUpstream: resolver != nil)
        let service = ServiceCore(
            hosts: hosts,
            resolver: resolver,
            subnetUpstream: subnetUpstream,
            configuration: configuration,
            logger: logger,
            readiness: readiness,
            upstreamLookups: UpstreamLookups(limit: configuration.maxUpstreamLookups)
        )
        let observer = RequestObserver(accessLog: configuration.accessLog, metered: configuration.metricsText != nil)
        // Answers are observed (metrics, access log) only when asked for: the plain path stays as it was.
        var immediate: HTTPListener.ImmediateHandler = { service.answerAtHand($0) }
        var handler: HTTPListener.Handler = { await service.handle($0) }
        if observer.isActive {
            immediate = { request in
                let started = ContinuousClock.now
                guard let response = service.answerAtHand(request) else { return nil }
                observer.answered(request, response, after: .now - started)
                return response
            }
            handler = { request in
                let started = ContinuousClock.now
                let response = await service.handle(request)
                observer.answered(request, response, after: .now - started)
                return response
            }
        }
        if let tracer = configuration.tracer {
            let (untracedImmediate, untraced) = (immediate, handler)
            immediate = { request in
                let started = DefaultTracerClock.now
                guard let response = untracedImmediate(request) else { return nil }
                ServerSpan.record(tracer, request, response, started: started)
                return response
            }
            handler = { request in
                let started = DefaultTracerClock.now
                let response = await untraced(request)
                ServerSpan.record(tracer, request, response, started: started)
                return response
            }
        }
        var listeners: [HTTPListener] = []
        do {
            for (host, port) in configuration.listen {
                listeners.append(
                    try await HTTPListener.start(
                        host: host,
                        port: port,
                        tls: tlsContext,
                        limits: configuration.limits,
                        logger: logger,
                        immediate: immediate,
                        handler: handler
                    )
                )
            }
        } catch {
            for l in listeners { await l.stop() }
            throw error
        }
        var background: [Task<Void, Never>] = []
        if let resolver {
            background.append(Task { await service.probeUntilTheUpstreamAnswers(resolver) })
        }
        if let path = configuration.hostsFile, let interval = configuration.hostsReloadInterval {
            background.append(
                Task {
                    // Polling: one stat per interval, the same on every platform, and it sees a file replaced
                    // by rename as well as one edited in place. A change is read once it has settled.
                    var rule = HostsReloadRule(settle: configuration.hostsSettle)
                    while (try? await Task.sleep(for: interval)) != nil {
                        let seen = Self.stamp(path)
                        let current = hosts.withLockedValue { $0.stamp }
                        guard rule.polled(seen, current: current, now: .now) == .read else { continue }
                        do {
                            if try Self.reloadIfChanged(path, hosts: hosts, statics: configuration.staticHosts) {
                                logger.info("hosts file reloaded", metadata: ["path": "\(path)"])
                            }
                        } catch {
                            logger.warning(
                                "hosts file not reloaded, keeping the previous one",
                                metadata: ["error": "\(error)"]
                            )
                        }
                    }
                }
            )
        }
        return HTTPDNSService(
            listeners: listeners,
            readiness: readiness,
            hosts: hosts,
            resolver: resolver,
            configuration: configuration,
            logger: logger,
            background: background
        )
    }

    private init(
        listeners: [HTTPListener],
        readiness: ServiceReadiness,
        hosts: NIOLockedValueBox<Hosts>,
        resolver: HTTPDNSResolver?,
        configuration: Configuration,
        logger: Logger,
        background: [Task<Void, Never>]
    ) {
        self.listeners = listeners
        self.readiness = readiness
        self.hosts = hosts
        self.resolver = resolver
        self.configuration = configuration
        self.logger = logger
        self.background = background
    }

    /// Stops at once: every connection is closed, answers in progress are dropped.
    package func stop() async {
        for task in background { task.cancel() }
        for l in listeners { await l.stop() }
        configuration.accessLog?.flush()
    }

    /// Graceful stop: `/readyz` turns 503 at once; after `delay` (time for a load balancer's health
    /// checks to notice) no new connection is accepted, the requests in progress are answered and
    /// their connections closed; whatever is still open after `timeout` more is closed.
    package func drain(delay: Duration = .zero, within timeout: Duration) async {
        readiness.draining()
        logger.info("draining", metadata: ["delay": "\(delay)", "timeout": "\(timeout)"])
        if delay > .zero { try? await Task.sleep(for: delay) }
        for task in background { task.cancel() }
        await withTaskGroup(of: Void.self) { group in
            for l in listeners { group.addTask { await l.drain(within: timeout) } }
        }
        configuration.accessLog?.flush()
    }
}
