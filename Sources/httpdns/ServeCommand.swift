// `httpdns serve`: the self-hostable HTTPDNS server on one or more addresses, until SIGINT/SIGTERM, which
// drain it gracefully (swift-service-lifecycle): /readyz turns 503, then after --shutdown-delay no new
// connection is taken, requests in progress are answered, and what is left after --drain-timeout is
// closed. Every flag can also come from --config FILE (JSON, the flags' names as keys); a flag given on
// the command line wins over the file.

import ArgumentParser
import HTTPDNSCommandLine
import HTTPDNSOTLP
import Dispatch
import Foundation
import HTTPDNSCore
import HTTPDNSLookup
import HTTPDNSServer
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Tracing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve HTTPDNS: DNSPod text (/d), Alibaba-style JSON (/resolve), DoH wire and JSON (/dns-query).",
        discussion: """
            Answers from --hosts first (re-read when it changes), then from --upstream; other names are \
            NXDOMAIN. HTTPS with h2 and http/1.1 when given --tls-cert and --tls-key, plain HTTP/1.1 and h2c \
            otherwise.
            Stands in for Tencent Cloud DNSPod (encrypted and token forms) and Alibaba Cloud EMAS (signed \
            /ACCOUNT/sign_d and /v2/d) for the accounts given with --dnspod-account, --dnspod-token and \
            --alibaba-account; secrets are read from files.
            Example: httpdns serve --listen 127.0.0.1:8053 --hosts hosts.txt --upstream dns:127.0.0.1:5302
            """
    )

    @Option(name: .customLong("listen"), help: ArgumentHelp("Address to listen on, repeatable.", valueName: "IP:PORT"))
    var listen: [String] = []

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("PEM certificate chain for HTTPS.", valueName: "FILE"))
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("PEM private key for HTTPS.", valueName: "FILE"))
    var tlsKey: String?

    @Option(help: ArgumentHelp("hosts(5) file answered first.", valueName: "FILE"))
    var hosts: String?

    @Option(help: ArgumentHelp("Upstream DNS server for other names.", valueName: "dns:IP[:PORT]"))
    var upstream: String?

    @Option(
        name: .customLong("client-subnet"),
        help: ArgumentHelp(
            "Ask the upstream on behalf of this subnet when a request has no ip=: client (the connecting client's own /24 or /56) or a CIDR. Sent as EDNS Client Subnet; default: none.",
            valueName: "client|CIDR"
        )
    )
    var clientSubnet: String?

    @Option(help: ArgumentHelp("TTL of hosts-file answers (default 60).", valueName: "SECONDS"))
    var ttl: UInt32?

    @Option(
        name: .customLong("max-connections"),
        help:
            "Connections at most (default 1024); when full, the connection idle longest makes room, and a new one is closed at once only when every connection has a request in progress."
    )
    var maxConnections: Int?

    @Option(
        name: .customLong("max-connections-per-client"),
        help:
            "Connections at most from one client address; more are closed at once (default: no cap, as behind a load balancer every client has its address)."
    )
    var maxConnectionsPerClient: Int?

    @Option(
        name: .customLong("max-upstream-lookups"),
        help:
            "Names asked of --upstream at once at most (default 256; each holds up to two sockets); past it a query is answered SERVFAIL (DoH) or 502 at once, while the hosts file and the cache still answer."
    )
    var maxUpstreamLookups: Int?

    @Option(
        name: .customLong("request-timeout"),
        parsing: .unconditional,
        help: ArgumentHelp(
            "Time a client has to send a whole request once it started (and, on a new connection, to finish TLS; default 10).",
            valueName: "SECONDS"
        )
    )
    var requestTimeout: Double?

    @Option(
        name: .customLong("idle-timeout"),
        parsing: .unconditional,
        help: ArgumentHelp(
            "A connection with no request in progress is closed after this (default 60).",
            valueName: "SECONDS"
        )
    )
    var idleTimeout: Double?

    @Option(
        name: .customLong("config"),
        help: ArgumentHelp(
            "JSON file of settings, keyed by these flags' names (e.g. {\"listen\": [\"0.0.0.0:8443\"], \"ttl\": 30}); flags given here win.",
            valueName: "FILE"
        )
    )
    var config: String?

    @Flag(name: .customLong("metrics"), help: "Serve Prometheus metrics at /metrics.")
    var metrics = false

    @Option(
        name: .customLong("access-log"),
        help: ArgumentHelp("Append one JSON line per request to FILE (- for standard output).", valueName: "FILE")
    )
    var accessLog: String?

    @Option(
        name: .customLong("shutdown-delay"),
        parsing: .unconditional,
        help: ArgumentHelp(
            "On SIGTERM, keep serving this long with /readyz at 503, so load balancers stop sending first (default 0).",
            valueName: "SECONDS"
        )
    )
    var shutdownDelay: Double?

    @Option(
        name: .customLong("drain-timeout"),
        parsing: .unconditional,
        help: ArgumentHelp(
            "On SIGTERM, time the requests in progress have to finish before their connections close (default 10).",
            valueName: "SECONDS"
        )
    )
    var drainTimeout: Double?

    @Flag(name: .customLong("debug"), help: "Log every request on stderr.")
    var debug = false

    @OptionGroup var tracing: TracingOptions

    @Option(
        name: .customLong("dnspod-account"),
        help: ArgumentHelp(
            "Answer Tencent Cloud DNSPod's encrypted form for this account (repeatable); the key is read from FILE.",
            valueName: "ID:aes|des:FILE"
        )
    )
    var dnspodAccounts: [String] = []

    @Option(
        name: .customLong("dnspod-token"),
        help: ArgumentHelp(
            "Answer DNSPod's token form for this account (repeatable); the token is read from FILE.",
            valueName: "ID:FILE"
        )
    )
    var dnspodTokens: [String] = []

    @Option(
        name: .customLong("alibaba-account"),
        help: ArgumentHelp(
            "Answer Alibaba Cloud EMAS signed queries (/ACCOUNT/sign_d, /v2/d) for this account; the secret is read from FILE. Repeatable; an account given twice takes either secret (a v1 secret and a v2 hex one).",
            valueName: "ACCOUNT:FILE"
        )
    )
    var alibabaAccounts: [String] = []

    @Option(
        name: .customLong("alibaba-aes-key"),
        help: ArgumentHelp(
            "An Alibaba account's AES key (hex, from FILE): /v2/d's encrypted modes (m=1 CBC, m=2 GCM) for it. Repeatable.",
            valueName: "ACCOUNT:FILE"
        )
    )
    var alibabaAESKeys: [String] = []

    @Option(
        name: .customLong("service-ip"),
        help: ArgumentHelp(
            "A service address answered to the vendors' scheduling requests (Alibaba /ACCOUNT/ss, DNSPod /conf), so clients move to it; repeatable, IPv4 or IPv6. IP:PORT gives Alibaba clients its port (service_ip_port); DNSPod's list has no ports.",
            valueName: "IP[:PORT]"
        )
    )
    var serviceIPs: [String] = []

    @Option(
        name: .customLong("https-record"),
        help: ArgumentHelp(
            "An HTTPS record (RFC 9460) answered for NAME to DoH queries of type HTTPS, with --ttl; repeatable (a name's records together). Other names' records come from --upstream; a name in --hosts without one has none. Example: 'api.example.com 1 . alpn=h2 port=8443'.",
            valueName: "NAME PRIORITY TARGET [PARAM=VALUE ...]"
        )
    )
    var httpsRecords: [String] = []

    @Option(
        name: .customLong("service-list-ttl"),
        help: ArgumentHelp(
            "Minutes DNSPod clients keep the --service-ip list (1 to 1440, default 60).",
            valueName: "MINUTES"
        )
    )
    var serviceListTTL: Int?

    @Flag(
        name: .customLong("require-auth"),
        help: "Refuse the unauthenticated forms (/d without id, /resolve, /ACCOUNT/d, unsigned /v2/d, /dns-query)."
    )
    var requireAuth = false

    mutating func validate() throws {
        if let config { try ServeConfigFile.load(config).apply(to: &self) }
        guard !listen.isEmpty else {
            throw ValidationError("--listen: give at least one, e.g. --listen 127.0.0.1:8053")
        }
        for l in listen {
            do {
                _ = try Self.listenAddress(l)
            } catch {
                throw ValidationError("--listen: \(error)")
            }
        }
        guard (tlsCert == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-cert and --tls-key: give both or neither")
        }
        if let upstream {
            do {
                guard case .dns = try ResolverSpec(parsing: upstream) else {
                    throw ValidationError("--upstream: \"\(upstream)\" is not dns:IP[:PORT]")
                }
            } catch let e as ValidationError {
                throw e
            } catch {
                throw ValidationError("--upstream: \(error)")
            }
        }
        if let hosts, !FileManager.default.isReadableFile(atPath: hosts) {
            throw ValidationError("--hosts: cannot read \(hosts)")
        }
        _ = try subnetPolicy()
        _ = try serviceAddresses()
        _ = try serviceBindings()
        if let serviceListTTL, !(1...1440).contains(serviceListTTL) {
            throw ValidationError("--service-list-ttl: give minutes from 1 to 1440")
        }
        guard settings.maxConnections > 0 else { throw ValidationError("--max-connections: give a positive number") }
        if let n = maxConnectionsPerClient, n <= 0 {
            throw ValidationError("--max-connections-per-client: give a positive number")
        }
        guard settings.maxUpstreamLookups > 0 else {
            throw ValidationError("--max-upstream-lookups: give a positive number")
        }
        _ = try settings.limits()
        _ = try settings.drain()
        let accounts = try vendorAccounts()
        if requireAuth, accounts.isEmpty {
            throw ValidationError(
                "--require-auth: no account to authenticate; add --dnspod-account, --dnspod-token or --alibaba-account"
            )
        }
    }

    /// The accounts of --dnspod-account, --dnspod-token and --alibaba-account, keys read from their files.
    /// `--client-subnet`: none, the client's own, or a fixed CIDR.
    func subnetPolicy() throws -> SubnetPolicy {
        guard let clientSubnet else { return .none }
        if clientSubnet == "client" { return .client }
        do {
            return .fixed(try ClientSubnet(clientSubnet))
        } catch let error as HTTPDNSConfigurationError {
            throw ValidationError("--client-subnet: \(error.message); or give client")
        }
    }

    /// The records of --https-record, by name, in the order given.
    func serviceBindings() throws -> [String: [ServiceBinding]] {
        var records: [String: [ServiceBinding]] = [:]
        for text in httpsRecords {
            let trimmed = text.drop { $0 == " " || $0 == "\t" }
            let nameEnd = trimmed.firstIndex { $0 == " " || $0 == "\t" } ?? trimmed.endIndex
            do {
                let name = try validatedHostname(trimmed[..<nameEnd])
                records[name, default: []].append(try ServiceBinding(parsing: String(trimmed[nameEnd...])))
            } catch {
                throw ValidationError(
                    "--https-record \"\(text.prefix(100))\": \(error); give NAME PRIORITY TARGET [PARAM=VALUE ...], e.g. 'api.example.com 1 . alpn=h2 port=8443'"
                )
            }
        }
        // Every name's whole answer is encoded once here, as the first query would: what the wire form
        // cannot carry (over 65,535 bytes) is refused at start, not by the first client that asks. With
        // the OPT record an EDNS query's answer carries (its padding is left out where it would not fit).
        for (name, bindings) in records.sorted(by: { $0.key < $1.key }) {
            do {
                let query = try DNSMessage(parsing: try DNSMessage.query(name: name, type: .https, id: 0))
                _ = try DNSMessage.response(to: query, serviceBindings: bindings, opt: AnswerOPT())
            } catch {
                throw ValidationError(
                    "--https-record: the \(bindings.count) records of \(name) do not fit one DNS answer (\(error)); give fewer or shorter records"
                )
            }
        }
        return records
    }

    /// The addresses of --service-ip, and the ports given with some of them (`IP:PORT`, `[IPv6]:PORT`).
    func serviceAddresses() throws -> (addresses: [IPAddress], ports: [IPAddress: Int]) {
        var ports: [IPAddress: Int] = [:]
        let addresses = try serviceIPs.map { text in
            if let ip = IPAddress(text) { return ip }
            guard let (host, portText) = splitHostPort(Substring(text)), let ip = IPAddress(String(host)),
                let portText, let port = parsePort(portText)
            else {
                throw ValidationError(
                    "--service-ip: \"\(text)\" is not an IP address or IP:PORT ([IPv6]:PORT); give one address per flag"
                )
            }
            ports[ip] = port
            return ip
        }
        return (addresses, ports)
    }

    func vendorAccounts() throws -> VendorAccounts {
        func check(_ auth: DNSPodAuth, flag: String) throws {
            if let problem = auth.problem { throw ValidationError("\(flag): \(problem)") }
        }
        var accounts = VendorAccounts()
        for entry in dnspodAccounts {
            let flag = "--dnspod-account"
            let parts = entry.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3, let algorithm = DNSPodCipher.Algorithm(rawValue: parts[1].lowercased()) else {
                throw ValidationError("\(flag): \"\(entry)\" is not ID:aes:FILE or ID:des:FILE")
            }
            let key = try readSecret(parts[2], flag: flag)
            let auth: DNSPodAuth = algorithm == .aes ? .aes(id: parts[0], key: key) : .des(id: parts[0], key: key)
            try check(auth, flag: flag)
            accounts.dnspodKeys[parts[0]] = DNSPodCipher(auth)
        }
        for entry in dnspodTokens {
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--dnspod-token: \"\(entry)\" is not ID:FILE") }
            let token = try readSecret(parts[1], flag: "--dnspod-token")
            try check(.token(id: parts[0], token: token), flag: "--dnspod-token")
            accounts.dnspodTokens[parts[0]] = token
        }
        for entry in alibabaAccounts {
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[0].contains("/") else {
                throw ValidationError("--alibaba-account: \"\(entry)\" is not ACCOUNT:FILE")
            }
            // Repeated for one account: each secret signs (a v1 MD5 secret beside a v2 hex one).
            accounts.alibaba[parts[0], default: []].append(try readSecret(parts[1], flag: "--alibaba-account"))
        }
        for entry in alibabaAESKeys {
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[0].contains("/") else {
                throw ValidationError("--alibaba-aes-key: \"\(entry)\" is not ACCOUNT:FILE")
            }
            let key = try readSecret(parts[1], flag: "--alibaba-aes-key")
            guard AlibabaV2Cipher(AlibabaEncryption(key: key)) != nil else {
                throw ValidationError("--alibaba-aes-key: \(parts[1]) is not hex of 16, 24 or 32 bytes")
            }
            accounts.alibabaAES[parts[0]] = key
        }
        return accounts
    }

    /// The values in force: flags (and the config file) over the defaults.
    var settings: Settings {
        Settings(
            ttl: ttl ?? 60,
            maxConnections: maxConnections ?? 1024,
            maxConnectionsPerClient: maxConnectionsPerClient,
            maxUpstreamLookups: maxUpstreamLookups ?? 256,
            requestTimeout: requestTimeout ?? 10,
            idleTimeout: idleTimeout ?? 60,
            shutdownDelay: shutdownDelay ?? 0,
            drainTimeout: drainTimeout ?? 10
        )
    }

    /// The bounds of each setting given in seconds, by its flag's name: the flag and its `--config` key
    /// are checked against the same range.
    static let secondsBounds: [String: ClosedRange<Double>] = [
        "request-timeout": 0.01...3600, "idle-timeout": 0.01...86400, "shutdown-delay": 0...3600,
        "drain-timeout": 0.01...3600,
    ]

    struct Settings {
        var ttl: UInt32
        var maxConnections: Int
        var maxConnectionsPerClient: Int?
        var maxUpstreamLookups: Int
        var requestTimeout: Double
        var idleTimeout: Double
        var shutdownDelay: Double
        var drainTimeout: Double

        func limits() throws -> HTTPListener.Limits {
            var limits = HTTPListener.Limits()
            limits.maxConnections = maxConnections
            limits.maxConnectionsPerClient = maxConnectionsPerClient
            limits.requestTimeout = try Self.duration(requestTimeout, "request-timeout")
            limits.idleTimeout = try Self.duration(idleTimeout, "idle-timeout")
            return limits
        }

        func drain() throws -> (delay: Duration, timeout: Duration) {
            (
                try Self.duration(shutdownDelay, "shutdown-delay"),
                try Self.duration(drainTimeout, "drain-timeout")
            )
        }

        /// `value` seconds of the setting `name`, within its bounds, else a usage error naming `--name`.
        static func duration(_ value: Double, _ name: String) throws -> Duration {
            try seconds(value, flag: "--" + name, range: ServeCommand.secondsBounds[name]!)
        }
    }

    func run() async throws {
        var logger = Logger(label: "httpdns.serve")
        logger.logLevel = debug ? .debug : .info
        try await tracing.exporting(logger: logger) { try await serve(logger: logger) }
    }

    private func serve(logger: Logger) async throws {
        var config = HTTPDNSService.Configuration()
        config.listen = try listen.map {
            let (ip, port) = try Self.listenAddress($0)
            return (ip.description, port)
        }
        do {
            if let tlsCert, let tlsKey { config.tls = try .load(certificate: tlsCert, key: tlsKey) }
        } catch {
            throw ValidationError("--tls-cert/--tls-key: \(error)")
        }
        config.hostsFile = hosts
        config.httpsRecords = try serviceBindings()
        config.upstream = try upstream.map { try ResolverSpec(parsing: $0) }
        config.clientSubnet = try subnetPolicy()
        config.ttl = settings.ttl
        config.limits = try settings.limits()
        config.maxUpstreamLookups = settings.maxUpstreamLookups
        config.accounts = try vendorAccounts()
        config.requireAuth = requireAuth
        (config.serviceAddresses, config.servicePorts) = try serviceAddresses()
        config.serviceListMinutes = serviceListTTL ?? 60
        if metrics {
            // The one backend for every module's swift-metrics (resolver, engine, server), bootstrapped
            // before any of them exists.
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
            config.metricsText = { registry.emitToString() }
        }
        if let accessLog {
            do {
                config.accessLog = try AccessLog(path: accessLog)
            } catch {
                throw ValidationError("--access-log: \(error)")
            }
        }
        if tracing.otlpEndpoint != nil { config.tracer = InstrumentationSystem.tracer }
        fitIntoDescriptors(&config)
        let service: HTTPDNSService
        do {
            service = try await HTTPDNSService.start(config, logger: logger)
        } catch {
            FileHandle.standardError.write(Data("httpdns serve: \(error)\n".utf8))
            throw ExitCode(1)
        }
        // SIGHUP never ends serve: ignored since main began (HTTPDNSCommand.main), then trapped by the reload
        // below. Ignored here again for a serve run without that main.
        signal(SIGHUP, SIG_IGN)
        let scheme = config.tls == nil ? "http" : "https"
        for (listener, (host, _)) in zip(service.listeners, config.listen) {
            let authority = formatAuthority(host: host, port: listener.port)
            print(
                "httpdns serve: listening on \(scheme)://\(authority) (/d, /resolve, /dns-query, /healthz, /readyz\(metrics ? ", /metrics" : ""))"
            )
        }
        fflush(nil)  // scripts wait for these lines; stdout to a file or pipe is block-buffered
        let (delay, timeout) = try settings.drain()
        // SIGHUP reads the hosts file again at once, as it is (docs/CLI.md); every other option needs a
        // restart. Requests in flight are not touched.
        let hostsPath = hosts
        try await runUntilSignalled(
            logger: logger,
            onHangUp: {
                guard let hostsPath else {
                    print("httpdns serve: SIGHUP: no --hosts file to read again")
                    fflush(nil)
                    return
                }
                do {
                    try service.reloadHosts(force: true)
                    print("httpdns serve: SIGHUP: read \(hostsPath) again")
                } catch {
                    print("httpdns serve: SIGHUP: \(hostsPath) not read, keeping the previous table: \(error)")
                }
                fflush(nil)
            }
        ) {
            print(
                "httpdns serve: draining (readyz 503; new connections refused after \(delay), the rest closed within \(timeout))"
            )
            fflush(nil)
            await service.drain(delay: delay, within: timeout)
        }
        print("httpdns serve: stopped")
        fflush(nil)
    }

    /// Lowers the connection and upstream bounds to what the descriptor limit holds, saying so on stderr
    /// (DescriptorBudget.swift: a process out of descriptors can crash in code it does not control).
    private func fitIntoDescriptors(_ config: inout HTTPDNSService.Configuration) {
        let listeners = config.listen.count
        guard let budget = DescriptorLimit.budget(opening: listeners) else { return }
        let asked = (config.limits.maxConnections * listeners, config.upstream == nil ? 0 : config.maxUpstreamLookups)
        let (connections, lookups) = budget.fitServe(maxConnections: asked.0, maxUpstreamLookups: asked.1)
        guard connections < asked.0 || lookups < asked.1 else { return }
        config.limits.maxConnections = max(1, connections / listeners)
        if config.upstream != nil { config.maxUpstreamLookups = lookups }
        FileHandle.standardError.write(
            Data(
                ("httpdns serve: \(budget.limit) descriptors (ulimit -n) hold \(connections) connections and "
                    + "\(lookups) upstream lookups at once, not the \(asked.0) and \(asked.1) asked: serving "
                    + "with those; raise the limit for more\n").utf8
            )
        )
    }

    /// `IP:PORT`, `[V6]:PORT`; port 0 lets the system choose (printed at start); no port means 8053.
    /// `IP:PORT` (`[IPv6]:PORT`; port 0 for any free one). The port is required: an address alone once
    /// meant port 8053 without a word, and a listener on a port nobody asked for is hard to find.
    static func listenAddress(_ text: String) throws -> (IPAddress, Int) {
        if text.hasSuffix(":0"), IPAddress(text) == nil {
            return (try ResolverSpec.parseHostPort(String(text.dropLast(2)), defaultPort: 0).0, 0)
        }
        let (ip, port) = try ResolverSpec.parseHostPort(text, defaultPort: -1)
        guard port != -1 else {
            throw HTTPDNSConfigurationError(
                .invalidResolverSpec,
                "\"\(text)\" has no port; give IP:PORT, e.g. \(formatAuthority(host: ip.description, port: 8053))"
            )
        }
        return (ip, port)
    }

}
