// One client connection, whichever transport opened it (ConnectionTransport.swift): TCP to an address
// our resolver chose, TLS with the real hostname as SNI and certificate name, then HTTP/1.1 or HTTP/2
// handlers chosen by ALPN.
//
// The pipeline is completed inside the ALPN callback, before any application byte is read, so an h2
// server's SETTINGS frame is never dropped. What is here is the transports' common part: the
// connection's record, its settings, the walk through a proxy's tunnel targets, and the HTTP handlers.

import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOTLS

final class Connection: Sendable {
    let channel: any Channel
    let version: HTTPVersionUsed
    /// HTTP/2: the connection's streams (HTTP2ClientStreams.swift).
    let streams: NIOLoopBound<HTTP2ClientStreams>?
    let remote: SocketAddress
    let connectDuration: Duration
    let tlsDuration: Duration?
    /// The IPv4 address the answer gave, when `remote` is its NAT64-synthesized IPv6 form.
    let synthesizedFrom: IPAddress?
    /// HTTP/2: what the server's GOAWAY said, once it has sent one.
    let goAway: GoAwayRecord?
    /// What its TLS handshake showed (nil without TLS).
    let shown: HandshakeShown?
    /// How its address was found.
    var lookup: AddressLookup { found.withLockedValue { $0 } }
    /// Set once by the connect that made it, before the pool hands it out; the failover's re-asks are
    /// added as the race ends (ConnectionFactory+Failover.swift).
    private let found: NIOLockedValueBox<AddressLookup>

    init(
        channel: any Channel,
        ready: Ready,
        remote: SocketAddress,
        synthesizedFrom: IPAddress?,
        lookup: AddressLookup,
        connect: Duration,
        tls: Duration?
    ) {
        self.channel = channel
        self.version = ready.version
        self.streams = ready.streams
        self.goAway = ready.goAway
        self.shown = ready.shown
        self.remote = remote
        self.synthesizedFrom = synthesizedFrom
        self.found = NIOLockedValueBox(lookup)
        self.connectDuration = connect
        self.tlsDuration = tls
    }

    /// The re-asks of the connect that won with this connection.
    func noteReasks(_ reasks: [AddressReask]) {
        guard !reasks.isEmpty else { return }
        found.withLockedValue { $0.reasks = reasks }
    }

    struct Ready: Sendable {
        var version: HTTPVersionUsed
        var streams: NIOLoopBound<HTTP2ClientStreams>?
        var goAway: GoAwayRecord?
        var shown: HandshakeShown?
    }

    struct Settings: Sendable {
        /// The HTTP versions ALPN offers (https).
        var versions: HTTPVersionPolicy = .automatic
        var pins: Set<String>?
        var h2c: Bool
        var connectTimeout: Duration
        var tlsTimeout: Duration
        /// Through this proxy, by CONNECT tunnels to `tunnelTargets` (`host:port`), tried in order.
        var proxy: HTTPProxy? = nil
        var tunnelTargets: [String] = []
        /// The app decides on certificate failures (and on every connection, when it asks): the
        /// handshake then finishes whatever the chain, and the connection is refused or accepted right
        /// after it, by the app's answer.
        var serverTrust: ServerTrustEvaluation? = nil
        /// The networks the connection may use (honoured where Network.framework carries it).
        var networkAccess = NetworkAccess.unrestricted
        /// Service class, multipath and TLS versions (honoured where Network.framework carries it).
        var tuning = ConnectionTuning.standard
        /// The port to connect to when the origin's HTTPS record names another than the URL's; the
        /// URL's port stays the origin's everywhere else (the app's certificate challenge, Host).
        var port: Int? = nil
    }

    /// Connects to `url`'s host at `addresses` (nil: an IP-literal host, connected to as is; an IPv4
    /// literal reached through NAT64 comes with its synthesized address). `lookup` says how they were
    /// found. With a proxy in `settings`, through a CONNECT tunnel to each of its targets in turn, until
    /// one opens (a proxy that cannot reach one address answers 502, and the next is tried).
    static func establish(
        url: HTTPURL,
        addresses: ResolvedAddresses?,
        lookup: AddressLookup,
        settings: Settings,
        on eventLoop: any EventLoop,
        transport: some ConnectionTransport
    ) async throws -> Connection {
        guard let proxy = settings.proxy else {
            return try await transport.attempt(
                url: url,
                addresses: addresses,
                lookup: lookup,
                settings: settings,
                on: eventLoop,
                via: nil
            )
        }
        let deadline = ContinuousClock.now + settings.connectTimeout
        var lastError: (any Error)?
        for target in settings.tunnelTargets {
            var this = settings
            this.connectTimeout = deadline - ContinuousClock.now
            guard this.connectTimeout > .zero else { break }
            do {
                return try await transport.attempt(
                    url: url,
                    addresses: addresses,
                    lookup: lookup,
                    settings: this,
                    on: eventLoop,
                    via: (proxy, target)
                )
            } catch let error as HTTPEngineError {
                lastError = error
                // The proxy could not reach this address: the next may do. Anything else ends it.
                guard let refusal = error.underlying as? ProxyRefusal, [502, 503, 504].contains(refusal.status) else {
                    throw error
                }
            }
        }
        throw lastError
            ?? HTTPEngineError(.connectTimeout, "no time left to open a tunnel to \(url.host) through proxy \(proxy)")
    }

    /// The end of a TLS setup, inside the ALPN callback (reads are held back until the returned future
    /// completes): once `checked` (our checks on the certificate and the app's say) succeeds, the HTTP
    /// handlers ALPN chose go in and `ready` succeeds; when it fails, `ready` fails and the channel closes.
    static func finishSetup(
        _ channel: any Channel,
        alpn result: ALPNResult,
        after checked: EventLoopFuture<HandshakeShown>,
        ready: EventLoopPromise<Ready>
    ) -> EventLoopFuture<Void> {
        checked.flatMapThrowing { shown in
            let version: HTTPVersionUsed = result == .negotiated("h2") ? .http2 : .http1
            var made = try configure(channel, version: version)
            made.shown = shown
            ready.succeed(made)
        }.flatMapErrorThrowing { error in
            ready.fail(error)
            channel.close(promise: nil)
            throw error
        }
    }

    static func configure(_ channel: any Channel, version: HTTPVersionUsed) throws -> Ready {
        let sync = channel.pipeline.syncOperations
        switch version {
        case .http1:
            try sync.addHTTPClientHandlers()
            return Ready(version: .http1, streams: nil)
        case .http2:
            try sync.addHandler(FlushCoalescer())
            // No stream multiplexer: HTTP2ClientStreams reads every stream's frames itself.
            try sync.addHandler(
                NIOHTTP2Handler(
                    mode: .client,
                    connectionConfiguration: HTTP2Limits.connectionConfiguration(client: true),
                    streamConfiguration: .init()
                )
            )
            let goAway = GoAwayRecord()
            let streams = HTTP2ClientStreams(goAway: goAway)
            try sync.addHandler(streams)
            try sync.addHandler(HTTP2ConnectionErrorCloser())
            return Ready(
                version: .http2,
                streams: NIOLoopBound(streams, eventLoop: channel.eventLoop),
                goAway: goAway
            )
        }
    }

    var isActive: Bool { channel.isActive }

    func close() { channel.close(promise: nil) }
}
