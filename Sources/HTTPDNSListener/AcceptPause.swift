// What a listener does when accept(2) fails for lack of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
// ENOMEM): stop accepting for a moment, then try again, as nginx disables its accept events for 500 ms.
//
// NIO's AcceptBackoffHandler is not enough on Linux: it delays the channel's next read, but a failed
// accept leaves the listening socket registered with epoll, which is level-triggered, so the event loop
// calls accept again at once, and again: measured 12,000 failing accept4 calls a second, half a core,
// for as long as the descriptors stay used. Turning the channel's autoRead off takes the socket out of
// epoll; turning it on again puts it back. Connections waiting meanwhile stay in the kernel's backlog.

import NIOCore
import NIOPosix  // the errno constants, on every platform

/// On a listening (server) channel: pauses accepting for `pause` after accept failed for lack of
/// resources. Lives on the listener's event loop.
package final class AcceptPause: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = any Channel

    private let pause: TimeAmount
    private var resume: Scheduled<Void>?
    /// Turns accepting on or off: the channel's autoRead (a seam for tests: an EmbeddedChannel reports
    /// autoRead as always on).
    private let setAccepting: (any Channel, Bool) -> Void

    package init(
        pause: TimeAmount = .milliseconds(500),
        setAccepting: @escaping (any Channel, Bool) -> Void = { channel, on in
            try? channel.syncOptions?.setOption(.autoRead, value: on)
        }
    ) {
        self.pause = pause
        self.setAccepting = setAccepting
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let code = (error as? IOError)?.errnoCode, [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(code) else {
            context.fireErrorCaught(error)
            return
        }
        guard resume == nil else { return }
        let channel = context.channel
        setAccepting(channel, false)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        resume = context.eventLoop.scheduleTask(in: pause) {
            bound.value.resume = nil
            bound.value.setAccepting(channel, true)
        }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        resume?.cancel()
        resume = nil
        context.fireChannelInactive()
    }
}

extension ServerBootstrap {
    /// A listener that reuses its address, pauses accepting when out of descriptors (`AcceptPause`) and
    /// counts what it accepts for `connections` (`AcceptCounting`): `httpdns serve`'s and the loopback
    /// proxy's.
    package func pausingAccepts(countingFor connections: ConnectionLimiter) -> ServerBootstrap {
        serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptPause())
                    try channel.pipeline.syncOperations.addHandler(AcceptCounting(connections))
                }
            }
    }
}
