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
    let multiplexer: NIOLoopBound<NIOHTTP2Handler.StreamMultiplexer>?
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
        self.multiplexer = ready.multiplexer
        self.goAway = ready.goAway
        self.remote = remote
        self.synthesizedFrom = synthesizedFrom
        self.lookup = lookup
        self.connectDuration = connect
        self.tlsDuration = tls
    }

    struct Ready: Sendable {
        var version: HTTPVersionUsed
        var multiplexer: NIOLoopBound<NIOHTTP2Handler.StreamMultiplexer>?
        var goAway: GoAwayRecord?
    }

    struct Settings: Sendable {
        var sslContext: NIOSSLContext?
        var pins: Set<String>?
        var h2c: Bool
        var connectTimeout: Duration
        var tlsTimeout: Duration
    }

    /// Connects to `url`'s host at `addresses` (nil: an IP-literal host, connected to as is; an IPv4
    /// literal reached through NAT64 comes with its synthesized address). `lookup` says how they were
    /// found.
    static func establish(
        url: HTTPURL,
        addresses: ResolvedAddresses?,
        lookup: AddressLookup,
        settings: Settings,
        group: any EventLoopGroup
    ) async throws -> Connection {
        let eventLoop = group.any()
        let readyPromise = eventLoop.makePromise(of: Ready.self)
        // The peer's address as seen when each attempt connected: a server that closes at once (after a
        // failed handshake) leaves a channel with no remote address by the time we look.
        let remotes = NIOLockedValueBox<[ObjectIdentifier: SocketAddress]>([:])
        // Never an IP as SNI: for an IP-literal host no SNI is sent and the certificate is checked
        // against the IP, as NIOSSL does by itself.
        let sni: String? = url.hostIsIP ? nil : url.host
        let pins = settings.pins
        let sslContext = settings.sslContext
        let h2c = settings.h2c
        let verdict = ChainVerdict()
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.nanoseconds(settings.connectTimeout.nanoseconds))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(RemoteAddressRecorder(remotes: remotes))
                    guard let sslContext else {
                        readyPromise.succeed(try configure(channel, version: h2c ? .http2 : .http1))
                        return
                    }
                    try sync.addHandler(try verdict.makeClientHandler(context: sslContext, serverHostname: sni))
                    try sync.addHandler(
                        ApplicationProtocolNegotiationHandler { result, channel in
                            // The handshake is over; reads are held back until the returned future completes.
                            let peer = try? channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
                                .peerCertificate
                            let checked = channel.eventLoop.makeFutureWithTask {
                                try await verifyIdentity(hostname: sni, peer: peer, pins: pins)
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
            channel = try await connectTCP(
                bootstrap,
                on: eventLoop,
                host: url.host,
                port: url.port,
                addresses: addresses,
                timeout: settings.connectTimeout
            )
        } catch {
            readyPromise.fail(error)
            throw error
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

    /// TCP to `host:port` through `bootstrap` (made for `loop`): at `addresses` in their order (NIO's happy eyeballs), or,
    /// for an IP-literal host given no addresses, to the literal itself. Throws `HTTPEngineError`.
    static func connectTCP(
        _ bootstrap: ClientBootstrap,
        on loop: any EventLoop,
        host: String,
        port: Int,
        addresses: ResolvedAddresses?,
        timeout: Duration
    ) async throws -> any Channel {
        do {
            if addresses == nil, let ip = IPAddress(host) {
                return try await bootstrap.connect(to: try SocketAddress(ip, port: port)).get()
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
            return Ready(version: .http1, multiplexer: nil)
        case .http2:
            try sync.addHandler(FlushCoalescer())
            let mux = try sync.configureHTTP2Pipeline(
                mode: .client,
                connectionConfiguration: HTTP2Limits.connectionConfiguration(client: true),
                streamConfiguration: .init(),
                inboundStreamInitializer: { $0.close() }  // push is refused in SETTINGS; never reached
            )
            let goAway = GoAwayRecord()
            try sync.addHandler(GoAwayWatcher(record: goAway))
            try sync.addHandler(HTTP2ConnectionErrorCloser())
            return Ready(
                version: .http2,
                multiplexer: NIOLoopBound(mux, eventLoop: channel.eventLoop),
                goAway: goAway
            )
        }
    }

    /// The channel one exchange runs on: this connection (HTTP/1.1) or a new stream on it (HTTP/2),
    /// both speaking HTTPClientRequestPart / HTTPClientResponsePart.
    func exchangeChannel(scheme: String) async throws -> any Channel {
        guard let multiplexer else { return channel }
        let promise = channel.eventLoop.makePromise(of: (any Channel).self)
        let isTLS = scheme == "https"
        channel.eventLoop.execute {
            multiplexer.value.createStreamChannel(promise: promise) { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(
                        HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: isTLS ? .https : .http)
                    )
                }
            }
        }
        return try await promise.futureResult.get()
    }

    /// Whether the server cannot have processed the HTTP/2 `stream` that failed: it was never written (a
    /// stream gets its ID when its HEADERS go out), or the server's GOAWAY refused its ID.
    func neverProcessed(stream: any Channel) async -> Bool {
        guard let id = try? await stream.getOption(HTTP2StreamChannelOptions.streamID).get() else { return true }
        return goAway?.refuses(id) ?? false
    }

    var isActive: Bool { channel.isActive }

    func close() { channel.close(promise: nil) }
}

/// What a server said when it sent GOAWAY (RFC 9113 §6.8): it takes no new stream on this connection,
/// and the streams above `lastStreamID` were never processed, so they may be sent again elsewhere,
/// whatever their method. nginx sends one after `keepalive_requests` streams (1000 by default), so a
/// busy client meets it all the time: the pool stops using the connection, refused streams are sent
/// again on a new one (at most twice), and so are idempotent requests the closing connection dropped
/// (nginx may close before answering its last accepted stream, which a POST cannot be retried after).
final class GoAwayRecord: Sendable {
    private struct State {
        var lastStreamID: HTTP2StreamID?
        var onReceived: (@Sendable () -> Void)?
    }
    private let state = NIOLockedValueBox(State())

    /// Calls `body` once, when the first GOAWAY arrives (at once if it already has).
    func onReceived(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLockedValue { state -> Bool in
            guard state.lastStreamID == nil else { return true }
            state.onReceived = body
            return false
        }
        if now { body() }
    }

    func received(lastStreamID: HTTP2StreamID) {
        let notify = state.withLockedValue { state -> (@Sendable () -> Void)? in
            let first = state.lastStreamID == nil
            // A later GOAWAY may only lower the last stream (RFC 9113 §6.8).
            state.lastStreamID = min(state.lastStreamID ?? lastStreamID, lastStreamID)
            defer { state.onReceived = nil }
            return first ? state.onReceived : nil
        }
        notify?()
    }

    /// Whether the server has sent GOAWAY.
    var wasReceived: Bool { state.withLockedValue { $0.lastStreamID != nil } }

    /// Whether the server's GOAWAY said it will not process stream `id`.
    func refuses(_ id: HTTP2StreamID) -> Bool {
        state.withLockedValue { $0.lastStreamID.map { id > $0 } ?? false }
    }
}

/// Passes a server's GOAWAY (a frame on stream 0, which the HTTP/2 handler hands to the connection
/// channel) to the connection's `GoAwayRecord`.
final class GoAwayWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    let record: GoAwayRecord

    init(record: GoAwayRecord) { self.record = record }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .goAway(let lastStreamID, _, _) = unwrapInboundIn(data).payload {
            record.received(lastStreamID: lastStreamID)
        }
        context.fireChannelRead(data)
    }
}

/// Notes the remote address of a channel as soon as it is connected.
final class RemoteAddressRecorder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let remotes: NIOLockedValueBox<[ObjectIdentifier: SocketAddress]>

    init(remotes: NIOLockedValueBox<[ObjectIdentifier: SocketAddress]>) { self.remotes = remotes }

    func channelActive(context: ChannelHandlerContext) {
        if let remote = context.channel.remoteAddress {
            let id = ObjectIdentifier(context.channel)
            remotes.withLockedValue { $0[id] = remote }
        }
        context.fireChannelActive()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// Hands NIO's happy-eyeballs connector the addresses we already have, in our order.
final class RankedResolver: Resolver, Sendable {
    let ipv4: [SocketAddress]
    let ipv6: [SocketAddress]
    let eventLoop: any EventLoop

    init(ipv4: [SocketAddress], ipv6: [SocketAddress], eventLoop: any EventLoop) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.eventLoop = eventLoop
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        eventLoop.makeSucceededFuture(ipv4)
    }
    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        eventLoop.makeSucceededFuture(ipv6)
    }
    func cancelQueries() {}
}

/// Sits at the end of a TLS pipeline until the handshake is over and turns an error or an early close
/// into a failed setup.
final class SetupWatcher: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    let promise: EventLoopPromise<Connection.Ready>

    init(promise: EventLoopPromise<Connection.Ready>) { self.promise = promise }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(HTTPEngineError(.protocolError, "connection closed during the TLS handshake"))
        context.fireChannelInactive()
    }
}

/// BoringSSL has verified the chain and dates, NIOSSL the name, but NIOSSL also accepts an IP SAN that
/// matches the socket address whatever the hostname. When we connect by IP on behalf of a name that is
/// exactly the hole a poisoned address could use, so for a hostname only the certificate's DNS names
/// count (swift-certificates' server identity check, RFC 6125, given no IP). Then the pins, if any.
func verifyIdentity(hostname: String?, peer: NIOSSLCertificate?, pins: Set<String>?) async throws {
    guard let peer else { throw IdentityFailure(.noCertificate, "the server presented no certificate") }
    if let hostname {
        let leaf = try Certificate(derEncoded: try peer.toDERBytes())
        var verifier = Verifier(rootCertificates: CertificateStore([leaf])) {
            ServerIdentityPolicy(serverHostname: hostname, serverIP: nil)
            AlreadyVerifiedExtensions(leaf)
        }
        if case .couldNotValidate = await verifier.validate(leaf: leaf, intermediates: CertificateStore()) {
            throw IdentityFailure(.nameMismatch, "no DNS name in the certificate matches")
        }
    }
    if let pins, !pins.isEmpty {
        let spki = try peer.extractPublicKey().toSPKIBytes()
        let digest = Data(SHA256.hash(data: spki)).base64EncodedString()
        guard pins.contains(digest) else {
            throw IdentityFailure(
                .pinMismatch,
                "public key pin mismatch (server key sha256/\(digest) is not pinned)"
            )
        }
    }
}

/// The Verifier refuses a chain with a critical extension that no policy claims. BoringSSL has already
/// verified this chain, and it rejects critical extensions it does not understand, so this policy claims
/// the leaf's own critical extensions (BasicConstraints and KeyUsage are usually critical) and leaves
/// the judgement to ServerIdentityPolicy.
struct AlreadyVerifiedExtensions: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier]

    init(_ leaf: Certificate) {
        verifyingCriticalExtensions = leaf.extensions.filter(\.critical).map(\.oid)
    }

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        .meetsPolicy
    }
}

/// Our own check of the server's certificate failed (see verifyIdentity); `kind` says which check.
struct IdentityFailure: Error {
    enum Kind {
        case noCertificate
        case nameMismatch
        case pinMismatch
    }

    var kind: Kind
    var reason: String

    init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
}

/// Whether BoringSSL rejected the server's certificate chain during one handshake.
///
/// NIOSSL reports a rejected chain as a handshake failure whose only detail is BoringSSL's error text.
/// Its per-certificate ("preverify") callback sees BoringSSL's verdict as a value, so the handler is
/// given one that passes the verdict through unchanged and notes a rejection. Where NIOSSL verifies
/// through the platform instead (Apple platforms with the default trust roots), the callback is not
/// called and an untrusted chain stays `.tlsFailed`.
final class ChainVerdict: Sendable {
    private let rejectedBox = NIOLockedValueBox(false)

    /// True once BoringSSL has rejected a certificate of the chain.
    var rejected: Bool { rejectedBox.withLockedValue { $0 } }

    func makeClientHandler(context: NIOSSLContext, serverHostname: String?) throws -> NIOSSLClientHandler {
        let box = rejectedBox
        return try (PreverifyObservingFactory.self as any ClientHandlerFactory.Type).make(
            context: context,
            serverHostname: serverHostname
        ) { result, _ in
            if case .failed = result { box.withLockedValue { $0 = true } }
            return result
        }
    }
}

/// NIOSSL deprecates the per-certificate callback in favour of callbacks that replace its verification
/// altogether; this one only observes. Reaching the deprecated initializer through a protocol
/// requirement keeps the build free of a warning we have chosen to accept.
private protocol ClientHandlerFactory {
    static func make(
        context: NIOSSLContext,
        serverHostname: String?,
        observe: @escaping NIOSSLVerificationCallback
    ) throws -> NIOSSLClientHandler
}

private enum PreverifyObservingFactory: ClientHandlerFactory {
    @available(*, deprecated, message: "uses NIOSSL's per-certificate verification callback")
    static func make(
        context: NIOSSLContext,
        serverHostname: String?,
        observe: @escaping NIOSSLVerificationCallback
    ) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: context, serverHostname: serverHostname, verificationCallback: observe)
    }
}

func describe(_ address: SocketAddress) -> String {
    guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
    return formatAuthority(host: ip, port: port)
}

extension SocketAddress {
    /// The socket address of an `IPAddress` and port.
    package init(_ ip: IPAddress, port: Int) throws {
        try self.init(ipAddress: ip.description, port: port)
    }

    var httpdnsIP: IPAddress? { ipAddress.flatMap { IPAddress($0) } }
}

func describeConnectFailure(_ error: any Error, host: String, port: Int, timeout: Duration) -> HTTPEngineError {
    if let e = error as? NIOConnectionError {
        let attempts = e.connectionErrors.map {
            HTTPEngineError.Attempt(
                address: describe($0.target),
                stage: "connect",
                reason: describeSocketError($0.error)
            )
        }
        return HTTPEngineError(
            .connectFailed,
            "could not connect to \(host) at any address",
            attempts: attempts,
            underlying: e
        )
    }
    if case ChannelError.connectTimeout = error {
        return HTTPEngineError(
            .connectTimeout,
            "connecting to \(formatAuthority(host: host, port: port)) took longer than \(timeout)",
            underlying: error
        )
    }
    return HTTPEngineError(
        .connectFailed,
        "could not connect to \(formatAuthority(host: host, port: port)): \(describeSocketError(error))",
        underlying: error
    )
}

func describeSocketError(_ error: any Error) -> String {
    if let e = error as? IOError { return e.description }
    if case ChannelError.connectTimeout = error { return "timed out" }
    return "\(error)"
}

/// The engine's error for a failed TLS setup: the code from the error's type and value (and from
/// BoringSSL's verdict on the chain), the message naming the host and the address it was reached at.
func describeTLSFailure(_ error: any Error, host: String, address: String, chainRejected: Bool) -> HTTPEngineError {
    if let e = error as? IdentityFailure {
        let code: HTTPEngineError.Code =
            switch e.kind {
            case .nameMismatch: .certificateNameMismatch
            case .pinMismatch: .pinMismatch
            case .noCertificate: .tlsFailed
            }
        // No underlying error: the check is our own, and the code and message say all there is.
        return HTTPEngineError(code, "the certificate presented at \(address) is not valid for \(host): \(e.reason)")
    }
    if let e = error as? NIOSSLExtraError, e == .failedToValidateHostname {
        return HTTPEngineError(
            .certificateNameMismatch,
            "the certificate presented at \(address) is not valid for \(host)",
            underlying: error
        )
    }
    if let e = error as? NIOSSLError, case .handshakeFailed(let inner) = e {
        if chainRejected {
            return HTTPEngineError(
                .untrustedCertificate,
                "the certificate presented for \(host) at \(address) is not trusted",
                underlying: error
            )
        }
        // BoringSSL's text ends with the source file it came from: keep the reason, drop the path.
        // (Wording only: the code was decided above, from values.)
        let text = "\(inner)"
        let reason =
            text.range(of: "OPENSSL_internal:").map { String(text[$0.upperBound...].prefix { $0 != " " }) } ?? text
        return HTTPEngineError(
            .tlsFailed,
            "TLS handshake with \(host) at \(address) failed: \(reason)",
            underlying: error
        )
    }
    return HTTPEngineError(.tlsFailed, "TLS with \(host) at \(address) failed: \(error)", underlying: error)
}

/// Carries out the flushes asked for in one event-loop turn as one. Each HTTP/2 stream flushes its
/// connection when it sends its request: a hundred streams started in one turn would otherwise be a
/// hundred TLS records and a hundred `write` calls (h2load sends them in one). The flush runs once the
/// tasks already queued on the loop have run, so streams started by those go out with it.
final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny

    private var scheduled = false

    func flush(context: ChannelHandlerContext) {
        guard !scheduled else { return }
        scheduled = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.scheduled = false
            context.flush()
        }
    }
}
