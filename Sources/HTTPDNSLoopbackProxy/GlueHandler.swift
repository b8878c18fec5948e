// Splices two channels on the same event loop: bytes read on one are written to the other. Reads stop
// while the other side cannot take more (writability), so a slow reader slows the fast writer instead of
// filling memory. A half-close is passed on; a full close closes the partner.

import NIOConcurrencyHelpers
import NIOCore

/// Bytes each way through one tunnel.
final class TunnelCounters: Sendable {
    private let box = NIOLockedValueBox((up: 0, down: 0))
    func add(up: Int = 0, down: Int = 0) {
        box.withLockedValue {
            $0.up += up; $0.down += down
        }
    }
    var value: (up: Int, down: Int) { box.withLockedValue { $0 } }
}

final class GlueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private let counters: TunnelCounters
    private let isClientSide: Bool

    private init(counters: TunnelCounters, isClientSide: Bool) {
        self.counters = counters
        self.isClientSide = isClientSide
    }

    /// A pair: the first goes on the client's channel, the second on the upstream's.
    static func matchedPair(counters: TunnelCounters) -> (GlueHandler, GlueHandler) {
        let client = GlueHandler(counters: counters, isClientSide: true)
        let upstream = GlueHandler(counters: counters, isClientSide: false)
        client.partner = upstream
        upstream.partner = client
        return (client, upstream)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if isClientSide { counters.add(up: buffer.readableBytes) } else { counters.add(down: buffer.readableBytes) }
        partner?.partnerWrite(buffer)
    }

    func channelReadComplete(context: ChannelHandlerContext) { partner?.partnerFlush() }

    func channelInactive(context: ChannelHandlerContext) { partner?.partnerClose() }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            partner?.partnerHalfClose()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { partner?.partnerBecameWritable() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if partner?.isWritable ?? true {
            context.read()
        } else {
            pendingRead = true
        }
    }

    private var isWritable: Bool { context?.channel.isWritable ?? false }

    private func partnerWrite(_ buffer: ByteBuffer) { context?.write(wrapOutboundOut(buffer), promise: nil) }
    private func partnerFlush() { context?.flush() }
    private func partnerClose() { context?.close(promise: nil) }
    private func partnerHalfClose() { context?.close(mode: .output, promise: nil) }

    private func partnerBecameWritable() {
        if pendingRead {
            pendingRead = false
            context?.read()
        }
    }
}
