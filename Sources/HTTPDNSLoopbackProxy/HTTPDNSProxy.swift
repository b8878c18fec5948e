// A forward proxy on loopback that resolves through HTTPDNS, for clients that never pass through
// URLSession (web views, media players, other processes): every stack has a proxy setting.
//
//   CONNECT host:port      a tunnel, opened by the engine's connection factory like the engine's own
//                          connections: resolved through the resolver and host policy (names outside the
//                          policy use LocalDNS), ranked, NAT64 where needed, raced by happy eyeballs.
//                          TLS stays end to end: the client's own SNI and certificate check are untouched.
//   GET http://host/...    absolute-form requests are sent on through the engine (same resolution), with
//                          http -> https for hosts on the upgrade list.
//   GET /proxy.pac         a PAC file sending the listed hosts through this proxy.
//
// Safe by default: loopback only (another address needs `allowNonLoopback` and credentials, checked as
// Basic Proxy-Authorization), CONNECT only to allowed ports (443, 80 and configured ones), never an open
// relay. Bounded: connections, request head size and time, tunnel idle time; a slow or malformed client
// gets an error and is closed while the others go on.

import CoreMetrics
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSListener
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A forward proxy on loopback resolving through HTTPDNS, for clients that only take a proxy
/// setting (web views, media players, other processes). Made by `HTTPDNS.startProxy(_:)`.
public final class HTTPDNSProxy: Sendable {
    /// Where the proxy listens and what it lets through.
    public struct Configuration: Sendable {
        /// The address to listen on: an IP, `127.0.0.1` by default. Another than loopback needs
        /// `allowNonLoopback` and credentials (an open relay otherwise).
        public var host = "127.0.0.1"
        /// 0: any free port (see `port`).
        public var port = 0
        /// Listen on a non-loopback address. Requires `credentials`.
        public var allowNonLoopback = false
        /// Basic proxy credentials; required off loopback, optional on it.
        public var credentials: (user: String, password: String)?
        /// Ports CONNECT may reach.
        public var allowedPorts: Set<Int> = [443, 80]
        /// Hosts whose http:// requests are sent as https://.
        package var upgradeToHTTPS: [HostPattern] = []
        /// Hosts the PAC file sends through the proxy (empty: every host).
        package var pacHosts: [HostPattern] = []
        /// Connections at most. When full, the connection idle longest (a head still arriving, a
        /// keep-alive wait) is closed for a new one; only when every connection has a request in
        /// progress or a tunnel open is the new one closed at once.
        public var maxConnections = 1024
        /// Connections at most from one client address (nil: no cap; the proxy's clients are usually
        /// all on loopback); 1 or more.
        public var maxConnectionsPerClient: Int? = nil
        /// A request head larger than this gets 431.
        var maxHeaderBytes = 16 * 1024
        /// A client must send its request head within this time (408 otherwise): the first from the
        /// accept, a kept-alive connection's next one from its first byte.
        var requestHeadTimeout: Duration = .seconds(10)
        /// A kept-alive connection with no byte of a next request for this long is closed (as nginx's
        /// keepalive_timeout; no reply, there is no request to answer).
        var keepAliveTimeout: Duration = .seconds(60)
        /// A tunnel with no traffic either way for this long is closed.
        var tunnelIdleTimeout: Duration = .seconds(300)
        var connectTimeout: Duration = .seconds(10)
        /// A forwarded http:// request's body streams on as it arrives, the client read only as fast as
        /// the origin takes it; when no byte of it arrives for this long while one is wanted, the request
        /// is given up (408 if no response has started). As nginx's client_body_timeout.
        var bodyTimeout: Duration = .seconds(60)

        /// Loopback, any free port, CONNECT to ports 443 and 80.
        public init() {}
    }

    /// One finished tunnel.
    package struct TunnelMetrics: Sendable, Hashable {
        var host: String
        var port: Int
        /// The address the tunnel went to.
        var address: String?
        /// Client to server, server to client.
        var bytesUp: Int
        var bytesDown: Int
        var duration: Duration
        /// Why it could not be opened, if it could not.
        var error: String?
    }

    let configuration: Configuration
    let channel: any Channel
    let recent: NIOLockedValueBox<[TunnelMetrics]>
    let connections: ConnectionLimiter

    /// The port listened on.
    public var port: Int { channel.localAddress?.port ?? configuration.port }
    /// The last tunnels (at most 1,000), oldest first.
    var recentTunnels: [TunnelMetrics] { recent.withLockedValue { $0 } }
    var openConnections: Int { connections.count }

    private init(
        configuration: Configuration,
        channel: any Channel,
        recent: NIOLockedValueBox<[TunnelMetrics]>,
        connections: ConnectionLimiter
    ) {
        self.configuration = configuration
        self.channel = channel
        self.recent = recent
        self.connections = connections
    }

    /// Starts the proxy. `engine` opens the tunnels and sends forwarded http:// requests; it should have
    /// `resolver` as its address source. Throws `HTTPDNSConfigurationError` with code `.invalidProxyConfiguration` for a
    /// listen address that is not an IP, or one off loopback without `allowNonLoopback` and credentials.
    package static func start(
        _ configuration: Configuration,
        resolver: HTTPDNSResolver,
        engine: HTTPEngine,
        group: any EventLoopGroup = HTTPEngine.defaultEventLoopGroup,
        logger: Logger = Logger(label: "httpdns.proxy"),
        onTunnelClosed: (@Sendable (TunnelMetrics) -> Void)? = nil
    ) async throws -> HTTPDNSProxy {
        guard let bindIP = IPAddress(configuration.host) else {
            throw HTTPDNSConfigurationError(
                .invalidProxyConfiguration,
                "listen address \"\(configuration.host)\" is not an IP address"
            )
        }
        guard configuration.maxConnections >= 1, (configuration.maxConnectionsPerClient ?? 1) >= 1 else {
            throw HTTPDNSConfigurationError(
                .invalidProxyConfiguration,
                "maxConnections \(configuration.maxConnections) and maxConnectionsPerClient "
                    + "\(configuration.maxConnectionsPerClient.map(String.init) ?? "nil") must be 1 or more"
            )
        }
        let loopback = bindIP.isIPv6 ? bindIP == IPAddress("::1")! : bindIP.bytes[0] == 127
        if !loopback {
            guard configuration.allowNonLoopback, configuration.credentials != nil else {
                throw HTTPDNSConfigurationError(
                    .invalidProxyConfiguration,
                    "refusing to listen on \(configuration.host): a proxy off loopback needs allowNonLoopback and credentials, or it would be an open relay"
                )
            }
        }
        let recent = NIOLockedValueBox<[TunnelMetrics]>([])
        // swift-metrics, counted as each tunnel ends; a no-op until the app bootstraps a backend.
        let tunnels = Counter(label: "httpdns_proxy_tunnels_total", dimensions: [("outcome", "opened")])
        let refused = Counter(label: "httpdns_proxy_tunnels_total", dimensions: [("outcome", "failed")])
        let bytesUp = Counter(label: "httpdns_proxy_tunnel_bytes_total", dimensions: [("direction", "up")])
        let bytesDown = Counter(label: "httpdns_proxy_tunnel_bytes_total", dimensions: [("direction", "down")])
        let record: @Sendable (TunnelMetrics) -> Void = { m in
            (m.error == nil ? tunnels : refused).increment()
            bytesUp.increment(by: m.bytesUp)
            bytesDown.increment(by: m.bytesDown)
            recent.withLockedValue {
                $0.append(m)
                if $0.count > 1000 { $0.removeFirst($0.count - 1000) }
            }
            logger.debug(
                "tunnel closed",
                metadata: [
                    "host": "\(m.host)", "port": "\(m.port)", "address": "\(m.address ?? "-")", "up": "\(m.bytesUp)",
                    "down": "\(m.bytesDown)", "ms": "\(m.duration.milliseconds)",
                ]
            )
            onTunnelClosed?(m)
        }
        let connections = ConnectionLimiter(
            limit: configuration.maxConnections,
            maxPerClient: configuration.maxConnectionsPerClient,
            metricsPrefix: "httpdns_proxy"
        )
        let shared = ProxyShared(
            configuration: configuration,
            resolver: resolver,
            engine: engine,
            logger: logger,
            record: record,
            pac: { port in pacFile(configuration, port: port) }
        )
        let channel = try await ProxyListener.bind(
            host: configuration.host,
            port: configuration.port,
            group: group,
            connections: connections
        ) { channel in
            connections.admit(channel).flatMap { slot in
                guard let slot else { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    // A client that does not read stops being read from.
                    try sync.addHandler(BackPressureHandler())
                    try sync.addHandler(HeadLimiter(maxBytes: configuration.maxHeaderBytes))
                    try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)))
                    try sync.addHandler(HTTPResponseEncoder())
                    try sync.addHandler(ProxyHandler(shared: shared, slot: slot))
                }
            }
        }
        return HTTPDNSProxy(configuration: configuration, channel: channel, recent: recent, connections: connections)
    }

    /// Where the proxy serves its PAC file (`http://HOST:PORT/proxy.pac`), for clients configured by
    /// a proxy auto-config URL (web views, players, the system's proxy settings).
    public var pacURL: URL {
        URL(string: "http://\(formatAuthority(host: configuration.host, port: port))/proxy.pac")!
    }

    /// Whether the listener still accepts connections. On iOS the system may take a suspended app's
    /// listening socket back; the proxy's tunnels go on, but no new client gets in.
    var isListening: Bool { channel.isActive }
    /// Succeeds when the listener has closed, by `stop()` or because the system took its socket.
    var listenerClosed: EventLoopFuture<Void> { channel.closeFuture }

    /// Closes the listener alone, as the system does when it takes a suspended app's socket back: open
    /// tunnels and forwarded requests go on. For tests of what keeps the proxy running.
    func closeListener() async {
        try? await channel.close()
    }

    /// Stops listening and closes every open tunnel and forwarded request.
    public func stop() async {
        try? await channel.close()
        await connections.closeAll()
    }

    /// The PAC file served at /proxy.pac.
    static func pacFile(_ configuration: Configuration, port: Int) -> String {
        let proxy = "PROXY \(formatAuthority(host: configuration.host, port: port))"
        guard !configuration.pacHosts.isEmpty, !configuration.pacHosts.contains(where: { $0.description == "*" }) else {
            return "function FindProxyForURL(url, host) {\n  return \"\(proxy)\";\n}\n"
        }
        let tests = configuration.pacHosts.map { p -> String in
            let d = p.description
            return d.hasPrefix("*.") ? "dnsDomainIs(host, \"\(d.dropFirst())\")" : "host == \"\(d)\""
        }
        return
            "function FindProxyForURL(url, host) {\n  if (\(tests.joined(separator: " ||\n      "))) return \"\(proxy)\";\n  return \"DIRECT\";\n}\n"
    }
}

struct ProxyShared: Sendable {
    var configuration: HTTPDNSProxy.Configuration
    var resolver: HTTPDNSResolver
    var engine: HTTPEngine
    var logger: Logger
    var record: @Sendable (HTTPDNSProxy.TunnelMetrics) -> Void
    var pac: @Sendable (Int) -> String
}

/// Sits before the HTTP decoder and tells `ProxyHandler` (by a `ProxyClientEvent` through the pipeline)
/// what only the raw bytes show; the handler's state machine decides what to do about it.
///
/// - The size of the connection's first request head, counted up to its blank line by
///   `RequestHeadCounter` (body and tunnel bytes after it are not counted): past the limit it reports
///   `.headTooLarge` and drops every further byte, so the decoder never sees the rest of the head.
/// - Every read, as `.bytesArrived`: a kept-alive connection's next request has started.
/// - A half-close, which it reports as `.inputClosed` instead of passing NIO's event on: the decoder
///   drops the bytes it buffered behind a CONNECT head once it has seen EOF, so a client that sends
///   `CONNECT …` + its first bytes + shutdown(SHUT_WR) before the 200 would lose them. The tunnel passes
///   the half-close to its target after those bytes instead.
final class HeadLimiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private var counter: RequestHeadCounter

    init(maxBytes: Int) { self.counter = RequestHeadCounter(maxBytes: maxBytes) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            context.fireUserInboundEventTriggered(ProxyClientEvent.inputClosed)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Before the bytes themselves: a head they complete stops the timer this may start.
        context.fireUserInboundEventTriggered(ProxyClientEvent.bytesArrived)
        switch counter.received(unwrapInboundIn(data).readableBytesView) {
        case .pass:
            context.fireChannelRead(data)
        case .tooLarge:
            context.fireUserInboundEventTriggered(ProxyClientEvent.headTooLarge)
        case .drop:
            break
        }
    }
}

/// What `HeadLimiter` reports to `ProxyHandler`, past the HTTP decoder (which passes on events it does
/// not know).
enum ProxyClientEvent: Equatable {
    case bytesArrived
    case headTooLarge
    case inputClosed
}
