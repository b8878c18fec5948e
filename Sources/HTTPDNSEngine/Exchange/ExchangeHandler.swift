// One request/response exchange on an HTTP/1.1 connection, whose pipeline speaks
// HTTPClientRequestPart/ResponsePart. (An HTTP/2 exchange is a ClientStream: HTTP2ClientStreams.swift.)
//
// The decisions (when to read, when the server has been idle too long, whether the connection can be
// reused, which error to report) are ExchangeStateMachine's; this handler feeds it the channel's events
// and carries out what it answers: completing the head and end promises, feeding the body into a
// NIOThrowingAsyncSequenceProducer, holding reads back, the one idle timer, closing the channel.

import NIOCore
import NIOHTTP1

final class ExchangeHandler: ChannelDuplexHandler, RemovableChannelHandler, ExchangeDriver {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    let head: EventLoopPromise<HTTPResponseHead>
    /// Succeeds when the response is complete: true if the connection can carry another request.
    let end: EventLoopPromise<Bool>
    let source: HTTPResponseBody.Producer.Source
    /// The response's content decoding, when the request asked for it.
    var decoding: ResponseDecoding?
    var machine: ExchangeStateMachine
    var idleTask: Scheduled<Void>?
    var context: ChannelHandlerContext?

    init(
        head: EventLoopPromise<HTTPResponseHead>,
        end: EventLoopPromise<Bool>,
        source: HTTPResponseBody.Producer.Source,
        idleTimeout: TimeAmount,
        host: String,
        decompress: Bool = false
    ) {
        self.head = head
        self.end = end
        self.source = source
        self.decoding = decompress ? ResponseDecoding() : nil
        self.machine = ExchangeStateMachine(idleTimeout: idleTimeout, host: host, onStream: false)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        run(machine.handlerAdded(now: context.eventLoop.now), context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        let action = machine.handlerRemoved()
        self.context = nil
        // Out of the pipeline: close through the channel, not through this context.
        if case .fail(let error, let failHead, let close) = action {
            fail(error, failHead: failHead)
            if close { context.channel.close(promise: nil) }
        }
        idleTask?.cancel()
        idleTask = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard decoding != nil else { return received(part, context: context) }
        do {
            try decoding?.decode(part, allocator: context.channel.allocator) { received($0, context: context) }
        } catch {
            run(machine.errorCaught(error), context: context)
        }
    }

    private func received(_ part: HTTPClientResponsePart, context: ChannelHandlerContext) {
        switch part {
        case .head(let h):
            run(machine.responseHeadReceived(h, now: context.eventLoop.now), context: context)
        case .body(let chunk):
            let action = machine.responseBodyPartReceived(now: context.eventLoop.now)
            if case .yieldBodyPart = action {
                run(machine.bodyPartYielded(source.yield(chunk)), context: context)
            } else {
                run(action, context: context)
            }
        case .end:
            run(machine.responseEndReceived(), context: context)
        }
    }

    func read(context: ChannelHandlerContext) {
        run(machine.readRequested(), context: context)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let now = context.eventLoop.now
        switch unwrapOutboundIn(data) {
        case .head: machine.requestHeadWritten(now: now)
        case .body: machine.requestBodyPartWritten(now: now)
        case .end: machine.requestEndWritten(now: now)
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        run(machine.errorCaught(error), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        run(machine.channelInactive(), context: context)
        context.fireChannelInactive()
    }

    // MARK: Driven from outside (on the event loop)

    func produceMore() {
        guard let context else { return }
        run(machine.produceMore(now: context.eventLoop.now), context: context)
    }

    func bodyAbandoned() {
        run(machine.bodyAbandoned(), context: context)
    }

    func cancel() {
        run(machine.cancelled(), context: context)
    }

    func totalTimeoutFired() {
        run(machine.totalTimeoutFired(), context: context)
    }

    func requestWriteFailed(_ error: any Error) {
        run(machine.requestWriteFailed(error), context: context)
    }

    // MARK: Carrying out the machine's actions

    private func run(_ action: ExchangeStateMachine.Action, context: ChannelHandlerContext?) {
        switch action {
        case .nothing:
            break
        case .read:
            context?.read()
        case .scheduleIdleCheck(let delay):
            guard let context else { return }
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            idleTask = context.eventLoop.scheduleTask(in: delay) {
                loopBound.value.idleCheckFired()
            }
        case .succeedHead(let h):
            head.succeed(h)
        case .yieldBodyPart:
            preconditionFailure("the body part is yielded by channelRead")
        case .finish(let reusable, let cleanup):
            idleTask?.cancel()
            idleTask = nil
            if let context {
                switch cleanup {
                case .removeHandlers:
                    // Leave the connection clean for the next request.
                    let sync = context.pipeline.syncOperations
                    sync.removeHandler(context: context, promise: nil)
                case .close:
                    context.close(promise: nil)
                case .leaveAsIs:
                    break
                }
            }
            end.succeed(reusable)
            source.finish()
        case .fail(let error, let failHead, let close):
            // The connection goes first: the pool, told of the failure through `end`, then finds it
            // closed rather than closing it gracefully itself.
            if close, let context { abandon(context) }
            fail(error, failHead: failHead)
        }
    }

    /// Ends the connection of an exchange that failed: dropped at once by the ConnectionAbandoner at
    /// its front, without TLS's graceful close (see there why). Without one in the pipeline, it is
    /// closed as usual.
    private func abandon(_ context: ChannelHandlerContext) {
        let channel = context.channel
        let dropped = context.eventLoop.makePromise(of: Void.self)
        dropped.futureResult.whenFailure { _ in channel.close(promise: nil) }
        context.triggerUserOutboundEvent(AbandonConnection(), promise: dropped)
    }

    private func fail(_ error: HTTPEngineError, failHead: Bool) {
        idleTask?.cancel()
        idleTask = nil
        if failHead { head.fail(error) }
        source.finish(error)
        end.fail(error)
    }

    private func idleCheckFired() {
        idleTask = nil
        guard let context else { return }
        run(machine.idleCheckFired(now: context.eventLoop.now), context: context)
    }
}

/// What carries one exchange out on the event loop: an ExchangeHandler on an HTTP/1.1 connection, a
/// ClientStream on an HTTP/2 one. Called on the loop.
protocol ExchangeDriver: AnyObject {
    func produceMore()
    func bodyAbandoned()
    func cancel()
    func totalTimeoutFired()
    func requestWriteFailed(_ error: any Error)
}

/// An exchange's driver, reachable from the exchange's task (which hops to the loop to call it).
enum DriverBox: Sendable {
    case connection(NIOLoopBoundBox<ExchangeHandler?>)
    case stream(NIOLoopBoundBox<ClientStream?>)

    /// Calls `body` with the driver on its loop, unless the exchange is over.
    func onLoop(_ body: @escaping @Sendable (any ExchangeDriver) -> Void) {
        switch self {
        case .connection(let box): box.eventLoop.execute { box.value.map(body) }
        case .stream(let box): box.eventLoop.execute { box.value.map(body) }
        }
    }

    /// The exchange is over: later calls reach nothing. On the loop.
    func clear() {
        switch self {
        case .connection(let box): box.value = nil
        case .stream(let box): box.value = nil
        }
    }
}

/// Tells the driver when the body's consumer wants more or has gone, hopping to the event loop.
struct BodyDelegate: NIOAsyncSequenceProducerDelegate {
    let driver: DriverBox
    /// The request's metrics: a body dropped while its exchange still runs ends the attempt's span.
    let recorder: MetricsRecorder?

    init(driver: NIOLoopBoundBox<ExchangeHandler?>, recorder: MetricsRecorder? = nil) {
        self.driver = .connection(driver)
        self.recorder = recorder
    }
    init(driver: NIOLoopBoundBox<ClientStream?>, recorder: MetricsRecorder? = nil) {
        self.driver = .stream(driver)
        self.recorder = recorder
    }

    func produceMore() { driver.onLoop { $0.produceMore() } }
    func didTerminate() {
        let recorder = self.recorder
        // Only while the exchange runs (`onLoop` skips a finished one): the body was dropped unread.
        driver.onLoop { driver in
            driver.bodyAbandoned()
            recorder?.abandoned()
        }
    }
}

/// Where a streamed request body goes: the HTTP/1.1 connection's channel, or the exchange's stream.
struct RequestSink: Sendable {
    private enum Target: Sendable {
        case channel(any Channel)
        case stream(NIOLoopBoundBox<ClientStream?>)
    }
    private let target: Target

    init(channel: any Channel) { target = .channel(channel) }
    init(stream: NIOLoopBoundBox<ClientStream?>) { target = .stream(stream) }

    /// Writes `part`; the future completes once the connection has taken it.
    func write(_ part: HTTPClientRequestPart, flush: Bool) -> EventLoopFuture<Void> {
        switch target {
        case .channel(let channel):
            let promise = channel.eventLoop.makePromise(of: Void.self)
            if flush { channel.writeAndFlush(part, promise: promise) } else { channel.write(part, promise: promise) }
            return promise.futureResult
        case .stream(let box):
            let promise = box.eventLoop.makePromise(of: Void.self)
            box.eventLoop.execute {
                guard let stream = box.value else { return promise.fail(ChannelError.ioOnClosedChannel) }
                stream.send(part, promise: promise)
            }
            return promise.futureResult
        }
    }
}
