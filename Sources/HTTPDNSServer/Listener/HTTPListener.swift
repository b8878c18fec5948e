// A small HTTP server: TLS with ALPN (h2, http/1.1) when given certificates, plain HTTP/1.1 or h2c
// (prior knowledge, recognised by the connection preface) otherwise. Each request is read whole (up to
// a bound) and answered by an async function. Used by the HTTPDNS service and by the demo's origins.
//
// Bounds: connections (beyond the limit a new connection is closed at once), request body size (413),
// header size (NIO's parser limit), time (a slow client cannot hold a connection: see Limits), HTTP/2
// limits (HTTP2Limits: streams, header list, CONTINUATION and control-frame floods; a connection error
// closes the connection). A malformed request gets 400 and its connection closed, the rest of the
// server carries on.

import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSListener
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// One request, read whole.
package struct ListenerRequest: Sendable {
    var method: HTTPMethod
    package var uri: String
    package var headers: HTTPHeaders
    package var body: ByteBuffer
    /// "http/1.1" or "h2".
    package var version: String
    var isTLS: Bool
    var remote: String
    /// The client's address, for answers that report it (DNSPod `clientip=1`).
    var remoteIP: IPAddress? = nil

    /// The request target without its query.
    var path: String { uri.firstIndex(of: "?").map { String(uri[..<$0]) } ?? uri }
}

/// One response.
package struct ListenerResponse: Sendable {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: ByteBuffer

    package init(
        status: HTTPResponseStatus = .ok,
        contentType: String = "text/plain",
        body: some Collection<UInt8>,
        headers: HTTPHeaders = [:]
    ) {
        self.status = status
        self.headers = headers
        self.headers.replaceOrAdd(name: "content-type", value: contentType)
        self.body = ByteBuffer(bytes: body)
    }

    package init(status: HTTPResponseStatus, text: String, headers: HTTPHeaders = [:]) {
        self.init(status: status, body: Array((text + "\n").utf8), headers: headers)
    }
}

/// Listens on one address; `stop()` closes it and its connections.
package final class HTTPListener: Sendable {
    package typealias Handler = @Sendable (ListenerRequest) async -> ListenerResponse
    /// Answers on the event loop without waiting, or returns nil to hand the request to `Handler`.
    package typealias ImmediateHandler = @Sendable (ListenerRequest) -> ListenerResponse?

    package struct Limits: Sendable {
        /// Connections at most. When full, the connection idle longest that never carried a request (a
        /// TLS handshake, a first head still arriving) and was accepted at least a second ago is closed for
        /// a new one; when there is none, the new one waits for a slot for up to `queueTimeout`, then takes
        /// the slot of a stalled sender or of a client idle for 10 s, or is closed (ConnectionSlots). A
        /// client in use is never closed for a newcomer.
        package var maxConnections = 1024
        /// How long a new connection may wait for a slot when only kept-alive clients could make room.
        var queueTimeout: Duration = .seconds(2)
        /// Connections at most from one client address (nil: no such cap); more are closed at once.
        package var maxConnectionsPerClient: Int? = nil
        package var maxRequestBytes = 64 * 1024
        /// Time a client has to deliver a whole request (head and body) once it has started sending it;
        /// for a new connection the TLS handshake and protocol choice must also fit in it. A slow client
        /// (slowloris) is closed after it, whatever it trickles.
        package var requestTimeout: Duration = .seconds(10)
        /// A connection with no request in progress and nothing read for this long is closed.
        package var idleTimeout: Duration = .seconds(60)
        package init() {}
    }

    let host: String
    package let port: Int
    let channel: any Channel
    let connections: ConnectionLimiter

    private init(
        host: String,
        port: Int,
        channel: any Channel,
        connections: ConnectionLimiter
    ) {
        self.host = host
        self.port = port
        self.channel = channel
        self.connections = connections
    }

    /// Binds `host:port` (port 0: any free port) and serves `handler`.
    package static func start(
        host: String,
        port: Int,
        tls: NIOSSLContext?,
        limits: Limits = Limits(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        immediate: ImmediateHandler? = nil,
        handler: @escaping Handler
    ) async throws -> HTTPListener {
        let connections = ConnectionLimiter(
            limit: limits.maxConnections,
            maxPerClient: limits.maxConnectionsPerClient,
            queueTimeout: TimeAmount(limits.queueTimeout),
            metricsPrefix: "httpdns_server"
        )
        /// An admitted connection's pipeline: TLS and protocol choice, or the h2c preface sniffer.
        @Sendable func setUp(_ channel: any Channel, slot: ConnectionSlot) -> EventLoopFuture<Void> {
            // The TLS handshake and the protocol choice must be over within requestTimeout.
            let setup = channel.eventLoop.scheduleTask(in: TimeAmount(limits.requestTimeout)) {
                logger.debug("connection closed: no protocol set up in time")
                channel.close(promise: nil)
            }
            channel.closeFuture.whenComplete { _ in setup.cancel() }
            return channel.eventLoop.makeCompletedFuture {
                let context = ConnectionContext(
                    isTLS: tls != nil,
                    remote: channel.remoteAddress.map { "\($0)" } ?? "?",
                    remoteIP: channel.remoteAddress?.ipAddress.flatMap { IPAddress($0) },
                    limits: limits,
                    logger: logger,
                    immediate: immediate,
                    handler: handler,
                    setup: setup,
                    slot: slot
                )
                // A client that does not read its responses stops having its requests read: the
                // responses waiting to be written bound what it can make this server hold.
                try channel.pipeline.syncOperations.addHandler(BackPressureHandler())
                if let tls {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    try channel.pipeline.syncOperations.addHandler(
                        ApplicationProtocolNegotiationHandler { result, channel in
                            channel.eventLoop.makeCompletedFuture {
                                try configure(channel, h2: result == .negotiated("h2"), context: context)
                            }
                        }
                    )
                } else {
                    try channel.pipeline.syncOperations.addHandler(PrefaceSniffer(context: context))
                }
            }
        }
        // Out of descriptors (EMFILE), accept fails at once and keeps failing: without a pause the loop
        // would retry it as fast as it can, a whole core, until descriptors come back (AcceptPause.swift).
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .pausingAccepts(countingFor: connections)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                // A newcomer may wait for a slot here (not read until it has one): see ConnectionSlots.
                connections.admit(channel).flatMap { slot in
                    guard let slot else {
                        logger.debug(
                            "connection refused: every connection busy, too many waiting, or the client's cap reached",
                            metadata: ["limit": "\(limits.maxConnections)"]
                        )
                        return channel.close()
                    }
                    return setUp(channel, slot: slot)
                }
            }
            .bind(host: host, port: port).get()
        return HTTPListener(
            host: host,
            port: channel.localAddress?.port ?? port,
            channel: channel,
            connections: connections
        )

    }

    static func configure(_ channel: any Channel, h2: Bool, context: ConnectionContext) throws {
        context.setup.cancel()
        let sync = channel.pipeline.syncOperations
        if h2 {
            // Streams are timed one by one, and the connection closes after idleTimeout without a stream
            // (HTTP2RequestHandler): a client's PINGs do not keep it open. A header block must arrive
            // whole within requestTimeout (HeaderBlockDeadline: NIOHTTP2Handler shows it only once whole).
            try sync.addHandler(HeaderBlockDeadline(timeout: TimeAmount(context.limits.requestTimeout)))
            // No stream multiplexer: HTTP2RequestHandler reads every stream's frames itself.
            try sync.addHandler(
                NIOHTTP2Handler(
                    mode: .server,
                    connectionConfiguration: HTTP2Limits.connectionConfiguration(client: false),
                    streamConfiguration: .init()
                )
            )
            try sync.addHandler(HTTP2RequestHandler(context: context))
            try sync.addHandler(HTTP2ConnectionErrorCloser())
        } else {
            let handler = RequestHandler(context: context)
            let notifier = ReadNotifier(handler)
            handler.front = notifier
            try sync.addHandler(notifier)
            try sync.configureHTTPServerPipeline(withErrorHandling: true)
            try sync.addHandler(handler)
        }
    }

    /// Open connections now.
    var openConnections: Int { connections.count }

    package func stop() async {
        try? await channel.close()
        await connections.closeAll()
    }

    /// Graceful stop: no new connection is accepted; every open one is asked to finish
    /// (`ChannelShouldQuiesceEvent`: an HTTP/1.1 connection closes after the response in progress, or
    /// at once when idle; an HTTP/2 one sends GOAWAY and closes after its last stream); what is still
    /// open after `timeout` is closed.
    func drain(within timeout: Duration) async {
        try? await channel.close()
        let open = connections.channels
        for connection in open { connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            for connection in open { connection.close(promise: nil) }
        }
        for connection in open { try? await connection.closeFuture.get() }
        deadline.cancel()
    }
}

struct ConnectionContext: Sendable {
    var isTLS: Bool
    var remote: String
    var remoteIP: IPAddress?
    var limits: HTTPListener.Limits
    var logger: Logger
    var immediate: HTTPListener.ImmediateHandler?
    var handler: HTTPListener.Handler
    /// Closes the connection unless the protocol is set up in time; cancelled by `configure`.
    var setup: Scheduled<Void>
    /// The connection's place in the listener: busy while a request is in progress.
    var slot: ConnectionSlot
}

/// Before the HTTP/1.1 decoder: tells the request handler that bytes arrived, so it knows when a
/// request has started (its head timer starts then, not when the head is complete), and writes the
/// 408 for a request that never completed (NIO's pipeline handler allows no response without a head).
final class ReadNotifier: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let handler: RequestHandler
    var context: ChannelHandlerContext?

    init(_ handler: RequestHandler) { self.handler = handler }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        handler.bytesArrived()
        context.fireChannelRead(data)
    }

    /// Writes `text` as raw bytes below the HTTP codec, then closes the connection.
    func replyRawAndClose(_ text: String) {
        guard let context else { return }
        writeRawAndClose(text, from: context)
    }
}

/// On a plain listener: an h2 connection preface means h2c with prior knowledge, anything else HTTP/1.1.
final class PrefaceSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    let context: ConnectionContext
    var buffered: ByteBuffer?

    init(context: ConnectionContext) { self.context = context }

    /// Draining before the first request: nothing to finish.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent { context.close(promise: nil) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var chunk = unwrapInboundIn(data)
        if buffered == nil { buffered = chunk } else { buffered!.writeBuffer(&chunk) }
        let bytes = Array(buffered!.readableBytesView.prefix(Self.preface.count))
        let isPrefix = bytes.elementsEqual(Self.preface.prefix(bytes.count))
        guard !isPrefix || bytes.count >= Self.preface.count else { return }  // need more bytes
        do {
            try HTTPListener.configure(context.channel, h2: isPrefix, context: self.context)
        } catch {
            context.close(promise: nil)
            return
        }
        let data = buffered!
        buffered = nil
        // Hand the bytes read so far to the protocol just installed, then leave the pipeline.
        context.fireChannelRead(wrapInboundOut(data))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    typealias InboundOut = ByteBuffer
}

/// HTTP/1.1: reads one request at a time, answers it at once (immediate) or through the async handler.
final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let context: ConnectionContext
    let version = "http/1.1"
    var head: HTTPRequestHead?
    var body = ByteBuffer()
    var tooLarge = false
    /// A request has started (bytes arrived) and is not complete yet.
    var requestInProgress = false
    /// A request is being answered: no timer runs.
    var answering = false
    /// Request heads read on this connection.
    var headsRead = 0
    var timer: Scheduled<Void>?
    var channelContext: ChannelHandlerContext?
    /// The handler in front of the codec (it holds this one, so this reference is weak).
    weak var front: ReadNotifier?
    /// The answer being made by the async handler, cancelled if the connection goes first.
    var answerTask: Task<Void, Never>?

    init(context: ConnectionContext) {
        self.context = context
    }

    // Timing (see Limits): waiting for a request is bounded by idleTimeout, and once its first byte has
    // arrived the whole request by requestTimeout.

    func handlerAdded(context: ChannelHandlerContext) {
        channelContext = context
        arm(self.context.limits.idleTimeout, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        channelContext = nil
        // The connection is gone: nobody waits for the answer, so its upstream lookup is not waited
        // for either (the resolver goes on with it only for another asker).
        answerTask?.cancel()
    }

    /// Called by ReadNotifier (HTTP/1.1) for every read.
    func bytesArrived() {
        guard !requestInProgress, !answering, let context = channelContext else { return }
        requestInProgress = true
        arm(self.context.limits.requestTimeout, context: context)
    }

    private func arm(_ timeout: Duration, context: ChannelHandlerContext) {
        timer?.cancel()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            let (me, context) = bound.value
            me.timedOut(context: context)
        }
    }

    private func timedOut(context: ChannelHandlerContext) {
        timer = nil
        guard !answering else { return }
        if requestInProgress {
            self.context.logger.debug("request not complete in time", metadata: ["remote": "\(self.context.remote)"])
            answering = true
            let body = "request not complete in time\n"
            front?.replyRawAndClose(
                "HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n\(body)"
            )
        } else {
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            headsRead += 1
            body.clear()
            tooLarge = false
            // A whole head: from now until the answer is written, not a connection to close for room.
            self.context.slot.busy()
        case .body(var chunk):
            if body.readableBytes + chunk.readableBytes > self.context.limits.maxRequestBytes {
                tooLarge = true
            } else {
                body.writeBuffer(&chunk)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            timer?.cancel()
            timer = nil
            answering = true
            requestInProgress = false
            let keepAlive = head.isKeepAlive
            if tooLarge {
                write(
                    ListenerResponse(
                        status: .payloadTooLarge,
                        text: "request body larger than \(self.context.limits.maxRequestBytes) bytes"
                    ),
                    keepAlive: false,
                    context: context
                )
                return
            }
            let request = ListenerRequest(
                method: head.method,
                uri: head.uri,
                headers: head.headers,
                body: body,
                version: version,
                isTLS: self.context.isTLS,
                remote: self.context.remote,
                remoteIP: self.context.remoteIP
            )
            if let immediate = self.context.immediate, let response = immediate(request) {
                self.context.logger.debug(
                    "request",
                    metadata: [
                        "method": "\(head.method)", "uri": "\(redactingSecrets(head.uri))",
                        "status": "\(response.status.code)",
                        "version": "\(version)",
                    ]
                )
                write(response, keepAlive: keepAlive, context: context)
                return
            }
            let handler = self.context.handler
            let logger = self.context.logger
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let answered = context.eventLoop.makePromise(of: ListenerResponse.self)
            answerTask = Task { answered.succeed(await handler(request)) }
            answered.futureResult.whenSuccess { response in
                let (me, context) = bound.value
                me.answerTask = nil
                logger.debug(
                    "request",
                    metadata: [
                        "method": "\(head.method)", "uri": "\(redactingSecrets(head.uri))",
                        "status": "\(response.status.code)",
                        "version": "\(me.version)",
                    ]
                )
                me.write(response, keepAlive: keepAlive, context: context)
            }
        }
    }

    func write(_ response: ListenerResponse, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = response.headers
        headers.replaceOrAdd(name: "content-length", value: "\(response.body.readableBytes)")
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))),
            promise: nil
        )
        if response.body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        } else {
            // Ready for the next request: wait for it again. The connection is idle for the listener once
            // the answer has gone out: a slow reader still taking it is in use (ConnectionSlots).
            answering = false
            let slot = self.context.slot
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let heads = headsRead
            done.whenComplete { _ in
                // Unless the next request's head was read meanwhile: that one is in progress.
                if bound.value.headsRead == heads { slot.idle() }
            }
            arm(self.context.limits.idleTimeout, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.context.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}

/// `uri` with the values of the query parameters that carry secrets (`token`, the signature `s`)
/// replaced by `<redacted>`, for logs.
func redactingSecrets(_ uri: String) -> String {
    guard let q = uri.firstIndex(of: "?") else { return uri }
    let pairs = uri[uri.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false).map { pair in
        let key = pair.prefix { $0 != "=" }
        return ["token", "s", "key", "secret"].contains(key.lowercased()) ? "\(key)=<redacted>" : String(pair)
    }
    return uri[..<q] + "?" + pairs.joined(separator: "&")
}
