// One client connection of the proxy: reads a request head, then either opens a tunnel (CONNECT),
// forwards an absolute-form http:// request through the engine, serves the PAC file, or refuses.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

final class ProxyHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    enum State {
        case idle
        case forwarding(HTTPRequestHead, HTTPURL, ByteBuffer)
        case busy  // a forward or a tunnel setup is running; further parts are dropped
    }

    let shared: ProxyShared
    let limiter: HeadLimiter
    var state = State.idle
    var headTimer: Scheduled<Void>?
    var tooLarge = false

    init(shared: ProxyShared, limiter: HeadLimiter) {
        self.shared = shared
        self.limiter = limiter
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let limiter = NIOLoopBound(self.limiter, eventLoop: context.eventLoop)
        headTimer = context.eventLoop.scheduleTask(
            in: .nanoseconds(shared.configuration.requestHeadTimeout.nanoseconds)
        ) {
            limiter.value.replyRawAndClose(
                "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) { headTimer?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (unwrapInboundIn(data), state) {
        case (.head(let head), .idle):
            headTimer?.cancel()
            limiter.done = true
            handleHead(head, context: context)
        case (.body(var chunk), .forwarding(let head, let url, var body)):
            if body.readableBytes + chunk.readableBytes > shared.configuration.maxForwardBodyBytes {
                tooLarge = true
            } else {
                body.writeBuffer(&chunk)
            }
            state = .forwarding(head, url, body)
        case (.end, .forwarding(let head, let url, let body)):
            state = .busy
            if tooLarge {
                reply(
                    .payloadTooLarge,
                    "request body larger than \(shared.configuration.maxForwardBodyBytes) bytes",
                    close: true,
                    context: context
                )
            } else {
                forward(head, url: url, body: body, context: context)
            }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError {
            reply(.badRequest, "malformed request: \(error)", close: true, context: context)
        } else {
            context.close(promise: nil)
        }
    }

    // MARK: routing

    private func handleHead(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        if let credentials = shared.configuration.credentials {
            let expected = "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
            guard head.headers["proxy-authorization"].first == expected else {
                state = .busy
                reply(
                    .proxyAuthenticationRequired,
                    "proxy authentication required",
                    close: true,
                    context: context,
                    headers: ["proxy-authenticate": "Basic realm=\"httpdns\""]
                )
                return
            }
        }
        switch ProxyRequestTarget.parse(method: head.method.rawValue, uri: head.uri) {
        case .tunnel(let host, let port):
            state = .busy
            connect(host: host, port: port, context: context)
        case .forward(let parts):
            let url = HTTPURL(parts)
            // The same port rule as CONNECT: otherwise http://127.0.0.1:ANYPORT/ reaches any local service.
            guard shared.configuration.allowedPorts.contains(url.port) else {
                state = .busy
                reply(
                    .forbidden,
                    "forwarding to port \(url.port) is not allowed (allowed: \(allowedPortsText))",
                    close: true,
                    context: context
                )
                return
            }
            state = .forwarding(head, url, context.channel.allocator.buffer(capacity: 0))
        case .pac:
            let pac = shared.pac((context.channel.localAddress?.port) ?? shared.configuration.port)
            reply(
                .ok,
                pac,
                close: !head.isKeepAlive,
                context: context,
                contentType: "application/x-ns-proxy-autoconfig",
                newline: false
            )
        case .invalid(let why):
            state = .busy
            reply(.badRequest, why, close: true, context: context)
        }
    }

    private func reply(
        _ status: HTTPResponseStatus,
        _ text: String,
        close: Bool,
        context: ChannelHandlerContext,
        headers extra: HTTPHeaders = [:],
        contentType: String = "text/plain",
        newline: Bool = true
    ) {
        let body = ByteBuffer(string: newline ? text + "\n" : text)
        var headers = extra
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: "\(body.readableBytes)")
        if close { headers.add(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
            promise: nil
        )
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if close {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        } else {
            state = .idle
        }
    }

    /// The allowed ports, for the 403 that refuses another (CONNECT and absolute-form alike).
    private var allowedPortsText: String {
        shared.configuration.allowedPorts.sorted().map(String.init).joined(separator: ", ")
    }

    // MARK: CONNECT

    private func connect(host: String, port: Int, context: ChannelHandlerContext) {
        guard shared.configuration.allowedPorts.contains(port) else {
            reply(
                .forbidden,
                "CONNECT to port \(port) is not allowed (allowed: \(allowedPortsText))",
                close: true,
                context: context
            )
            shared.record(.failed(host: host, port: port, after: .zero, error: "port not allowed"))
            return
        }
        let started = ContinuousClock.now
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        let shared = self.shared
        var bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(.nanoseconds(shared.configuration.connectTimeout.nanoseconds))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.allowRemoteHalfClosure, value: true)
        let future: EventLoopFuture<any Channel>
        // An IPv4 literal on a network without an IPv4 route goes through the resolver too, which
        // connects it through NAT64.
        if let ip = IPAddress(host), ip.isIPv6 || shared.resolver.path.state.stack?.ipv4 != false {
            do {
                future = bootstrap.connect(to: try SocketAddress(ipAddress: ip.description, port: port))
            } catch {
                future = loop.makeFailedFuture(error)
            }
        } else {
            bootstrap = bootstrap.resolver(HTTPDNSNIOResolver(shared.resolver, eventLoop: loop))
            future = bootstrap.connect(host: host, port: port)
        }
        future.hop(to: loop).whenComplete { result in
            let (me, context) = bound.value
            switch result {
            case .success(let upstream):
                me.splice(context: context, upstream: upstream, host: host, port: port, started: started)
            case .failure(let error):
                let why = Self.describe(error)
                shared.record(.failed(host: host, port: port, after: ContinuousClock.now - started, error: why))
                let authority = formatAuthority(host: host, port: port)
                me.reply(.badGateway, "could not connect to \(authority): \(why)", close: true, context: context)
            }
        }
    }

    /// Answers 200, then turns both channels into a byte pipe.
    private func splice(
        context: ChannelHandlerContext,
        upstream: any Channel,
        host: String,
        port: Int,
        started: ContinuousClock.Instant
    ) {
        let client = context.channel
        let counters = TunnelCounters()
        let (clientGlue, upstreamGlue) = GlueHandler.matchedPair(counters: counters)
        let address = upstream.remoteAddress.map { formatAuthority(host: $0.ipAddress ?? "?", port: $0.port ?? 0) }
        let shared = self.shared
        let idle = TimeAmount.nanoseconds(shared.configuration.tunnelIdleTimeout.nanoseconds)
        do {
            let sync = context.pipeline.syncOperations
            sync.removeHandler(try sync.handler(type: HTTPResponseEncoder.self), promise: nil)
            var established = client.allocator.buffer(capacity: 64)
            established.writeString("HTTP/1.1 200 Connection Established\r\n\r\n")
            client.writeAndFlush(established, promise: nil)
            try sync.addHandler(IdleStateHandler(allTimeout: idle))
            try sync.addHandler(IdleCloser())
            try sync.addHandler(clientGlue)
            try upstream.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: idle))
            try upstream.pipeline.syncOperations.addHandler(IdleCloser())
            try upstream.pipeline.syncOperations.addHandler(upstreamGlue)
            // Leave the HTTP handlers; the decoder hands on any bytes already read (e.g. a ClientHello).
            // Those arrive without a read-complete, so they are flushed here, and a half-close the client
            // made before the tunnel existed is passed on after them.
            let inputClosed = limiter.inputClosed
            let decoderRemoved = context.eventLoop.makePromise(of: Void.self)
            decoderRemoved.futureResult.whenComplete { _ in
                upstream.flush()
                if inputClosed { upstream.close(mode: .output, promise: nil) }
            }
            sync.removeHandler(limiter, promise: nil)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            sync.removeHandler(
                try sync.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self),
                promise: decoderRemoved
            )
        } catch {
            upstream.close(promise: nil)
            client.close(promise: nil)
            return
        }
        let recorded = NIOLockedValueBox(false)
        let finish: @Sendable () -> Void = {
            guard
                recorded.withLockedValue({
                    let first = !$0; $0 = true; return first
                })
            else { return }
            let (up, down) = counters.value
            shared.record(
                .init(
                    host: host,
                    port: port,
                    address: address,
                    bytesUp: up,
                    bytesDown: down,
                    duration: ContinuousClock.now - started,
                    error: nil
                )
            )
        }
        client.closeFuture.and(upstream.closeFuture).whenComplete { _ in finish() }
        client.closeFuture.whenComplete { _ in upstream.close(promise: nil) }
        upstream.closeFuture.whenComplete { _ in client.close(promise: nil) }
    }

    static func describe(_ error: any Error) -> String {
        if let e = error as? NIOConnectionError {
            if let dns = e.dnsAError ?? e.dnsAAAAError, e.connectionErrors.isEmpty {
                return "name not resolved: \(dns)"
            }
            let attempts = e.connectionErrors.map { "\($0.target.ipAddress ?? "?"): \($0.error)" }
            return attempts.isEmpty ? "no address" : attempts.joined(separator: "; ")
        }
        return "\(error)"
    }

    // MARK: forwarding http://

    private func forward(_ head: HTTPRequestHead, url given: HTTPURL, body: ByteBuffer, context: ChannelHandlerContext)
    {
        let shared = self.shared
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        let keepAlive = head.isKeepAlive
        let channel = context.channel
        loop.makeFutureWithTask { () -> Void in
            var url = given
            if shared.configuration.upgradeToHTTPS.contains(where: { $0.matches(url.host) }) {
                url = HTTPURL(
                    scheme: "https",
                    host: url.host,
                    port: url.port == 80 ? 443 : url.port,
                    target: url.target
                )
            }
            var headers = head.headers
            removeHopByHop(&headers)
            headers.remove(name: "proxy-authorization")
            headers.remove(name: "host")
            let request = HTTPRequest(
                method: head.method,
                url: url,
                headers: headers,
                body: body.readableBytes > 0 ? .bytes(body) : nil
            )
            var headSent = false
            do {
                let response = try await shared.engine.execute(request)
                var out = response.headers
                removeHopByHop(&out)
                out.remove(name: "transfer-encoding")
                if !out.contains(name: "content-length") { out.add(name: "transfer-encoding", value: "chunked") }
                if !keepAlive { out.add(name: "connection", value: "close") }
                try await channel.writeAndFlush(
                    HTTPServerResponsePart.head(
                        HTTPResponseHead(version: .http1_1, status: response.status, headers: out)
                    )
                )
                headSent = true
                for try await chunk in response.body {
                    try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(chunk)))
                }
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil))
                loop.execute {
                    let (me, _) = bound.value
                    me.state = .idle
                    me.tooLarge = false
                    // A client that half-closed after its request has nothing more to ask.
                    if !keepAlive || me.limiter.inputClosed { channel.close(promise: nil) }
                }
            } catch {
                // Mid-body the only honest signal left is closing the connection.
                if headSent {
                    channel.close(promise: nil)
                    return
                }
                let message = "could not fetch \(url): \(error)"
                loop.execute {
                    let (me, context) = bound.value
                    me.reply(.badGateway, message, close: true, context: context)
                }
            }
        }.whenFailure { _ in channel.close(promise: nil) }
    }
}

/// Removes hop-by-hop fields (RFC 9110 §7.6.1): the fixed ones, and every field the Connection header
/// names (a client's `Connection: close, X-Secret` must not carry X-Secret past the proxy).
func removeHopByHop(_ headers: inout HTTPHeaders) {
    let named = headers["connection"].flatMap { $0.split(separator: ",") }.map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
    }
    for name in named where !name.isEmpty { headers.remove(name: name) }
    for name in ["connection", "proxy-connection", "keep-alive", "te", "trailer", "upgrade"] {
        headers.remove(name: name)
    }
}

extension HTTPDNSProxy.TunnelMetrics {
    /// A tunnel that could not be opened.
    static func failed(host: String, port: Int, after duration: Duration, error: String) -> Self {
        .init(host: host, port: port, address: nil, bytesUp: 0, bytesDown: 0, duration: duration, error: error)
    }
}
