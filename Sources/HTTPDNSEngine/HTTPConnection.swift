// One client connection: TCP connect, TLS with ALPN (the real hostname as SNI), then HTTP/1.1 or
// HTTP/2 handlers chosen by what the server agreed. Requests run on it through `execute`.
//
// The pipeline is completed inside the ALPN callback, before any application byte is read, so an h2
// server's SETTINGS frame is never dropped on the floor.

import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import HTTPDNSCore
import X509

final class HTTPConnection: Sendable {
    /// A failed connect or TLS handshake, kept apart from request failures so the engine can move on to
    /// the next address.
    struct SetupFailure: Error {
        var stage: String
        var reason: String
    }

    struct Ready: Sendable {
        var version: HTTPVersionUsed
        var multiplexer: NIOLoopBound<NIOHTTP2Handler.StreamMultiplexer>?
    }

    let channel: any Channel
    let ready: Ready
    let remote: String

    private init(channel: any Channel, ready: Ready, remote: String) {
        self.channel = channel
        self.ready = ready
        self.remote = remote
    }

    static func connect(
        to address: SocketAddress,
        request: HTTPEngineRequest,
        sslContext: NIOSSLContext?,
        group: any EventLoopGroup,
        deadline: NIODeadline
    ) async throws -> HTTPConnection {
        let eventLoop = group.next()
        let readyPromise = eventLoop.makePromise(of: Ready.self)
        // Never an IP as SNI: for an IP-literal host NIOSSL then checks the certificate against the IP.
        let sni: String? = IPAddress(request.host) == nil ? request.host : nil
        let remaining = max(deadline - .now(), .milliseconds(1))
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(remaining)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    guard let sslContext else {
                        readyPromise.succeed(try configure(channel, version: .http1))
                        return
                    }
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: sni))
                    try sync.addHandler(
                        ApplicationProtocolNegotiationHandler { result, channel in
                            // The handshake is over; reads are held back until the returned future completes.
                            let peer = try? channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self).peerCertificate
                            let checked: EventLoopFuture<Void> =
                                if let sni {
                                    channel.eventLoop.makeFutureWithTask { try await verifyHostnameStrictly(sni, peer: peer) }
                                } else {
                                    channel.eventLoop.makeSucceededVoidFuture()
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
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(to: address).get()
        } catch {
            readyPromise.fail(error)
            throw SetupFailure(stage: "connect", reason: describeConnectError(error))
        }
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            readyPromise.fail(HTTPEngineError(.timeout, "TLS handshake timed out"))
        }
        do {
            let ready = try await readyPromise.futureResult.get()
            timeout.cancel()
            return HTTPConnection(channel: channel, ready: ready, remote: describe(address))
        } catch {
            timeout.cancel()
            channel.close(promise: nil)
            throw SetupFailure(stage: "tls", reason: describeTLSError(error, host: request.host, address: describe(address)))
        }
    }

    private static func configure(_ channel: any Channel, version: HTTPVersionUsed) throws -> Ready {
        let sync = channel.pipeline.syncOperations
        switch version {
        case .http1:
            try sync.addHTTPClientHandlers()
            return Ready(version: .http1, multiplexer: nil)
        case .http2:
            let mux = try sync.configureHTTP2Pipeline(
                mode: .client,
                connectionConfiguration: .init(),
                streamConfiguration: .init(),
                inboundStreamInitializer: { $0.close() }  // no server push
            )
            return Ready(version: .http2, multiplexer: NIOLoopBound(mux, eventLoop: channel.eventLoop))
        }
    }

    func close() {
        channel.close(promise: nil)
    }

    /// Runs one request on this connection and collects the whole response.
    func execute(_ request: HTTPEngineRequest, deadline: NIODeadline, maxResponseBytes: Int) async throws -> HTTPEngineResponse {
        let eventLoop = channel.eventLoop
        let promise = eventLoop.makePromise(of: CollectedResponse.self)
        var headers = request.headers
        if !headers.contains(name: "host") { headers.replaceOrAdd(name: "host", value: request.authority) }
        if !headers.contains(name: "user-agent") { headers.add(name: "user-agent", value: "swift-httpdns") }
        if let body = request.body { headers.replaceOrAdd(name: "content-length", value: "\(body.count)") }
        let head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.target, headers: headers)
        let body = request.body
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            promise.fail(HTTPEngineError(.timeout, "no complete response from \(request.host) at \(self.remote) before the deadline"))
        }
        let channel = self.channel
        let ready = self.ready
        eventLoop.execute {
            @Sendable func send(on target: any Channel) {
                target.write(HTTPClientRequestPart.head(head), promise: nil)
                if let body, !body.isEmpty {
                    target.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
                }
                target.writeAndFlush(HTTPClientRequestPart.end(nil)).whenFailure { promise.fail($0) }
            }
            do {
                if let mux = ready.multiplexer?.value {
                    mux.createStreamChannel { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandlers([
                                HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: request.scheme == "https" ? .https : .http),
                                ResponseCollector(promise: promise, maxBytes: maxResponseBytes),
                            ])
                        }
                    }.whenComplete { result in
                        switch result {
                        case .success(let stream):
                            send(on: stream)
                            promise.futureResult.whenFailure { _ in stream.close(promise: nil) }
                        case .failure(let error):
                            promise.fail(error)
                        }
                    }
                } else {
                    try channel.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise, maxBytes: maxResponseBytes))
                    send(on: channel)
                }
            } catch {
                promise.fail(error)
            }
        }
        defer { timeout.cancel() }
        let collected: CollectedResponse
        do {
            collected = try await promise.futureResult.get()
        } catch let error as HTTPEngineError {
            throw error
        } catch {
            throw HTTPEngineError(.protocolError, "\(request.host) at \(remote): \(error)")
        }
        return HTTPEngineResponse(
            status: Int(collected.head.status.code),
            headers: collected.head.headers,
            body: collected.body,
            version: ready.version,
            remoteAddress: remote
        )
    }
}

struct CollectedResponse: Sendable {
    var head: HTTPResponseHead
    var body: [UInt8]
}

/// Collects one response (head, body up to a limit, end) into a promise.
final class ResponseCollector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    let promise: EventLoopPromise<CollectedResponse>
    let maxBytes: Int
    var head: HTTPResponseHead?
    var body: ByteBuffer?

    init(promise: EventLoopPromise<CollectedResponse>, maxBytes: Int) {
        self.promise = promise
        self.maxBytes = maxBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            // 1xx informational heads are followed by the real one.
            if h.status.code >= 100, h.status.code < 200 { return }
            head = h
        case .body(var chunk):
            if (body?.readableBytes ?? 0) + chunk.readableBytes > maxBytes {
                promise.fail(HTTPEngineError(.responseTooLarge, "response body larger than \(maxBytes) bytes"))
                context.close(promise: nil)
                return
            }
            if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
        case .end:
            guard let head else {
                promise.fail(HTTPEngineError(.protocolError, "response ended without a status line"))
                return
            }
            promise.succeed(CollectedResponse(head: head, body: body.map { Array($0.readableBytesView) } ?? []))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(HTTPEngineError(.protocolError, "connection closed before the response was complete"))
        context.fireChannelInactive()
    }
}

/// Sits at the end of a TLS pipeline until the handshake is over and turns an error or an early close
/// into a failed setup.
final class SetupWatcher: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    let promise: EventLoopPromise<HTTPConnection.Ready>

    init(promise: EventLoopPromise<HTTPConnection.Ready>) { self.promise = promise }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(HTTPEngineError(.protocolError, "connection closed during the TLS handshake"))
        context.fireChannelInactive()
    }
}

/// BoringSSL has verified the chain, and NIOSSL the name, but NIOSSL also accepts an IP SAN that matches
/// the socket address whatever the hostname. When we connect by IP on behalf of a name that is exactly
/// the hole a poisoned address could use, so for a hostname only DNS names in the certificate count
/// (swift-certificates' server identity check, RFC 6125, with no IP given).
func verifyHostnameStrictly(_ hostname: String, peer: NIOSSLCertificate?) async throws {
    guard let peer else { throw HostnameMismatch(reason: "the server presented no certificate") }
    let leaf = try Certificate(derEncoded: try peer.toDERBytes())
    // Chain and dates were checked by BoringSSL; this verifier checks the identity only.
    var verifier = Verifier(rootCertificates: CertificateStore([leaf])) {
        ServerIdentityPolicy(serverHostname: hostname, serverIP: nil)
    }
    if case .couldNotValidate(let failures) = await verifier.validate(leaf: leaf, intermediates: CertificateStore()) {
        throw HostnameMismatch(reason: failures.first.map { "\($0.policyFailureReason)" } ?? "no DNS name matches")
    }
}

struct HostnameMismatch: Error {
    var reason: String
}

func describeConnectError(_ error: any Error) -> String {
    if let e = error as? NIOConnectionError {
        return e.connectionErrors.map { "\($0.error)" }.first ?? "\(e)"
    }
    if error is ChannelError, case ChannelError.connectTimeout = error { return "connect timed out" }
    if let e = error as? IOError { return e.description }
    return "\(error)"
}

func describeTLSError(_ error: any Error, host: String, address: String) -> String {
    if error is HostnameMismatch || (error as? NIOSSLExtraError) == .failedToValidateHostname {
        return "the certificate presented at \(address) is not valid for \(host)"
    }
    if let e = error as? NIOSSLError, case .handshakeFailed(let inner) = e {
        let text = "\(inner)"
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "the certificate presented for \(host) at \(address) is not trusted (if it is signed by a private CA, pass that CA with --cacert)"
        }
        // BoringSSL's text ends with the source file it came from: keep the reason, drop the path.
        let reason = text.range(of: "OPENSSL_internal:").map { String(text[$0.upperBound...].prefix { $0 != " " }) } ?? text
        return "TLS handshake with \(host) at \(address) failed: \(reason)"
    }
    if let e = error as? HTTPEngineError { return e.description }
    return "TLS with \(host) at \(address) failed: \(error)"
}
