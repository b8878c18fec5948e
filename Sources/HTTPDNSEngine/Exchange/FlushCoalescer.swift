import NIOCore

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
