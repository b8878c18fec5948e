// Small channel handlers and helpers the server and the proxy share.

import NIOCore

/// Closes its channel on an `IdleStateHandler` event: put it right after the IdleStateHandler whose
/// timeout should end the connection (the server's idle connections, the proxy's idle tunnels).
package final class IdleCloser: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = NIOAny

    package init() {}

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// Writes `text` as raw bytes from `context`, below any HTTP codec that follows it in the pipeline
/// (a reply for a request no codec will answer: a 408 or 431 before a whole head), then closes.
package func writeRawAndClose(_ text: String, from context: ChannelHandlerContext) {
    let channel = context.channel
    context.writeAndFlush(NIOAny(ByteBuffer(string: text))).whenComplete { _ in channel.close(promise: nil) }
}
