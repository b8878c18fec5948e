// The small handlers and helpers a connection's setup uses: the peer's address noted at connect, our
// ranked addresses handed to NIO's happy eyeballs, and the watcher that turns a failed TLS setup into an
// error.

import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

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
