// The small handlers and helpers a connection's setup uses: the peer's address noted at connect, our
// ranked addresses handed to NIO's happy eyeballs, the watcher that turns a failed TLS setup into an
// error, and the handler that drops a connection an exchange abandoned.

import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Notes the remote address of a channel: the address it connects to, which is its peer's. Taken from the
/// connect, not the socket: under TCP Fast Open a deferred connect has no peer until the server answers,
/// so the socket reports none when the channel becomes active. Gone from the pipeline once it is.
final class RemoteAddressRecorder: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    let remotes: NIOLockedValueBox<[ObjectIdentifier: SocketAddress]>

    init(remotes: NIOLockedValueBox<[ObjectIdentifier: SocketAddress]>) { self.remotes = remotes }

    func connect(context: ChannelHandlerContext, to address: SocketAddress, promise: EventLoopPromise<Void>?) {
        let id = ObjectIdentifier(context.channel)
        remotes.withLockedValue { $0[id] = address }
        context.connect(to: address, promise: promise)
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

/// Asks the front of an HTTP/1.1 connection's pipeline to drop the connection at once: sent by an
/// exchange that failed or was cancelled midway (the connection can carry nothing more).
struct AbandonConnection {}

/// First in every connection's pipeline, in front of TLS: closes the socket itself on
/// `AbandonConnection`, so the close never passes through NIOSSL.
///
/// Why: a close through NIOSSL is graceful. It sends close_notify and arms a 5-second shutdown timer
/// that it does not cancel when the socket goes away without the peer's close_notify (nginx drops an
/// aborted request that way), and the timer keeps the handler, its buffers and the pipeline (about
/// 40 KiB) alive until it fires. Uploads cancelled at 230 a second held 45 MiB of heap that way in the
/// soak. A half-sent request gains nothing from close_notify: the server sees the body cut short
/// either way.
final class ConnectionAbandoner: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is AbandonConnection else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        context.close(promise: promise)
    }
}

/// Hands NIO's happy-eyeballs connector the addresses we already have, in our order. With
/// `ipv6Later`, the IPv6 ones come an attempt delay after the IPv4 ones, so the race starts with IPv4
/// and IPv6 follows (the host's IPv6 failed lately: `FamilyMemory`).
final class RankedResolver: Resolver, Sendable {
    let ipv4: [SocketAddress]
    let ipv6: [SocketAddress]
    let eventLoop: any EventLoop
    let ipv6Later: Bool

    init(ipv4: [SocketAddress], ipv6: [SocketAddress], eventLoop: any EventLoop, ipv6Later: Bool = false) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.eventLoop = eventLoop
        self.ipv6Later = ipv6Later && !ipv4.isEmpty
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        eventLoop.makeSucceededFuture(ipv4)
    }
    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        guard ipv6Later else { return eventLoop.makeSucceededFuture(ipv6) }
        let ipv6 = self.ipv6
        return eventLoop.scheduleTask(in: TimeAmount(ConnectionFactory.attemptDelay)) { ipv6 }.futureResult
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
