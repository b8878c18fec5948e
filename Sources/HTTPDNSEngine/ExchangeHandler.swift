// One request/response exchange on a channel that speaks HTTPClientRequestPart/ResponsePart: an
// HTTP/1.1 connection, or an HTTP/2 stream behind HTTP2FramePayloadToHTTP1ClientCodec.
//
// Back-pressure: the response body goes into a NIOThrowingAsyncSequenceProducer. When the consumer
// falls behind, `read` calls are held back, so the kernel buffer fills (HTTP/1.1, TCP flow control) or
// the stream window stays closed (HTTP/2, only this stream pauses). When the consumer goes away before
// the end, the channel is closed: the connection for HTTP/1.1, the stream (RST_STREAM) for HTTP/2.
// The idle-read timer runs only while we are waiting on the server, never while the consumer is slow.

import NIOCore
import NIOHTTP1

final class ExchangeHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    enum State {
        case waitingForHead
        case streamingBody
        case finished
    }

    let head: EventLoopPromise<HTTPResponseHead>
    /// Succeeds when the response is complete: true if the connection can carry another request.
    let end: EventLoopPromise<Bool>
    let source: HTTPResponseBody.Producer.Source
    let idleTimeout: TimeAmount
    let host: String
    var state = State.waitingForHead
    var demand = true
    var pendingRead = false
    var requestComplete = false
    var keepAlive = true
    var idleTask: Scheduled<Void>?
    var lastActivity = NIODeadline.now()
    var context: ChannelHandlerContext?

    init(
        head: EventLoopPromise<HTTPResponseHead>,
        end: EventLoopPromise<Bool>,
        source: HTTPResponseBody.Producer.Source,
        idleTimeout: TimeAmount,
        host: String
    ) {
        self.head = head
        self.end = end
        self.source = source
        self.idleTimeout = idleTimeout
        self.host = host
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        armIdleTimer()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTask?.cancel()
        self.context = nil
        if state != .finished { fail(HTTPEngineError(.protocolError, "exchange abandoned")) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state != .finished else { return }
        armIdleTimer()
        switch unwrapInboundIn(data) {
        case .head(let h):
            if h.status.code >= 100, h.status.code < 200, h.status != .switchingProtocols { return }
            state = .streamingBody
            keepAlive = h.isKeepAlive
            head.succeed(h)
        case .body(let chunk):
            switch source.yield(chunk) {
            case .produceMore:
                break
            case .stopProducing:
                demand = false  // the idle check stands down while the consumer is behind
            case .dropped:
                abort(HTTPEngineError(.cancelled, "the response body was dropped before its end"))
            }
        case .end:
            state = .finished
            idleTask?.cancel()
            // Give the connection back before the consumer can see the end: its next request must find it.
            end.succeed(keepAlive && requestComplete)
            source.finish()
        }
    }

    func read(context: ChannelHandlerContext) {
        if demand || state == .waitingForHead {
            context.read()
        } else {
            pendingRead = true
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { requestComplete = true }
        lastActivity = .now()  // a long upload is not an idle server
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Parser, TLS and stream errors become the engine's own, with a code (a truncated body, for
        // one, is NIO's "stream ended at an unexpected time").
        if let error = error as? HTTPEngineError {
            abort(error)
        } else {
            abort(
                HTTPEngineError(
                    .protocolError,
                    "the response from \(host) was cut short or malformed: \(error)",
                    underlying: error
                )
            )
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if state != .finished {
            fail(HTTPEngineError(.protocolError, "\(host) closed the connection before the response was complete"))
        }
        context.fireChannelInactive()
    }

    // MARK: Driven from outside (on the event loop)

    func produceMore() {
        guard state != .finished, let context else { return }
        demand = true
        armIdleTimer()
        if pendingRead {
            pendingRead = false
            context.read()
        }
    }

    /// Fails the exchange and closes the channel (the connection for HTTP/1.1, the stream for HTTP/2).
    func abort(_ error: any Error) {
        guard state != .finished else { return }
        fail(error)
        context?.close(promise: nil)
    }

    private func fail(_ error: any Error) {
        guard state != .finished else { return }
        if state == .waitingForHead { head.fail(error) }
        state = .finished
        idleTask?.cancel()
        source.finish(error)
        end.fail(error)
    }

    /// Notes activity; the timer itself is only scheduled when none is pending, and when it fires it
    /// re-arms for the time left since the last activity. So a busy transfer costs no timer churn.
    private func armIdleTimer() {
        lastActivity = .now()
        guard idleTask == nil, let context, state != .finished else { return }
        scheduleIdleCheck(context: context, in: idleTimeout)
    }

    private func scheduleIdleCheck(context: ChannelHandlerContext, in delay: TimeAmount) {
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        idleTask = context.eventLoop.scheduleTask(in: delay) {
            loopBound.value.idleCheck()
        }
    }

    private func idleCheck() {
        idleTask = nil
        guard state != .finished, demand, let context else { return }
        let quiet = NIODeadline.now() - lastActivity
        if quiet >= idleTimeout {
            abort(HTTPEngineError(.readTimeout, "no data from \(host) for \(idleTimeout.nanoseconds / 1_000_000) ms"))
        } else {
            scheduleIdleCheck(context: context, in: idleTimeout - quiet)
        }
    }
}

/// Tells the handler when the body's consumer wants more or has gone, hopping to the event loop.
struct BodyDelegate: NIOAsyncSequenceProducerDelegate {
    let handler: NIOLoopBoundBox<ExchangeHandler?>

    func produceMore() {
        let handler = self.handler
        handler.eventLoop.execute { handler.value?.produceMore() }
    }

    func didTerminate() {
        let handler = self.handler
        handler.eventLoop.execute {
            handler.value?.abort(HTTPEngineError(.cancelled, "the response body was abandoned"))
        }
    }
}
