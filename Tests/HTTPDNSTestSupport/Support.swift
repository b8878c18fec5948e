/// A clock the test moves by hand.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSKit
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

final class ManualClock: WallClock {
    private let current = NIOLockedValueBox(Timestamp.seconds(1_700_000_000))
    func now() -> Timestamp { current.withLockedValue { $0 } }
    func advance(_ d: Duration) { current.withLockedValue { $0 = $0 + d } }
}

/// The real peers started by scripts/test.sh (kresd, dnsmasq). Nil when they are not running; under
/// CI=true the tests that need them run anyway and fail on the missing environment.
struct Peers {
    var ca: String
    var kresdDNS: (IPAddress, Int)
    var doh2Port: Int
    var dohLegacyPort: Int
    var hijacker: (IPAddress, Int)
    var nginxTLS: Int
    var nginxHTTP: Int
    var nginxH2C: Int
    /// a.test over HTTPS on a port whose ALPN takes only http/1.1.
    var nginxH1TLS: Int
    var www: String
    var netns: String
    /// The OTLP/HTTP receiver's base URL, and the file it writes each decoded span to (a JSON line).
    var otlpEndpoint: String
    var otlpSpans: String
    /// BIND 9.18, authoritative for svcb.test (Tests/Fixtures/peers/https.zone): Do53, and DoH's port.
    var bindDNS: (IPAddress, Int)
    var bindDoHPort: Int

    static let current: Peers? = {
        let env = ProcessInfo.processInfo.environment
        guard env["HTTPDNS_PEERS"] == "1", let ca = env["HTTPDNS_CA"],
            let dns = env["HTTPDNS_KRESD_DNS"].flatMap({ try? ResolverSpec.parseHostPort($0, defaultPort: 53) }),
            let doh2 = env["HTTPDNS_KRESD_DOH2_PORT"].flatMap(Int.init),
            let legacy = env["HTTPDNS_KRESD_DOH_LEGACY_PORT"].flatMap(Int.init),
            let hj = env["HTTPDNS_HIJACKER"].flatMap({ try? ResolverSpec.parseHostPort($0, defaultPort: 53) }),
            let tls = env["HTTPDNS_NGINX_TLS_PORT"].flatMap(Int.init),
            let http = env["HTTPDNS_NGINX_HTTP_PORT"].flatMap(Int.init),
            let h2c = env["HTTPDNS_NGINX_H2C_PORT"].flatMap(Int.init),
            let h1TLS = env["HTTPDNS_NGINX_H1_TLS_PORT"].flatMap(Int.init),
            let www = env["HTTPDNS_WWW"], let netns = env["HTTPDNS_NETNS"],
            let otlpEndpoint = env["HTTPDNS_OTLP_ENDPOINT"], let otlpSpans = env["HTTPDNS_OTLP_SPANS"],
            let bind = env["HTTPDNS_BIND_DNS"].flatMap({ try? ResolverSpec.parseHostPort($0, defaultPort: 53) }),
            let bindDoH = env["HTTPDNS_BIND_DOH_PORT"].flatMap(Int.init)
        else { return nil }
        return Peers(
            ca: ca,
            kresdDNS: dns,
            doh2Port: doh2,
            dohLegacyPort: legacy,
            hijacker: hj,
            nginxTLS: tls,
            nginxHTTP: http,
            nginxH2C: h2c,
            nginxH1TLS: h1TLS,
            www: www,
            netns: netns,
            otlpEndpoint: otlpEndpoint,
            otlpSpans: otlpSpans,
            bindDNS: bind,
            bindDoHPort: bindDoH
        )
    }()

    /// Run peer tests when the peers are there, and always under CI (where their absence must fail).
    static let shouldRun = current != nil || ProcessInfo.processInfo.environment["CI"] == "true"

    static func require() throws -> Peers {
        try #require(current, "real peers are not running: use scripts/test.sh, which starts kresd and dnsmasq")
    }

    func engine() throws -> HTTPEngine {
        try HTTPEngine(tls: HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: ca)))
    }

    /// The HTTPDNS resolver over kresd DoH, with the dnsmasq hijacker as LocalDNS.
    func resolver() throws -> HTTPDNSResolver {
        var config = ResolverConfiguration(providers: [
            .doh(try ResolverEndpoint(url: "https://127.0.0.1:\(doh2Port)/dns-query"), usePOST: false)
        ])
        config.policy = .all
        config.fallbackToLocalDNS = false
        config.localDNS = .dns(hijacker.0, port: hijacker.1)
        // Not a test of timeouts: a bound a starved 2-core machine cannot miss.
        config.timeout = .seconds(60)
        return try HTTPDNSResolver(configuration: config, engine: try engine(), logger: testLogger)
    }

    /// An app engine resolving through `resolver()`.
    func appEngine(_ tweak: (inout HTTPEngine.Configuration) -> Void = { _ in }) throws -> HTTPEngine {
        var config = HTTPEngine.Configuration()
        config.tls = HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: ca))
        config.timeouts.request = .seconds(60)
        tweak(&config)
        let resolver = try resolver()
        return try HTTPEngine(configuration: config, addressSource: resolver, path: resolver.path, logger: testLogger)
    }

    func url(_ host: String, _ path: String) -> String { "https://\(host):\(nginxTLS)\(path)" }
}

let testLogger: Logger = {
    var l = Logger(label: "test")
    l.logLevel = .critical
    return l
}()

func makeResolver(
    _ providers: [any DNSProvider],
    local: (any DNSProvider)? = nil,
    clock: any WallClock = SystemWallClock(),
    _ tweak: (inout ResolverConfiguration) -> Void = { _ in }
) -> HTTPDNSResolver {
    var config = ResolverConfiguration()
    config.policy = .all
    // Generous: plain `swift test` runs every suite at once, and on 2 cores with busy loops beside it 10 s
    // was missed. Tests of the deadline set their own in `tweak`.
    config.timeout = .seconds(60)
    config.cache.minTTL = 1
    tweak(&config)
    return HTTPDNSResolver(
        configuration: config,
        providers: providers,
        localDNS: local ?? SystemProvider(),
        clock: clock,
        logger: testLogger
    )
}

/// A UDP DNS server answering `answer` for every name (A and AAAA by family).
func startDNS(_ addresses: [String], ttl: UInt32 = 60, host: String = "127.0.0.1", options: DNSServer.Options = .init())
    async throws -> DNSServer
{
    let ips = addresses.map { IPAddress($0)! }
    return try await DNSServer.start(host: host, options: options) { name, _ in
        name.hasPrefix("nx.") ? .nxdomain : DNSServer.Answer(addresses: ips, ttl: ttl)
    }
}

func do53(_ server: DNSServer) throws -> Do53Provider {
    try Do53Provider(server: IPAddress(server.host)!, port: server.port)
}

/// A UDP socket that reads and never answers: a blackholed resolver.
func startBlackhole() async throws -> (any Channel, Int) {
    let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(
        host: "127.0.0.1",
        port: 0
    ).get()
    return (channel, channel.localAddress!.port!)
}

/// A tiny loopback HTTP/1.1 server for the providers no real peer speaks here (DNSPod text, Alibaba
/// JSON, JSON DoH). It answers from a closure and counts requests.
final class HTTPFixtureServer: Sendable {
    typealias Handler =
        @Sendable (_ path: String, _ query: [String: String], _ headers: HTTPHeaders) -> (
            HTTPResponseStatus, String, [UInt8]
        )
    let channel: any Channel
    private let log: NIOLockedValueBox<[String]>
    var port: Int { channel.localAddress!.port! }
    /// The request targets received so far.
    var requestLog: [String] { log.withLockedValue { $0 } }

    private init(channel: any Channel, log: NIOLockedValueBox<[String]>) {
        self.channel = channel
        self.log = log
    }

    /// Listens on `host:port` (port 0: any free one).
    static func start(
        host: String = "127.0.0.1",
        port: Int = 0,
        _ handler: @escaping Handler
    ) async throws -> HTTPFixtureServer {
        let log = NIOLockedValueBox<[String]>([])
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(FixtureHandler(handler: handler, log: log))
                }
            }
            .bind(host: host, port: port).get()
        return HTTPFixtureServer(channel: channel, log: log)
    }

    func stop() async { try? await channel.close() }
}

private final class FixtureHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let handler: HTTPFixtureServer.Handler
    let log: NIOLockedValueBox<[String]>
    var head: HTTPRequestHead?

    init(handler: @escaping HTTPFixtureServer.Handler, log: NIOLockedValueBox<[String]>) {
        self.handler = handler
        self.log = log
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h): head = h
        case .body: break
        case .end:
            guard let head else { return }
            log.withLockedValue { $0.append(head.uri) }
            let components = URLComponents(string: head.uri)
            var query: [String: String] = [:]
            for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
            let (status, type, body) = handler(components?.path ?? head.uri, query, head.headers)
            var headers = HTTPHeaders([("content-type", type), ("content-length", "\(body.count)")])
            headers.add(name: "connection", value: "close")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
                promise: nil
            )
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

/// Runs `body` with an `HTTPDNS` asking an in-process DNS server that answers 127.0.0.1 for every name
/// (and NXDOMAIN for `nx.*`), for the names under `.test`; both are stopped afterwards.
func withHTTPDNS(_ body: (HTTPDNS) async throws -> Void) async throws {
    let dns = try await startDNS(["127.0.0.1"])
    var configuration = HTTPDNS.Configuration(
        resolvers: [try ResolverSpec(parsing: "dns:127.0.0.1:\(dns.port)")],
        policy: try HostPolicy(only: ["*.test"])
    )
    // Not a test of timeouts: a bound that a starved 2-core machine running the whole parallel suite
    // (hostile floods included) cannot miss. A lookup that never answers still ends the test.
    configuration.timeouts.lookup = .seconds(60)
    let httpdns = try HTTPDNS(configuration)
    do {
        try await body(httpdns)
    } catch {
        await httpdns.shutdown()
        await dns.stop()
        throw error
    }
    await httpdns.shutdown()
    await dns.stop()
}
