// ExchangeHandler on an EmbeddedChannel: response parts written inbound by hand, time moved with
// EmbeddedEventLoop.advanceTime. No sockets, no sleeping.
//
// EmbeddedEventLoop may only be used from the thread that made it, so every test does its channel work
// synchronously; the one that reads the body closes the channel before its first await. The body
// producer's delegate hops to a real event loop where its handler box stays empty: the tests call
// `produceMore` on the handler themselves, as the delegate would.

@testable import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import Testing

/// Counts the reads that get past the exchange handler towards the network.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny
    var reads = 0

    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}

/// Counts the closes of a live connection that pass it towards the network: a stand-in for NIOSSL,
/// which closes gracefully (close_notify and a 5-second timer) unless the socket is already gone.
final class CloseCounter: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny
    var closes = 0

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if context.channel.isActive { closes += 1 }
        context.close(mode: mode, promise: promise)
    }
}

/// The outcome of a future, once it has one.
struct Outcome<T: Sendable>: Sendable {
    let box = NIOLockedValueBox<Result<T, any Error>?>(nil)
    let future: EventLoopFuture<T>

    init(_ future: EventLoopFuture<T>) {
        self.future = future
        let box = self.box
        future.whenComplete { result in box.withLockedValue { $0 = result } }
    }

    var result: Result<T, any Error>? { box.withLockedValue { $0 } }
    var value: T? { try? result?.get() }
    var errorCode: HTTPEngineError.Code? {
        guard case .failure(let error) = result else { return nil }
        return (error as? HTTPEngineError)?.code
    }
}

/// A response body's producer for a test: low watermark 1, `highWatermark` as given. Its delegate's box
/// lives on a real loop and stays empty: the tests call the driver themselves, as the delegate would.
func testBodySequence(_ delegate: BodyDelegate, highWatermark: Int) -> HTTPResponseBody.Producer.NewSequence {
    HTTPResponseBody.Producer.makeSequence(
        elementType: ByteBuffer.self,
        backPressureStrategy: .init(lowWatermark: 1, highWatermark: highWatermark),
        finishOnDeinit: false,
        delegate: delegate
    )
}

/// One exchange on a connected EmbeddedChannel, its request already written.
struct EmbeddedExchange {
    let channel: EmbeddedChannel
    let handler: ExchangeHandler
    let counter: ReadCounter
    let head: Outcome<HTTPResponseHead>
    let end: Outcome<Bool>
    let body: HTTPResponseBody.Producer

    /// `front`: handlers in front of the exchange's (towards the network), first first.
    init(
        idleTimeout: TimeAmount = .seconds(1),
        highWatermark: Int = 8,
        writeRequest: Bool = true,
        front: [any ChannelHandler] = []
    ) throws {
        channel = EmbeddedChannel()
        let loop = channel.embeddedEventLoop
        let headPromise = loop.makePromise(of: HTTPResponseHead.self)
        let endPromise = loop.makePromise(of: Bool.self)
        let box = NIOLoopBoundBox.makeEmptyBox(
            valueType: ExchangeHandler.self,
            eventLoop: MultiThreadedEventLoopGroup.singleton.next()
        )
        let sequence = testBodySequence(BodyDelegate(driver: box), highWatermark: highWatermark)
        counter = ReadCounter()
        handler = ExchangeHandler(
            head: headPromise,
            end: endPromise,
            source: sequence.source,
            idleTimeout: idleTimeout,
            host: "a.test"
        )
        for handler in front { try channel.pipeline.syncOperations.addHandler(handler) }
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        head = Outcome(headPromise.futureResult)
        end = Outcome(endPromise.futureResult)
        body = sequence.sequence
        if writeRequest {
            let request = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["host": "a.test"])
            try channel.writeOutbound(HTTPClientRequestPart.head(request))
            try channel.writeOutbound(HTTPClientRequestPart.end(nil))
        }
    }

    func respond(_ part: HTTPClientResponsePart) throws {
        try channel.writeInbound(part)
    }

    func respondHead(_ headers: HTTPHeaders = ["content-length": "11"]) throws {
        try respond(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)))
    }

    func respondBody(_ text: String) throws {
        try respond(.body(ByteBuffer(string: text)))
    }

    /// Closes the channel (EmbeddedChannel insists on it), whatever state it is in.
    func close() {
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    var handlerIsInstalled: Bool {
        (try? channel.pipeline.syncOperations.handler(type: ExchangeHandler.self)) != nil
    }

    /// The reads that reach the network when the channel asks for one.
    func readsPassed() -> Int {
        let before = counter.reads
        channel.read()
        return counter.reads - before
    }
}

@Suite struct ExchangeHandlerTests {
    /// Runs the channel part of a full keep-alive exchange and closes the channel, all on this thread;
    /// the caller reads the body afterwards.
    func completeExchange() throws -> (
        body: HTTPResponseBody.Producer, status: HTTPResponseStatus?, reusable: Bool?, installed: Bool
    ) {
        let exchange = try EmbeddedExchange()
        defer { exchange.close() }
        try exchange.respondHead()
        let status = exchange.head.value?.status
        try exchange.respondBody("hello")
        try exchange.respondBody(" world")
        #expect(exchange.end.result == nil)
        try exchange.respond(.end(nil))
        return (exchange.body, status, exchange.end.value, exchange.handlerIsInstalled)
    }

    @Test func responseReachesHeadBodyAndEnd() async throws {
        let (body, status, reusable, installed) = try completeExchange()
        #expect(status == .ok)
        #expect(reusable == true)
        // Out of the way for the connection's next request.
        #expect(!installed)
        var text = ""
        for try await chunk in body { text += String(buffer: chunk) }
        #expect(text == "hello world")
    }

    @Test func connectionCloseClosesTheChannel() throws {
        let exchange = try EmbeddedExchange()
        defer { exchange.close() }
        try exchange.respondHead(["connection": "close", "content-length": "0"])
        try exchange.respond(.end(nil))
        #expect(exchange.end.value == false)
        #expect(!exchange.channel.isActive)
    }

    @Test func informationalHeadIsNotTheResponse() throws {
        let exchange = try EmbeddedExchange()
        defer { exchange.close() }
        try exchange.respond(.head(HTTPResponseHead(version: .http1_1, status: .continue)))
        #expect(exchange.head.result == nil)
        try exchange.respondHead()
        #expect(exchange.head.value?.status == .ok)
        try exchange.respond(.end(nil))
    }

    @Test func silentServerGivesAReadTimeoutAndClosesTheChannel() throws {
        let exchange = try EmbeddedExchange(idleTimeout: .seconds(1))
        defer { exchange.close() }
        let loop = exchange.channel.embeddedEventLoop
        loop.advanceTime(by: .milliseconds(600))
        try exchange.respondHead()
        // 1.2 s since the start, but only 0.6 s since the head: the check re-armed for the time left.
        loop.advanceTime(by: .milliseconds(600))
        #expect(exchange.end.result == nil)
        #expect(exchange.channel.isActive)
        loop.advanceTime(by: .milliseconds(400))
        #expect(exchange.end.errorCode == .readTimeout)
        #expect(!exchange.channel.isActive)
    }

    @Test func silentServerBeforeTheHeadFailsTheHead() throws {
        let exchange = try EmbeddedExchange(idleTimeout: .milliseconds(300))
        defer { exchange.close() }
        exchange.channel.embeddedEventLoop.advanceTime(by: .milliseconds(300))
        #expect(exchange.head.errorCode == .readTimeout)
        #expect(exchange.end.errorCode == .readTimeout)
        #expect(!exchange.channel.isActive)
    }

    @Test func readsAreHeldWhileTheProducerSaysStop() throws {
        let exchange = try EmbeddedExchange(highWatermark: 2)
        defer { exchange.close() }
        try exchange.respondHead()
        try exchange.respondBody("a")
        #expect(exchange.readsPassed() == 1)
        try exchange.respondBody("b")  // the producer holds two: stop
        #expect(exchange.readsPassed() == 0)
        #expect(exchange.readsPassed() == 0)
        // The consumer caught up: exactly the one held read goes out.
        let held = exchange.counter.reads
        exchange.handler.produceMore()
        #expect(exchange.counter.reads == held + 1)
        exchange.handler.produceMore()
        #expect(exchange.counter.reads == held + 1)
        #expect(exchange.readsPassed() == 1)
        try exchange.respond(.end(nil))
        #expect(exchange.end.value == true)
    }

    @Test func heldReadIsReleasedOnce() throws {
        let exchange = try EmbeddedExchange(highWatermark: 1)
        defer { exchange.close() }
        try exchange.respondHead()
        try exchange.respondBody("a")
        let before = exchange.counter.reads
        exchange.channel.read()
        exchange.channel.read()
        #expect(exchange.counter.reads == before)
        exchange.handler.produceMore()
        #expect(exchange.counter.reads == before + 1)
        try exchange.respond(.end(nil))
    }

    @Test func slowConsumerDoesNotTimeOut() throws {
        let exchange = try EmbeddedExchange(idleTimeout: .seconds(1), highWatermark: 1)
        defer { exchange.close() }
        let loop = exchange.channel.embeddedEventLoop
        try exchange.respondHead()
        try exchange.respondBody("a")  // the producer is full: the consumer is behind
        loop.advanceTime(by: .seconds(10))
        #expect(exchange.end.result == nil)
        #expect(exchange.channel.isActive)
        // Once it catches up, the server has a full idle period to send more.
        exchange.handler.produceMore()
        loop.advanceTime(by: .milliseconds(999))
        #expect(exchange.end.result == nil)
        loop.advanceTime(by: .milliseconds(1))
        #expect(exchange.end.errorCode == .readTimeout)
    }

    @Test func cancelFailsTheExchangeAndClosesTheChannel() throws {
        let exchange = try EmbeddedExchange()
        defer { exchange.close() }
        exchange.handler.cancel()
        #expect(exchange.head.errorCode == .cancelled)
        #expect(exchange.end.errorCode == .cancelled)
        #expect(!exchange.channel.isActive)
    }

    /// The soak's finding: uploads cancelled by the hundred a second held their connections' memory for
    /// NIOSSL's 5-second shutdown timer. A failed HTTP/1.1 exchange now drops the socket from in front
    /// of TLS: no close passes the TLS handler.
    @Test func cancelledConnectionIsDroppedInFrontOfTLS() throws {
        let tls = CloseCounter()
        let exchange = try EmbeddedExchange(front: [ConnectionAbandoner(), tls])
        defer { exchange.close() }
        // As the pool does: a connection whose exchange failed is closed.
        let channel = exchange.channel
        exchange.end.future.whenFailure { _ in channel.close(promise: nil) }
        exchange.handler.cancel()
        #expect(exchange.end.errorCode == .cancelled)
        #expect(!exchange.channel.isActive)
        #expect(tls.closes == 0)
    }

    /// A timed-out exchange is dropped the same way; a response that ends with `Connection: close` is
    /// over, and its connection closes through TLS as usual.
    @Test func onlyAFailedExchangeSkipsTheGracefulClose() throws {
        let timedOut = CloseCounter()
        let exchange = try EmbeddedExchange(front: [ConnectionAbandoner(), timedOut])
        defer { exchange.close() }
        exchange.handler.totalTimeoutFired()
        #expect(!exchange.channel.isActive)
        #expect(timedOut.closes == 0)

        let finished = CloseCounter()
        let complete = try EmbeddedExchange(front: [ConnectionAbandoner(), finished])
        defer { complete.close() }
        try complete.respondHead(["content-length": "0", "connection": "close"])
        try complete.respond(.end(nil))
        #expect(complete.end.value == false)
        #expect(!complete.channel.isActive)
        #expect(finished.closes == 1)
    }

    @Test func cancelAfterTheEndChangesNothing() throws {
        let exchange = try EmbeddedExchange()
        defer { exchange.close() }
        try exchange.respondHead(["content-length": "0"])
        try exchange.respond(.end(nil))
        exchange.handler.cancel()
        exchange.handler.totalTimeoutFired()
        #expect(exchange.end.value == true)
        #expect(exchange.channel.isActive)
    }

    @Test func closedConnectionBeforeTheHeadIsAProtocolError() throws {
        let exchange = try EmbeddedExchange()
        defer { exchange.close() }
        _ = try exchange.channel.finish(acceptAlreadyClosed: true)
        #expect(exchange.head.errorCode == .protocolError)
        #expect(exchange.end.errorCode == .protocolError)
    }

    @Test func answerBeforeTheUploadEndsIsNotReusable() throws {
        let exchange = try EmbeddedExchange(writeRequest: false)
        defer { exchange.close() }
        let request = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/", headers: ["content-length": "9"])
        try exchange.channel.writeOutbound(HTTPClientRequestPart.head(request))
        try exchange.respond(
            .head(HTTPResponseHead(version: .http1_1, status: .payloadTooLarge, headers: ["content-length": "0"]))
        )
        try exchange.respond(.end(nil))
        #expect(exchange.end.value == false)
        #expect(!exchange.channel.isActive)
    }

    @Test func parserErrorBecomesAProtocolError() throws {
        let exchange = try EmbeddedExchange()
        defer { exchange.close() }
        try exchange.respondHead()
        exchange.channel.pipeline.fireErrorCaught(HTTPParserError.invalidEOFState)
        #expect(exchange.end.errorCode == .protocolError)
        #expect(!exchange.channel.isActive)
    }
}
