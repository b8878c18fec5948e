// A small HTTP server: TLS with ALPN (h2, http/1.1) when given certificates, plain HTTP/1.1 or h2c
// (prior knowledge, recognised by the connection preface) otherwise. Each request is read whole (up to
// a bound) and answered by an async function. Used by the HTTPDNS service and by the demo's origins.
//
// Bounds: connections (beyond the limit a new connection is closed at once), request body size (413),
// header size (NIO's parser limit); a malformed request gets 400 and its connection closed, the rest of
// the server carries on.

import HTTPDNSEngine
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// One request, read whole.
public struct ListenerRequest: Sendable {
    public var method: HTTPMethod
    public var uri: String
    public var headers: HTTPHeaders
    public var body: ByteBuffer
    /// "http/1.1" or "h2".
    public var version: String
    public var isTLS: Bool
    public var remote: String
}

/// One response.
public struct ListenerResponse: Sendable {
    public var status: HTTPResponseStatus
    public var headers: HTTPHeaders
    public var body: ByteBuffer

    public init(
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

    public init(status: HTTPResponseStatus, text: String, headers: HTTPHeaders = [:]) {
        self.init(status: status, body: Array((text + "\n").utf8), headers: headers)
    }
}

/// Listens on one address; `stop()` closes it and its connections.
public final class HTTPListener: Sendable {
    public typealias Handler = @Sendable (ListenerRequest) async -> ListenerResponse
    /// Answers on the event loop without waiting, or returns nil to hand the request to `Handler`.
    public typealias ImmediateHandler = @Sendable (ListenerRequest) -> ListenerResponse?

    public struct Limits: Sendable {
        public var maxConnections = 1024
        public var maxRequestBytes = 64 * 1024
        public init() {}
    }

    public let host: String
    public let port: Int
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
    public static func start(
        host: String,
        port: Int,
        tls: NIOSSLContext?,
        limits: Limits = Limits(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        immediate: ImmediateHandler? = nil,
        handler: @escaping Handler
    ) async throws -> HTTPListener {
        let connections = ConnectionLimiter(limit: limits.maxConnections)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                guard connections.admit(channel) else {
                    logger.debug("connection refused: limit reached", metadata: ["limit": "\(limits.maxConnections)"])
                    return channel.close()
                }
                return channel.eventLoop.makeCompletedFuture {
                    let context = ConnectionContext(
                        isTLS: tls != nil,
                        remote: channel.remoteAddress.map { "\($0)" } ?? "?",
                        limits: limits,
                        logger: logger,
                        immediate: immediate,
                        handler: handler
                    )
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
            .bind(host: host, port: port).get()
        return HTTPListener(
            host: host,
            port: channel.localAddress?.port ?? port,
            channel: channel,
            connections: connections
        )
    }

    static func configure(_ channel: any Channel, h2: Bool, context: ConnectionContext) throws {
        let sync = channel.pipeline.syncOperations
        if h2 {
            _ = try sync.configureHTTP2Pipeline(
                mode: .server,
                connectionConfiguration: .init(),
                streamConfiguration: .init()
            ) { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                    try stream.pipeline.syncOperations.addHandler(RequestHandler(context: context, version: "h2"))
                }
            }
        } else {
            try sync.configureHTTPServerPipeline(withErrorHandling: true)
            try sync.addHandler(RequestHandler(context: context, version: "http/1.1"))
        }
    }

    /// Open connections now.
    public var openConnections: Int { connections.count }

    public func stop() async {
        try? await channel.close()
        await connections.closeAll()
    }
}

struct ConnectionContext: Sendable {
    var isTLS: Bool
    var remote: String
    var limits: HTTPListener.Limits
    var logger: Logger
    var immediate: HTTPListener.ImmediateHandler?
    var handler: HTTPListener.Handler
}

/// On a plain listener: an h2 connection preface means h2c with prior knowledge, anything else HTTP/1.1.
final class PrefaceSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    let context: ConnectionContext
    var buffered: ByteBuffer?

    init(context: ConnectionContext) { self.context = context }

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

/// Reads one request at a time, answers it through the async handler.
final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let context: ConnectionContext
    let version: String
    var head: HTTPRequestHead?
    var body = ByteBuffer()
    var tooLarge = false

    init(context: ConnectionContext, version: String) {
        self.context = context
        self.version = version
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body.clear()
            tooLarge = false
        case .body(var chunk):
            if body.readableBytes + chunk.readableBytes > self.context.limits.maxRequestBytes {
                tooLarge = true
            } else {
                body.writeBuffer(&chunk)
            }
        case .end:
            guard let head else { return }
            self.head = nil
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
                remote: self.context.remote
            )
            if let immediate = self.context.immediate, let response = immediate(request) {
                self.context.logger.debug(
                    "request",
                    metadata: [
                        "method": "\(head.method)", "uri": "\(head.uri)", "status": "\(response.status.code)",
                        "version": "\(version)",
                    ]
                )
                write(response, keepAlive: keepAlive, context: context)
                return
            }
            let handler = self.context.handler
            let logger = self.context.logger
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask { await handler(request) }.whenSuccess { response in
                let (me, context) = bound.value
                logger.debug(
                    "request",
                    metadata: [
                        "method": "\(head.method)", "uri": "\(head.uri)", "status": "\(response.status.code)",
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
        if !keepAlive, version == "http/1.1" { headers.replaceOrAdd(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))),
            promise: nil
        )
        context.write(wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive, version == "http/1.1" {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.context.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
