import ArgumentParser
import Foundation
import HTTPDNSKit
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOSSL

/// The resolver options shared by every subcommand that resolves names (resolve, fetch, proxy, bench).
package struct ResolverOptions: ParsableArguments {
    package init() {}

    @Option(
        name: .customLong("resolver"),
        help: ArgumentHelp(
            "HTTPDNS resolver, repeatable, in order of preference: \(ResolverSpec.kinds).",
            valueName: "SPEC"
        )
    )
    package var resolvers: [String] = []

    @Option(
        name: .customLong("bootstrap"),
        help: ArgumentHelp(
            "IP of a resolver named by hostname, repeatable (no DNS is used to reach a resolver).",
            valueName: "NAME=IP"
        )
    )
    var bootstrap: [String] = []

    @Option(help: ArgumentHelp("PEM file of extra trusted CA certificates for TLS to resolvers.", valueName: "FILE"))
    var cacert: String?

    @Option(
        name: .customLong("local-dns"),
        help: ArgumentHelp(
            "The network's own resolver, for names outside --only and as the fallback.",
            valueName: "SPEC"
        )
    )
    package var localDNS: String = "system"

    @Flag(name: .customLong("no-fallback"), help: "Never fall back to --local-dns when every resolver fails.")
    var noFallback = false

    @Option(
        parsing: .unconditional,  // so that "-1" is a value, refused as negative, not a missing one
        help: ArgumentHelp("Bound on each lookup, every resolver and the fallback included.", valueName: "SECONDS")
    )
    var timeout: Double = 5

    @Option(
        name: .customLong("only"),
        help: ArgumentHelp(
            "Use HTTPDNS only for names matching PATTERN (repeatable; wildcards like *.example.com). Default: every name.",
            valueName: "PATTERN"
        )
    )
    var only: [String] = []

    @Option(
        name: .customLong("except"),
        help: ArgumentHelp("Never use HTTPDNS for names matching PATTERN (repeatable).", valueName: "PATTERN")
    )
    var except: [String] = []

    @Option(
        name: .customLong("strict"),
        help: ArgumentHelp("Names matching PATTERN never fall back to --local-dns (repeatable).", valueName: "PATTERN")
    )
    var strict: [String] = []

    @Option(
        name: .customLong("allow-private"),
        help: ArgumentHelp(
            "Public names matching PATTERN may resolve to private/loopback addresses (repeatable).",
            valueName: "PATTERN"
        )
    )
    var allowPrivate: [String] = []

    @Option(
        name: .customLong("cache-file"),
        help: ArgumentHelp("Keep the DNS cache in FILE across runs.", valueName: "FILE")
    )
    var cacheFile: String?

    @Option(
        name: .customLong("proxy"),
        help: ArgumentHelp(
            "HTTP proxy for every connection (CONNECT tunnels to the HTTPDNS addresses), as curl's -x; \"\" for none. Default: https_proxy, http_proxy, all_proxy. Credentials only from those variables.",
            valueName: "URL"
        )
    )
    var proxy: String?

    @Option(
        name: .customLong("noproxy"),
        help: ArgumentHelp(
            "Hosts that go direct, comma-separated (example.com covers its subdomains; * for all), as curl's --noproxy. Default: no_proxy.",
            valueName: "LIST"
        )
    )
    var noProxy: String?

    @Flag(
        name: .customLong("proxy-resolves"),
        help: "Let the proxy resolve names: tunnels name the host instead of the address HTTPDNS gave."
    )
    var proxyResolves = false

    @Flag(
        name: .customLong("tcp-fastopen"),
        help:
            "Use TCP Fast Open (as curl's --tcp-fastopen) for the connections to the resolvers and the origins: to a server seen before that offers it, the TLS ClientHello goes in the SYN, one round trip less. Never request data early."
    )
    var tcpFastOpen = false

    @Option(
        name: .customLong("serve-expired"),
        parsing: .unconditional,
        help: ArgumentHelp(
            "Serve an answer up to SECONDS past its TTL at once while one refresh runs (default 60; up to 604800, 7 days; 0: never). With --cache-file, a later run starts from the last good answer.",
            valueName: "SECONDS"
        )
    )
    var serveExpired: Double?

    @Option(
        name: .customLong("client-subnet"),
        help: ArgumentHelp(
            "Ask on behalf of this client subnet: an EDNS Client Subnet option in DoH and dns: queries, ip= to DNSPod and Alibaba (never to --local-dns). An address alone means /24 (IPv4) or /56 (IPv6). Default: none is sent.",
            valueName: "CIDR"
        )
    )
    var clientSubnet: String?

    @Flag(
        name: .customLong("service-list"),
        help:
            "Fetch the vendor's service-IP list (Alibaba /ACCOUNT/ss, DNSPod /conf) for json: account and dnspod: credentialed resolvers, and query the listed addresses, the resolver's own last. Saved beside --cache-file."
    )
    var serviceList = false

    @Option(
        name: .customLong("service-list-region"),
        help: ArgumentHelp(
            "Alibaba's region= for --service-list (default global: chosen by proximity).",
            valueName: "REGION"
        )
    )
    var serviceListRegion: String?

    @Option(
        name: .customLong("network-id"),
        help: ArgumentHelp(
            "Identifier of the current network; cached answers are kept per network. Default: derived from the network's addresses.",
            valueName: "ID"
        )
    )
    var networkID: String?

    @Option(
        name: .customLong("nat64"),
        help: ArgumentHelp(
            "On a network with no IPv4 route: discover the NAT64 prefix (auto, RFC 7050), never synthesize (off), or use PREFIX (e.g. 64:ff9b::/96).",
            valueName: "auto|off|PREFIX"
        )
    )
    var nat64: String = "auto"

    @Flag(name: .customLong("debug"), help: "Log the resolver's decisions on stderr.")
    package var debug = false

    @OptionGroup(title: "Commercial HTTPDNS credentials (secrets from files or the environment)")
    var credentials: CredentialOptions

    package func validate() throws {
        _ = try parsed()
    }

    package struct Parsed {
        var resolvers: [ResolverSpec]
        var localDNS: ResolverSpec
        var bootstrap: [String: [IPAddress]]
        package var policy: HostPolicy
    }

    /// Parses every option, turning a bad value into a usage error (exit 64) that names the flag.
    package func parsed() throws -> Parsed {
        func spec(_ text: String, flag: String) throws -> ResolverSpec {
            do {
                return try ResolverSpec(parsing: text)
            } catch {
                throw ValidationError("\(flag): \(error)")
            }
        }
        func patterns(_ texts: [String], flag: String) throws -> [HostPattern] {
            try texts.map { text in
                do { return try HostPattern(text) } catch { throw ValidationError("\(flag): \(error)") }
            }
        }
        let resolvers = try credentials.apply(to: try self.resolvers.map { try spec($0, flag: "--resolver") })
        let local = try spec(localDNS, flag: "--local-dns")
        var bootstrap: [String: [IPAddress]] = [:]
        for entry in self.bootstrap {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let ip = IPAddress(parts[1]), let name = try? validatedHostname(parts[0]) else {
                throw ValidationError("--bootstrap: \"\(entry)\" is not NAME=IP (e.g. --bootstrap doh.test=127.0.0.1)")
            }
            bootstrap[name, default: []].append(ip)
        }
        _ = try seconds(timeout, flag: "--timeout", range: 0.001...600)
        if let cacert, !FileManager.default.isReadableFile(atPath: cacert) {
            throw ValidationError("--cacert: cannot read \(cacert); give a PEM file of CA certificates")
        }
        _ = try serveExpiredWindow()
        _ = try subnet()
        _ = try serviceListSettings()
        _ = try proxySettings()
        _ = try nat64Mode()
        let policy = HostPolicy(
            only: try patterns(only.isEmpty ? ["*"] : only, flag: "--only"),
            except: try patterns(except, flag: "--except"),
            strict: try patterns(strict, flag: "--strict"),
            allowNonGlobal: try patterns(allowPrivate, flag: "--allow-private")
        )
        for (r, flag) in resolvers.map({ ($0, "--resolver") }) + [(local, "--local-dns")] {
            if let e = r.endpoint, e.bootstrapAddresses(in: bootstrap)?.isEmpty == true {
                throw ValidationError(
                    "\(flag): \(e.host) has no address; add --bootstrap \(e.host)=IP (resolvers are reached without DNS)"
                )
            }
        }
        return Parsed(resolvers: resolvers, localDNS: local, bootstrap: bootstrap, policy: policy)
    }

    /// The proxies to use: `--proxy` (for every URL; `""` for none), else curl's environment variables;
    /// `--noproxy` replaces `no_proxy`. A usage error naming the flag (or variable) when one is unusable;
    /// `--proxy` may not carry a password (a command line is readable by every process).
    func proxySettings(environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> HTTPProxySettings?
    {
        var settings: HTTPProxySettings?
        if let proxy {
            guard !proxy.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
            let parsed: HTTPProxy
            do { parsed = try HTTPProxy(url: proxy) } catch { throw ValidationError("--proxy: \(error)") }
            if parsed.password != nil {
                throw ValidationError(
                    "--proxy: a password must not be a flag value (any process can read a command line); set https_proxy=http://USER:PASSWORD@HOST:PORT in the environment instead"
                )
            }
            settings = HTTPProxySettings(all: parsed)
            settings?.noProxy = HTTPProxySettings.noProxyList(environment["no_proxy"] ?? environment["NO_PROXY"] ?? "")
        } else {
            do {
                settings = try HTTPProxySettings.environment(environment)
            } catch {
                throw ValidationError("https_proxy / http_proxy / all_proxy: \(error)")
            }
        }
        guard var settings else { return nil }
        if let noProxy { settings.noProxy = HTTPProxySettings.noProxyList(noProxy) }
        settings.proxyResolvesNames = proxyResolves
        return settings
    }

    /// A usage error when no `--resolver` is given and `urls` name a host (IP literals need none), as
    /// `resolve` refuses: without one every name would go to the network's own resolver.
    package func requireResolver(for urls: [String]) throws {
        guard resolvers.isEmpty else { return }
        let named = urls.contains { url in (try? HTTPURL(url)).map { IPAddress($0.host) == nil } ?? false }
        guard named else { return }
        throw ValidationError("--resolver: give at least one, e.g. --resolver doh:https://127.0.0.1:8473/dns-query")
    }

    /// The --serve-expired window, nil when not given.
    func subnet() throws -> ClientSubnet? {
        do {
            return try clientSubnet.map(ClientSubnet.init)
        } catch let error as HTTPDNSConfigurationError {
            throw ValidationError("--client-subnet: \(error.message)")
        }
    }

    func serveExpiredWindow() throws -> Duration? {
        try serveExpired.map { try seconds($0, flag: "--serve-expired", range: 0...604_800) }
    }

    /// The --nat64 value.
    func nat64Mode() throws -> NAT64Mode {
        switch nat64 {
        case "auto": return .discover
        case "off": return .off
        default:
            guard let prefix = NAT64Prefix(parsing: nat64) else {
                throw ValidationError(
                    "--nat64: \"\(nat64)\" is not auto, off or an IPv6 prefix of length 32, 40, 48, 56, 64 or 96 with bits 64-71 zero (e.g. 64:ff9b::/96)"
                )
            }
            return .prefix(prefix)
        }
    }

    /// `--service-list` and its region.
    func serviceListSettings() throws -> ServiceListSettings? {
        guard serviceList else {
            if serviceListRegion != nil { throw ValidationError("--service-list-region: give --service-list too") }
            return nil
        }
        let region = serviceListRegion ?? "global"
        guard !region.isEmpty, region.utf8.count <= 32, region.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" })
        else {
            throw ValidationError("--service-list-region: \"\(region)\" is not a region name such as global, cn or sg")
        }
        return ServiceListSettings(region: region)
    }

    /// Where `--otlp-endpoint`'s exporter reports its own trouble (a collector that cannot be reached).
    package var tracingLogger: Logger {
        var logger = Logger(label: "httpdns.otlp")
        logger.logLevel = debug ? .debug : .warning
        return logger
    }

    /// Before a one-shot command's first lookup: with `--service-list`, each provider's list is fetched
    /// now when none is saved beside `--cache-file` or the saved one is due, as the vendors' SDKs fetch
    /// theirs at start, so even a run without a cache file uses the service's addresses. A
    /// long-running command (proxy) leaves it to the background fetch its first query starts.
    package func fetchServiceLists(_ httpdns: HTTPDNS) async {
        guard serviceList else { return }
        await httpdns.resolver.refreshServiceLists()
    }

    /// The `HTTPDNS` these options describe, made through the front door as an app makes it: the
    /// resolver, the engine that reaches the resolvers and the engine for the command's own requests.
    /// `watch`: follow the operating system's network-change notices (long-running commands). `tweak`
    /// sets what only the command decides (HTTP versions, pins, the total timeout, upgrades).
    package func makeHTTPDNS(
        watch: Bool = false,
        _ tweak: (inout HTTPDNS.Configuration) throws -> Void = { _ in }
    ) throws -> HTTPDNS {
        let p = try parsed()
        var logger = Logger(label: "httpdns")
        logger.logLevel = debug ? .debug : .warning
        var config = HTTPDNS.Configuration(resolvers: p.resolvers, policy: p.policy)
        config.localDNS = p.localDNS
        config.fallbackToLocalDNS = !noFallback
        config.timeouts.lookup = try seconds(timeout, flag: "--timeout", range: 0.001...600)
        config.bootstrap = p.bootstrap
        config.persistencePath = cacheFile
        if let window = try serveExpiredWindow() { config.cache.serveExpired = window }
        config.network.proxy = try proxySettings()
        config.network.tcpFastOpen = tcpFastOpen
        config.clientSubnet = try subnet()
        config.serviceLists = try serviceListSettings()
        config.network.monitor.networkID = networkID
        config.network.monitor.nat64 = try nat64Mode()
        // Only with --otlp-endpoint is there a tracer; then the command's requests carry its trace
        // context, so a server that traces too (`httpdns serve --otlp-endpoint`) joins the same trace.
        config.tracing.propagatesContext = true
        config.network.watchesChanges = watch
        // A command runs because its user asked for traffic: the resolver's connection is opened at
        // once, as before (an app's HTTPDNS waits for its first lookup; see connectsResolverAtStart).
        config.connectsResolverAtStart = true
        config.tls.trustedCertificateFiles = cacert.map { [$0] } ?? []
        try tweak(&config)
        do {
            return try HTTPDNS(config, logger: logger)
        } catch let error as HTTPDNSConfigurationError where error.code == .invalidCertificate {
            throw ValidationError("--cacert: \(error.message)")
        }
    }
}
