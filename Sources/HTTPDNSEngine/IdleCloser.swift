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
