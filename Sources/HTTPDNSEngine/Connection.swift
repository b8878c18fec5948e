// One client connection: TCP through NIO's happy-eyeballs connector (RFC 8305: IPv6 and IPv4
// interleaved, the next attempt 250 ms after the last or at once on failure) over the addresses we
// give it, TLS with the real hostname as SNI, then HTTP/1.1 or HTTP/2 handlers chosen by ALPN.
//
// The pipeline is completed inside the ALPN callback, before any application byte is read, so an h2
// server's SETTINGS frame is never dropped. After BoringSSL has verified the chain, the certificate's
// DNS names are checked strictly against the hostname (see verifyIdentity) and pins are applied.
//
// TLS failures get their code from error values, never from error text: BoringSSL's verdict on the
// chain is observed through its per-certificate callback (ChainVerdict), our own identity checks throw
// an IdentityFailure with a kind, and NIOSSL's hostname check has its own error value.

import Crypto
import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import SwiftASN1
import X509

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
    /// How its address was found.
    let lookup: AddressLookup

    private init(
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
        self.remote = remote
        self.synthesizedFrom = synthesizedFrom
        self.lookup = lookup
        self.connectDuration = connect
        self.tlsDuration = tls
    }

    struct Ready: Sendable {
        var version: HTTPVersionUsed
        var streams: NIOLoopBound<HTTP2ClientStreams>?
        var goAway: GoAwayRecord?
    }

    struct Settings: Sendable {
        var sslContext: NIOSSLContext?
        var pins: Set<String>?
        var h2c: Bool
        var connectTimeout: Duration
        var tlsTimeout: Duration
        /// Through this proxy, by CONNECT tunnels to `tunnelTargets` (`host:port`), tried in order.
        var proxy: HTTPProxy? = nil
        var tunnelTargets: [String] = []
        /// The app decides on certificate failures (and on every connection, when it asks): the
        /// handshake then finishes whatever the chain, and the connection is refused or accepted right
        /// after it (`sslContext` must not check names: ours does).
        var serverTrust: ServerTrustEvaluation? = nil
        /// The configured extra roots, for the Security framework's check of a deferred chain.
        var additionalTrustRoots: [NIOSSLCertificate] = []
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
        on eventLoop: any EventLoop
    ) async throws -> Connection {
        guard let proxy = settings.proxy else {
            return try await attempt(url: url, addresses: addresses, lookup: lookup, settings: settings, on: eventLoop)
        }
        let deadline = ContinuousClock.now + settings.connectTimeout
        var lastError: (any Error)?
        for target in settings.tunnelTargets {
            var this = settings
            this.connectTimeout = deadline - ContinuousClock.now
            guard this.connectTimeout > .zero else { break }
            do {
                return try await attempt(
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

    /// One connection: straight to `url`'s host, or through `via`'s proxy by a tunnel to its target.
    private static func attempt(
        url: HTTPURL,
        addresses: ResolvedAddresses?,
        lookup: AddressLookup,
        settings: Settings,
        on eventLoop: any EventLoop,
        via: (proxy: HTTPProxy, target: String)? = nil
    ) async throws -> Connection {
        let readyPromise = eventLoop.makePromise(of: Ready.self)
        let tunnelPromise = eventLoop.makePromise(of: Void.self)
        // The peer's address as seen when each attempt connected: a server that closes at once (after a
        // failed handshake) leaves a channel with no remote address by the time we look.
        let remotes = NIOLockedValueBox<[ObjectIdentifier: SocketAddress]>([:])
        // Never an IP as SNI: for an IP-literal host no SNI is sent and the certificate is checked
        // against the IP, as NIOSSL does by itself.
        let sni: String? = url.hostIsIP ? nil : url.host
        let pins = settings.pins
        let sslContext = settings.sslContext
        let h2c = settings.h2c
        let serverTrust = settings.serverTrust
        let verdict = ChainVerdict(deferring: serverTrust != nil)
        let additionalTrustRoots = settings.additionalTrustRoots
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.nanoseconds(settings.connectTimeout.nanoseconds))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(ConnectionAbandoner())
                    try sync.addHandler(RemoteAddressRecorder(remotes: remotes))
                    if let via {
                        try sync.addHandler(
                            ProxyConnectHandler(target: via.target, proxy: via.proxy, promise: tunnelPromise)
                        )
                    }
                    guard let sslContext else {
                        readyPromise.succeed(try configure(channel, version: h2c ? .http2 : .http1))
                        return
                    }
                    try sync.addHandler(
                        try verdict.makeClientHandler(
                            context: sslContext,
                            serverHostname: sni,
                            additionalTrustRoots: additionalTrustRoots
                        )
                    )
                    try sync.addHandler(
                        ApplicationProtocolNegotiationHandler { result, channel in
                            // The handshake is over; reads are held back until the returned future completes.
                            let peer = try? channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
                                .peerCertificate
                            let address = channel.remoteAddress.map(describe) ?? url.host
                            let checked = channel.eventLoop.makeFutureWithTask {
                                guard let serverTrust else {
                                    try await verifyIdentity(hostname: sni, peer: peer, pins: pins)
                                    return
                                }
                                try await serverTrust.evaluate(
                                    host: url.host,
                                    port: url.port,
                                    chain: verdict.chain.compactMap { try? $0.toDERBytes() }
                                ) {
                                    if verdict.rejected { throw untrustedCertificate(host: url.host, address: address) }
                                    do {
                                        try await verifyIdentity(
                                            hostname: sni,
                                            ip: sni == nil ? url.host : nil,
                                            peer: peer,
                                            pins: nil
                                        )
                                    } catch {
                                        throw describeTLSFailure(
                                            error,
                                            host: url.host,
                                            address: address,
                                            chainRejected: false
                                        )
                                    }
                                }
                                // Pins are the app's own rule: never overruled.
                                if let pins, !pins.isEmpty {
                                    try await verifyIdentity(hostname: nil, peer: peer, pins: pins)
                                }
                            }
                            return checked.flatMapThrowing {
                                let version: HTTPVersionUsed = result == .negotiated("h2") ? .http2 : .http1
                                readyPromise.succeed(try configure(channel, version: version))
                            }.flatMapErrorThrowing { error in
                                readyPromise.fail(error)
                                channel.close(promise: nil)
                                throw error
                            }
                        }
                    )
                    try sync.addHandler(SetupWatcher(promise: readyPromise))
                }
            }
        let started = ContinuousClock.now
        let channel: any Channel
        do {
            // Through a proxy: to the proxy itself, which the system resolves when it is named.
            channel = try await connectTCP(
                bootstrap,
                on: eventLoop,
                host: via?.proxy.host ?? url.host,
                port: via?.proxy.port ?? url.port,
                addresses: via == nil ? addresses : nil,
                timeout: settings.connectTimeout,
                via: via == nil ? .literalOnly : .proxyByName
            )
        } catch {
            readyPromise.fail(error)
            tunnelPromise.fail(error)
            throw error
        }
        if let via {
            let left = settings.connectTimeout - (ContinuousClock.now - started)
            let timer = eventLoop.scheduleTask(in: .nanoseconds(max(left, .zero).nanoseconds)) {
                tunnelPromise.fail(
                    HTTPEngineError(
                        .connectTimeout,
                        "proxy \(via.proxy) did not open the tunnel to \(via.target) within \(settings.connectTimeout)"
                    )
                )
            }
            do {
                try await tunnelPromise.futureResult.get()
                timer.cancel()
            } catch {
                timer.cancel()
                readyPromise.fail(error)
                channel.close(promise: nil)
                throw error
            }
        } else {
            tunnelPromise.succeed(())
        }
        let connected = ContinuousClock.now
        // Read now: a channel the server closed at once (a failed handshake) has no remote address later.
        let remote = channel.remoteAddress ?? remotes.withLockedValue { $0[ObjectIdentifier(channel)] }
        let remoteText = remote.map(describe) ?? formatAuthority(host: url.host, port: url.port)
        let timeout = eventLoop.scheduleTask(in: .nanoseconds(settings.tlsTimeout.nanoseconds)) {
            readyPromise.fail(
                HTTPEngineError(
                    .tlsHandshakeTimeout,
                    "TLS handshake with \(url.host) at \(remoteText) took longer than \(settings.tlsTimeout)"
                )
            )
        }
        do {
            let ready = try await readyPromise.futureResult.get()
            timeout.cancel()
            guard let remote else {
                throw HTTPEngineError(.protocolError, "connection to \(remoteText) closed at once")
            }
            let tls: Duration? = sslContext == nil ? nil : ContinuousClock.now - connected
            return Connection(
                channel: channel,
                ready: ready,
                remote: remote,
                synthesizedFrom: remote.httpdnsIP.flatMap { addresses?.synthesized[$0] },
                lookup: lookup,
                connect: connected - started,
                tls: tls
            )
        } catch {
            timeout.cancel()
            channel.close(promise: nil)
            if let e = error as? HTTPEngineError { throw e }
            throw describeTLSFailure(
                error,
                host: url.host,
                address: remoteText,
                chainRejected: verdict.rejected
            )
        }
    }

    /// How `connectTCP` may reach a host it has no addresses for.
    enum Reach {
        /// Only an IP literal, else it fails (`.noAddresses`): the engine never resolves by itself.
        case literalOnly
        /// Through the system's resolver: an HTTP proxy named by hostname.
        case proxyByName
    }

    /// TCP to `host:port` through `bootstrap` (made for `loop`): at `addresses` in their order (NIO's
    /// happy eyeballs), or, given no addresses, to an IP-literal host itself (or, `via: .proxyByName`,
    /// to a proxy's name through the system's resolver). Throws `HTTPEngineError`.
    static func connectTCP(
        _ bootstrap: ClientBootstrap,
        on loop: any EventLoop,
        host: String,
        port: Int,
        addresses: ResolvedAddresses?,
        timeout: Duration,
        via: Reach = .literalOnly
    ) async throws -> any Channel {
        do {
            if addresses == nil, let ip = IPAddress(host) {
                return try await bootstrap.connect(to: try SocketAddress(ip, port: port)).get()
            }
            if addresses == nil, via == .proxyByName {
                // A proxy named by hostname: the system resolves it (it is the local network's own).
                return try await bootstrap.connect(host: host, port: port).get()
            }
            guard let addresses, !(addresses.ipv4.isEmpty && addresses.ipv6.isEmpty) else {
                throw HTTPEngineError(.noAddresses, "no address to connect to for \(host)")
            }
            let ranked = RankedResolver(
                ipv4: try addresses.ipv4.map { try SocketAddress($0, port: port) },
                ipv6: try addresses.ipv6.map { try SocketAddress($0, port: port) },
                eventLoop: loop
            )
            return try await bootstrap.resolver(ranked).connect(host: host, port: port).get()
        } catch let error as HTTPEngineError {
            throw error
        } catch {
            throw describeConnectFailure(error, host: host, port: port, timeout: timeout)
        }
    }

    private static func configure(_ channel: any Channel, version: HTTPVersionUsed) throws -> Ready {
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
