// `httpdns proxy`: the loopback forward proxy, until SIGINT/SIGTERM.

import ArgumentParser
import HTTPDNSCommandLine
import HTTPDNSOTLP
import HTTPDNSKit
import HTTPDNSLoopbackProxy
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSServer
import Logging

struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "A forward proxy on loopback whose connections go to the addresses HTTPDNS gives.",
        discussion: """
            CONNECT tunnels for https (TLS stays end to end), absolute-form http:// requests through the \
            engine, a PAC file at /proxy.pac. Example:
              httpdns proxy --listen 127.0.0.1:8118 --resolver doh:https://127.0.0.1:8473/dns-query --cacert ca.pem
              curl -x http://127.0.0.1:8118 https://a.test:8443/
            """
    )

    @Option(
        name: .customLong("listen"),
        help: ArgumentHelp("Address to listen on (port 0: any free port).", valueName: "IP:PORT")
    )
    var listen = "127.0.0.1:8118"

    @Option(
        name: .customLong("allow-port"),
        help: ArgumentHelp("Port CONNECT may reach besides 443 and 80, repeatable.", valueName: "N")
    )
    var allowPorts: [Int] = []

    @Option(
        name: .customLong("upgrade"),
        help: ArgumentHelp("Send http:// requests for matching hosts as https://, repeatable.", valueName: "PATTERN")
    )
    var upgrade: [String] = []

    @Flag(name: .customLong("public"), help: "Allow a non-loopback --listen address (needs --proxy-user-file).")
    var allowPublic = false

    @Option(
        name: .customLong("proxy-user-file"),
        help: ArgumentHelp(
            "Require Basic proxy authentication with the USER:PASSWORD this file holds; or set \(Self.userVariable).",
            valueName: "FILE"
        )
    )
    var proxyUserFile: String?

    /// Refused: a password is a secret, and a command line is readable by every process on the machine.
    /// Kept so that the old form gets an error saying what to use instead.
    @Option(name: .customLong("proxy-user"), help: .hidden)
    var proxyUser: String?

    static let userVariable = "HTTPDNS_PROXY_USER"

    @Option(
        name: .customLong("max-connections"),
        help:
            "Client connections at most; when full, the connection idle longest (no request in progress, no tunnel) makes room."
    )
    var maxConnections = 1024

    @Option(
        name: .customLong("max-connections-per-client"),
        help:
            "Client connections at most from one address (default: no cap; on loopback every client has the same address)."
    )
    var maxConnectionsPerClient: Int?

    @OptionGroup var resolver: ResolverOptions
    @OptionGroup var tracing: TracingOptions

    func validate() throws {
        do {
            _ = try ServeCommand.listenAddress(listen)
        } catch {
            throw ValidationError("--listen: \(error)")
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections: give a positive number") }
        if let n = maxConnectionsPerClient, n <= 0 {
            throw ValidationError("--max-connections-per-client: give a positive number")
        }
        for p in allowPorts where !(1...65535).contains(p) { throw ValidationError("--allow-port: \(p) is not a port") }
        for u in upgrade {
            do { _ = try HostPattern(u) } catch { throw ValidationError("--upgrade: \(error)") }
        }
        if proxyUser != nil {
            throw ValidationError(
                "--proxy-user: a password must not be a flag value (any process can read a command line); put USER:PASSWORD in a file and pass --proxy-user-file FILE, or set \(Self.userVariable)"
            )
        }
        _ = try credentials()
        guard !resolver.resolvers.isEmpty else {
            throw ValidationError("--resolver: give at least one, e.g. --resolver doh:https://127.0.0.1:8473/dns-query")
        }
    }

    func run() async throws {
        try await tracing.exporting(logger: resolver.tracingLogger) { try await serveProxy() }
    }

    private func serveProxy() async throws {
        // A proxy runs for long: it follows network changes by itself (the path, NAT64, the cache
        // partition, pooled connections, re-resolving the names in use).
        let httpdns = try self.resolver.makeHTTPDNS(watch: true)
        var config = HTTPDNSProxy.Configuration()
        let (ip, port) = try ServeCommand.listenAddress(listen)
        config.host = ip.description
        config.port = port
        config.allowedPorts.formUnion(allowPorts)
        config.upgradeToHTTPS = try upgrade.map { try HostPattern($0) }
        config.pacHosts = try self.resolver.parsed().policy.only
        config.allowNonLoopback = allowPublic
        config.maxConnections = maxConnections
        // DescriptorBudget.swift: a process out of descriptors can crash in code it does not control.
        if let budget = DescriptorLimit.budget(opening: 1),
            case let fitted = budget.fitProxy(maxConnections: maxConnections), fitted < maxConnections
        {
            config.maxConnections = fitted
            FileHandle.standardError.write(
                Data(
                    ("httpdns proxy: \(budget.limit) descriptors (ulimit -n) hold \(config.maxConnections) "
                        + "connections at once, not the \(maxConnections) asked: serving with those; raise the "
                        + "limit for more\n").utf8
                )
            )
        }
        config.maxConnectionsPerClient = maxConnectionsPerClient
        let credentials = try credentials()
        config.credentials = credentials
        var logger = Logger(label: "httpdns.proxy")
        logger.logLevel = self.resolver.debug ? .debug : .info
        let proxy: HTTPDNSProxy
        do {
            proxy = try await HTTPDNSProxy.start(
                config,
                resolver: httpdns.resolver,
                engine: httpdns.engine,
                logger: logger
            )
        } catch {
            var advice = ""
            let refused = (error as? HTTPDNSConfigurationError)?.code == .invalidProxyConfiguration
            if refused, !allowPublic || credentials == nil {
                advice = " (to listen off loopback, pass --public and --proxy-user-file FILE holding USER:PASSWORD)"
            }
            FileHandle.standardError.write(Data("httpdns proxy: \(error)\(advice)\n".utf8))
            throw ExitCode(1)
        }
        let authority = formatAuthority(host: config.host, port: proxy.port)
        print("httpdns proxy: listening on http://\(authority) (PAC: \(proxy.pacURL.absoluteString))")
        fflush(nil)
        try await runUntilSignalled(logger: logger) {
            await proxy.stop()
            await httpdns.shutdown()
        }
    }

    /// The Basic credentials from `--proxy-user-file`, else from the environment; nil when neither is
    /// given. A usage error naming the flag (or variable) when they are not `USER:PASSWORD`; no message
    /// carries the secret.
    func credentials(environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> (user: String, password: String)?
    {
        let source = proxyUserFile != nil ? "--proxy-user-file" : Self.userVariable
        let secret: ResolverSecret
        if let proxyUserFile {
            secret = try readSecret(proxyUserFile, flag: "--proxy-user-file")
        } else if let value = environment[Self.userVariable] {
            secret = ResolverSecret(value)
        } else {
            return nil
        }
        let text = secret.text  // surrounding white space already removed
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex, text.index(after: colon) != text.endIndex,
            !text.contains(where: { $0.isNewline })
        else {
            throw ValidationError("\(source): give one line USER:PASSWORD, both parts non-empty")
        }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }
}
