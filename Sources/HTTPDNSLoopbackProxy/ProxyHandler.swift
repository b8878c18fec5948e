// One client connection of the proxy: reads a request head, then either opens a tunnel (CONNECT),
// forwards an absolute-form http:// request through the engine, serves the PAC file, or refuses.
// Every decision is `ProxyConnectionStateMachine`'s: this handler feeds it the channel's events (and
// `HeadLimiter`'s, which arrive as `ProxyClientEvent`s) and performs the actions it returns. Work that
// completes later (the head timer, the connect, the engine) re-enters the event loop through a
// `NIOLoopBound` of the handler and the channel; no `ChannelHandlerContext` is kept across it.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSListener
import HTTPDNSLookup
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

final class ProxyHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    /// Resolves a CONNECT host and connects to it on the given loop (a seam for tests).
    typealias Connector = @Sendable (_ host: String, _ port: Int, _ loop: any EventLoop) -> EventLoopFuture<any Channel>

    let shared: ProxyShared
    private let connector: Connector
    private var machine: ProxyConnectionStateMachine
    private var headTimer: Scheduled<Void>?
    /// When the CONNECT's connect began, for the tunnel's metrics.
    private var tunnelStarted: ContinuousClock.Instant?
    /// The connection's place in the listener (nil in tests that drive the handler alone).
    private let slot: ConnectionSlot?
    /// What the listener was last told: a request is in progress (or a tunnel open).
    private var busy = false
    /// The body of the request being forwarded, while it streams on.
    private var forwardedBody: ForwardedBody?
    /// Runs while a forwarded body's next part is wanted from the client (`bodyTimeout`).
    private var bodyTimer: Scheduled<Void>?
    /// Reading stopped because requests wait behind the one being answered (the machine's `pauseReading`).
    private var readsHeldForQueue = false
    /// Reading stopped because the engine has enough of the forwarded body waiting (`ForwardedBody`).
    private var readsHeldForBody = false

    init(shared: ProxyShared, slot: ConnectionSlot? = nil, connector: Connector? = nil) {
        self.shared = shared
        self.slot = slot
        self.connector =
            connector ?? { host, port, loop in ProxyHandler.connect(host: host, port: port, on: loop, shared) }
        self.machine = ProxyConnectionStateMachine(limits: .init(shared.configuration))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        startTimer(shared.configuration.requestHeadTimeout, on: context.channel) { $0.headTimerFired() }
    }

    /// Runs `fired` on the machine after `timeout`, in the one timer slot a waiting connection has (the
    /// head timer or the keep-alive timer), replacing what ran there.
    private func startTimer(
        _ timeout: Duration,
        on channel: any Channel,
        _ fired: @escaping @Sendable (inout ProxyConnectionStateMachine) -> ProxyConnectionStateMachine.Action
    ) {
        headTimer?.cancel()
        let bound = NIOLoopBound(self, eventLoop: channel.eventLoop)
        headTimer = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            let me = bound.value
            me.headTimer = nil
            me.perform(fired(&me.machine), on: channel)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        headTimer?.cancel()
        endForwardedBody(
            ForwardedBodyFailure(description: "the client connection closed before the request body ended")
        )
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let action: ProxyConnectionStateMachine.Action
        switch unwrapInboundIn(data) {
        case .head(let head): action = machine.headReceived(head)
        case .body(let chunk): action = machine.bodyReceived(chunk)
        case .end: action = machine.endReceived()
        }
        perform(action, on: context.channel)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event as? ProxyClientEvent {
        case .bytesArrived: perform(machine.bytesArrived(), on: context.channel)
        case .headTooLarge: perform(machine.headTooLarge(), on: context.channel)
        case .inputClosed: perform(machine.inputClosed(), on: context.channel)
        case nil: context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let action = error is HTTPParserError ? machine.malformedRequest("\(error)") : machine.errorCaught()
        perform(action, on: context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        endForwardedBody(
            ForwardedBodyFailure(description: "the client connection closed before the request body ended")
        )
        perform(machine.channelInactive(), on: context.channel)
        context.fireChannelInactive()
    }

    // MARK: performing the machine's actions

    /// Does what the machine asked. Runs on the channel's event loop; `upstream` is the tunnel's
    /// target when the action answers `connectSucceeded`.
    private func perform(
        _ action: ProxyConnectionStateMachine.Action,
        on channel: any Channel,
        upstream: (any Channel)? = nil
    ) {
        switch action {
        case .none:
            break
        case .cancelHeadTimer(let then):
            headTimer?.cancel()
            headTimer = nil
            perform(then, on: channel, upstream: upstream)
        case .startHeadTimer:
            startTimer(shared.configuration.requestHeadTimeout, on: channel) { $0.headTimerFired() }
        case .startKeepAliveTimer(let then):
            startTimer(shared.configuration.keepAliveTimeout, on: channel) { $0.keepAliveTimerFired() }
            perform(then, on: channel, upstream: upstream)
        case .reply(let reply):
            write(reply, on: channel)
        case .servePAC(let close):
            let pac = shared.pac(channel.localAddress?.port ?? shared.configuration.port)
            let reply = ProxyConnectionStateMachine.Reply.text(
                .ok,
                pac,
                close: close,
                contentType: "application/x-ns-proxy-autoconfig",
                newline: false
            )
            write(reply, on: channel)
        case .openTunnel(let host, let port):
            openTunnel(host: host, port: port, channel: channel)
        case .failTunnel(let host, let port, let error, let reply):
            upstream?.close(promise: nil)  // a refused tunnel keeps no connection
            let after = tunnelStarted.map { ContinuousClock.now - $0 } ?? .zero
            shared.record(.failed(host: host, port: port, after: after, error: error))
            write(reply, on: channel)
        case .establishTunnel(let host, let port, let passOnHalfClose):
            guard let upstream else {
                preconditionFailure("establishTunnel answers connectSucceeded, with its channel")
            }
            splice(channel: channel, upstream: upstream, host: host, port: port, passOnHalfClose: passOnHalfClose)
        case .closeUpstream:
            upstream?.close(promise: nil)
        case .forward(let head, let url):
            forward(head, url: url, channel: channel)
        case .forwardBody(let chunk):
            guard let body = forwardedBody else { break }
            if body.received(chunk) {
                armBodyTimer(on: channel)
            } else {
                // Enough waits for the engine: the client is not read until it asks for more (and its
                // silence meanwhile is not held against it).
                bodyTimer?.cancel()
                bodyTimer = nil
                readsHeldForBody = true
                updateReading(on: channel)
            }
        case .forwardBodyEnd:
            bodyTimer?.cancel()
            bodyTimer = nil
            forwardedBody?.end()
        case .abortForwardBody(let why, let reply):
            endForwardedBody(ForwardedBodyFailure(description: why))
            if let reply { write(reply, on: channel) }
        case .pauseReading:
            readsHeldForQueue = true
            updateReading(on: channel)
        case .resumeReading:
            readsHeldForQueue = false
            updateReading(on: channel)
        case .sequence(let actions):
            for action in actions { perform(action, on: channel, upstream: upstream) }
        case .close:
            channel.close(promise: nil)
        }
        // A connection with a request in progress (or a tunnel) is not closed to make room; one waiting
        // for a head, the first or the next, is.
        if busy == machine.isIdle {
            busy.toggle()
            if busy { slot?.busy() } else { slot?.idle() }
        }
    }

    /// Reads the client while nothing holds it: requests waiting in the machine's queue, or a forwarded
    /// body the engine has enough of. The two are separate so that neither resumes what the other holds
    /// (a queued request's body parts, replayed, may fill the engine's buffer while the queue empties).
    private func updateReading(on channel: any Channel) {
        try? channel.syncOptions?.setOption(.autoRead, value: !readsHeldForQueue && !readsHeldForBody)
    }

    /// The engine wants more of the forwarded body (`timed`: its timer runs again), or stopped reading it
    /// (the request failed or was answered early), so the rest of it is drained and the connection's end
    /// seen. A late call for a body already replaced by the next request's only lets one more read in,
    /// which the next body's own limit stops again.
    private func bodyReadable(on channel: any Channel, timed: Bool) {
        readsHeldForBody = false
        updateReading(on: channel)
        if timed { armBodyTimer(on: channel) }
    }

    /// Writes `reply` through the response encoder (the handler is last in the pipeline, so the
    /// channel's write starts where the handler's own would).
    private func write(_ reply: ProxyConnectionStateMachine.Reply, on channel: any Channel) {
        channel.write(
            HTTPServerResponsePart.head(
                HTTPResponseHead(version: .http1_1, status: reply.status, headers: reply.headers)
            ),
            promise: nil
        )
        if !reply.body.isEmpty {
            channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: reply.body))), promise: nil)
        }
        let done = channel.writeAndFlush(HTTPServerResponsePart.end(nil))
        if reply.close {
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    // MARK: CONNECT

    private func openTunnel(host: String, port: Int, channel: any Channel) {
        tunnelStarted = .now
        let loop = channel.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        connector(host, port, loop).hop(to: loop).whenComplete { result in
            let me = bound.value
            switch result {
            case .success(let upstream):
                let toItself = upstream.remoteAddress != nil && upstream.remoteAddress == channel.localAddress
                me.perform(me.machine.connectSucceeded(toItself: toItself), on: channel, upstream: upstream)
            case .failure(let error):
                me.perform(me.machine.connectFailed(Self.describe(error)), on: channel)
            }
        }
    }

    /// Connects to `host:port` through the engine's connection factory, the one way to a connection:
    /// resolved, ranked, NAT64 where needed, happy eyeballs; no TLS (the client speaks it inside).
    private static func connect(
        host: String,
        port: Int,
        on loop: any EventLoop,
        _ shared: ProxyShared
    ) -> EventLoopFuture<any Channel> {
        let timeout = shared.configuration.connectTimeout
        return loop.makeFutureWithTask {
            try await shared.engine.openTunnel(host: host, port: port, on: loop, timeout: timeout)
        }
    }

    /// Answers 200, then turns both channels into a byte pipe.
    private func splice(
        channel client: any Channel,
        upstream: any Channel,
        host: String,
        port: Int,
        passOnHalfClose: Bool
    ) {
        let started = tunnelStarted ?? .now
        let counters = TunnelCounters()
        let (clientGlue, upstreamGlue) = GlueHandler.matchedPair(counters: counters)
        let address = upstream.remoteAddress.map { formatAuthority(host: $0.ipAddress ?? "?", port: $0.port ?? 0) }
        let shared = self.shared
        let idle = TimeAmount(shared.configuration.tunnelIdleTimeout)
        do {
            let sync = client.pipeline.syncOperations
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
            let decoderRemoved = client.eventLoop.makePromise(of: Void.self)
            decoderRemoved.futureResult.whenComplete { _ in
                upstream.flush()
                if passOnHalfClose { upstream.close(mode: .output, promise: nil) }
            }
            sync.removeHandler(try sync.handler(type: HeadLimiter.self), promise: nil)
            sync.removeHandler(self, promise: nil)
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
        if let e = error as? HTTPEngineError { return e.description }
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

    /// Starts the body's timer: the client has `bodyTimeout` to send the next part.
    private func armBodyTimer(on channel: any Channel) {
        bodyTimer?.cancel()
        let bound = NIOLoopBound(self, eventLoop: channel.eventLoop)
        bodyTimer = channel.eventLoop.scheduleTask(in: TimeAmount(shared.configuration.bodyTimeout)) {
            let me = bound.value
            me.bodyTimer = nil
            me.perform(me.machine.bodyTimedOut(), on: channel)
        }
    }

    /// The forwarded request is over (answered, failed or given up): a body still open fails with
    /// `error`, its timer stops, and it holds reading no more (`updateReading` applies that).
    private func endForwardedBody(_ error: any Error) {
        bodyTimer?.cancel()
        bodyTimer = nil
        if let body = forwardedBody, !body.ended { body.fail(error) }
        forwardedBody = nil
        readsHeldForBody = false
    }

    private func forward(_ head: HTTPRequestHead, url given: HTTPURL, channel: any Channel) {
        let shared = self.shared
        let loop = channel.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        let keepAlive = head.isKeepAlive
        // A body (the head declares one) streams on as it arrives; the engine frames it again itself.
        let length = head.headers.first(name: "content-length").flatMap { Int($0) }
        let chunked = head.headers[canonicalForm: "transfer-encoding"].contains { $0.lowercased() == "chunked" }
        let body: HTTPRequestBody?
        if chunked || (length ?? 0) > 0 {
            let forwarded = ForwardedBody(
                on: loop,
                wanted: { bound.value.bodyReadable(on: channel, timed: true) },
                stopped: { bound.value.bodyReadable(on: channel, timed: false) }
            )
            forwardedBody = forwarded
            armBodyTimer(on: channel)
            let reader = forwarded.reader
            body = .stream(length: chunked ? nil : length) {
                AsyncThrowingStream(unfolding: { try await reader.next() })
            }
        } else {
            body = nil
        }
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
            headers.remove(name: "content-length")
            headers.remove(name: "transfer-encoding")
            let request = HTTPEngineRequest(method: head.method, url: url, headers: headers, body: body)
            do {
                let response = try await shared.engine.execute(request)
                var out = response.headers
                removeHopByHop(&out)
                out.remove(name: "transfer-encoding")
                if !out.contains(name: "content-length") { out.add(name: "transfer-encoding", value: "chunked") }
                if !keepAlive { out.add(name: "connection", value: "close") }
                // The machine learns of the response before its first byte goes out, so that a failure
                // from here on closes the connection instead of answering 502 inside a response.
                try await loop.submit {
                    let me = bound.value
                    me.perform(me.machine.forwardResponseStarted(), on: channel)
                }.get()
                try await channel.writeAndFlush(
                    HTTPServerResponsePart.head(
                        HTTPResponseHead(version: .http1_1, status: response.status, headers: out)
                    )
                )
                for try await chunk in response.body {
                    try await channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(chunk)))
                }
                try await channel.writeAndFlush(HTTPServerResponsePart.end(nil))
                loop.execute {
                    let me = bound.value
                    me.endForwardedBody(
                        ForwardedBodyFailure(description: "the origin answered before the request body ended")
                    )
                    // Read again, unless requests wait behind this one: the machine serves them next.
                    me.updateReading(on: channel)
                    me.perform(me.machine.forwardFinished(), on: channel)
                }
            } catch {
                let message = "could not fetch \(url): \(error)"
                loop.execute {
                    let me = bound.value
                    me.endForwardedBody(error)
                    me.perform(me.machine.forwardFailed(message), on: channel)
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
