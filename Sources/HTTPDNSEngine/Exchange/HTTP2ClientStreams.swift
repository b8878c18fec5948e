// The engine's HTTP/2 without a child channel per stream: `HTTP2ClientStreams` sits after
// the connection's NIOHTTP2Handler (no stream multiplexer), owns the connection's streams and hands
// each stream's frames to its `ClientStream`, which runs the same ExchangeStateMachine an HTTP/1.1
// exchange runs. NIO's child channel, its pipeline and HTTP2FramePayloadToHTTP1ClientCodec were about
// 30% of an HTTP/2 exchange's instructions. NIOHTTP2Handler still enforces the protocol, every limit
// and the outbound flow control (it holds DATA until the server's window opens, and holds streams
// past the server's SETTINGS_MAX_CONCURRENT_STREAMS until one ends).
//
// What the child channel and the codec gave, done here:
// - stream IDs: odd and rising, given when the HEADERS are written, on the loop, so in that order;
// - the request head as HPACK (pseudo-header fields first, connection-specific fields dropped), and
//   HEADERS back as a response head, an informational head or trailers (`ResponseFraming`);
// - inbound flow control: the connection's window is kept open (it is shared: one slow consumer must
//   not stall the other streams), a stream's window gets bytes back only once its exchange has taken
//   them, so a consumer that falls behind pauses only its own stream;
// - RST_STREAM CANCEL when an exchange fails or is cancelled: that stream alone ends;
// - a stream the server refused (RST_STREAM REFUSED_STREAM, or above its GOAWAY's last stream) was
//   never processed: the engine may send it again elsewhere (RFC 9113 §8.7);
// - decompression, only for a response that is compressed (`ResponseDecoding`).

import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// The streams of one HTTP/2 client connection. Lives on the connection's event loop.
final class HTTP2ClientStreams: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// The receive window kept for the connection and each stream (the protocol's initial one). A
    /// window is given back in one WINDOW_UPDATE once half of it is used.
    static let window = 65_535

    private var streams: [HTTP2StreamID: ClientStream] = [:]
    private var nextID: Int32 = 1
    /// The highest stream whose HEADERS went out. NIOHTTP2Handler holds a stream's HEADERS back while
    /// the server's SETTINGS_MAX_CONCURRENT_STREAMS is reached; those above this were never sent.
    private var lastSent: HTTP2StreamID = .rootStream
    private var context: ChannelHandlerContext?
    let goAway: GoAwayRecord

    init(goAway: GoAwayRecord) { self.goAway = goAway }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        closeAll()
    }

    // MARK: Used by the streams

    /// Gives `stream` the next stream ID and reads that stream's frames for it; nil when the connection
    /// is gone (nothing was written, so nothing was processed).
    func open(_ stream: ClientStream) -> HTTP2StreamID? {
        // Stream IDs run out after about a billion streams: the connection takes no more.
        guard context != nil, nextID < Int32.max - 2 else { return nil }
        let id = HTTP2StreamID(nextID)
        nextID += 2
        streams[id] = stream
        return id
    }

    /// Whether stream `id` is open. A frame on a stream NIO has closed (reset by either side, or ended
    /// by both) is a connection error there, which would close every other stream: nothing is written
    /// on one.
    func isOpen(_ id: HTTP2StreamID) -> Bool { streams[id] != nil }

    func write(_ payload: HTTP2Frame.FramePayload, on id: HTTP2StreamID, promise: EventLoopPromise<Void>?) {
        guard let context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        if case .headers = payload {
            let sent = promise ?? context.eventLoop.makePromise()
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            sent.futureResult.whenSuccess { bound.value.lastSent = max(bound.value.lastSent, id) }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: payload)), promise: sent)
            return
        }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: payload)), promise: promise)
    }

    func flush() { context?.flush() }

    /// Ends stream `id` from our side: RST_STREAM CANCEL, and its frames are no longer read.
    func reset(_ id: HTTP2StreamID) {
        guard streams.removeValue(forKey: id) != nil else { return }
        write(.rstStream(.cancel), on: id, promise: nil)
        flush()
    }

    // MARK: Events

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.streamID != .rootStream else {
            switch frame.payload {
            case .goAway(let last, _, _):
                goAway.received(lastStreamID: last)
            case .settings(.settings(let settings))
            where settings.contains(where: { $0.parameter == .maxConcurrentStreams && $0.value == 0 }):
                refuseUnsentStreams()
            default:
                break
            }
            // On to HTTP2ConnectionErrorCloser, which counts a flood of tiny WINDOW_UPDATEs.
            context.fireChannelRead(data)
            return
        }
        streams[frame.streamID]?.received(frame.payload)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            streams.removeValue(forKey: closed.streamID)?.closed(reason: closed.reason)
        } else if let update = event as? NIOHTTP2WindowUpdatedEvent, update.streamID == .rootStream,
            let size = update.inboundWindowSize, size <= Self.window / 2
        {
            // Every DATA frame, read or not yet, goes back to the connection's window at once.
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: Self.window - size))
                ),
                promise: nil
            )
            context.flush()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOHTTP2Errors.StreamError {
            streams.removeValue(forKey: error.streamID)?.failed(error.baseError)
        }
        // HTTP2ConnectionErrorCloser, next, closes the connection.
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    /// The server allows no stream at all (SETTINGS_MAX_CONCURRENT_STREAMS 0): NIOHTTP2Handler would hold
    /// the streams not yet sent until the server raises the limit, which it may never do. The connection
    /// is treated as one that sent GOAWAY after the last stream sent: the pool gives it no new request,
    /// and the streams held back, never seen by the server, fail as not processed, so the engine sends
    /// them again on another connection (or gives up with this error when its retries are spent).
    private func refuseUnsentStreams() {
        goAway.received(lastStreamID: lastSent)
        for (id, stream) in streams where id > lastSent {
            streams[id] = nil
            write(.rstStream(.cancel), on: id, promise: nil)  // NIO drops the held-back HEADERS
            stream.refusedWithoutStreams()
        }
        flush()
    }

    private func closeAll() {
        let open = streams.values
        streams = [:]
        for stream in open { stream.connectionClosed() }
    }
}

/// What the engine learns of a stream once its exchange has failed: whether the server cannot have
/// processed it. Written on the loop, read by the exchange's task.
final class StreamOutcome: Sendable {
    private let state = NIOLockedValueBox<(id: HTTP2StreamID?, refused: Bool)>((nil, false))

    func opened(_ id: HTTP2StreamID) { state.withLockedValue { $0.id = id } }
    func refused() { state.withLockedValue { $0.refused = true } }

    /// Never written, refused by RST_STREAM REFUSED_STREAM, or above the last stream of a GOAWAY.
    func neverProcessed(goAway: GoAwayRecord?) -> Bool {
        let (id, refused) = state.withLockedValue { $0 }
        guard let id else { return true }
        return refused || (goAway?.refuses(id) ?? false)
    }
}

/// One exchange on one stream: the counterpart of ExchangeHandler, driven by `HTTP2ClientStreams`
/// instead of a channel pipeline. Lives on the connection's event loop.
final class ClientStream: ExchangeDriver {
    let head: EventLoopPromise<HTTPResponseHead>
    let end: EventLoopPromise<Bool>
    let source: HTTPResponseBody.Producer.Source
    let outcome: StreamOutcome
    private let connection: HTTP2ClientStreams
    private let eventLoop: any EventLoop
    private var machine: ExchangeStateMachine
    private var framing: ResponseFraming
    private var id: HTTP2StreamID?
    /// Response parts read from the network and not yet taken by the exchange, with their bytes
    /// counted by flow control.
    private var pending = CircularBuffer<(part: HTTPClientResponsePart, bytes: Int)>()
    private var delivering = false
    /// Bytes the exchange has taken that the stream's window has not had back yet.
    private var unreturned = 0
    private var idleTask: Scheduled<Void>?
    /// The response's content decoding, when the request asked for it.
    private var decoding: ResponseDecoding?

    init(
        connection: HTTP2ClientStreams,
        eventLoop: any EventLoop,
        head: EventLoopPromise<HTTPResponseHead>,
        end: EventLoopPromise<Bool>,
        source: HTTPResponseBody.Producer.Source,
        idleTimeout: TimeAmount,
        request: HTTPRequestHead,
        host: String,
        decompress: Bool,
        outcome: StreamOutcome
    ) {
        self.outcome = outcome
        self.connection = connection
        self.eventLoop = eventLoop
        self.head = head
        self.end = end
        self.source = source
        self.machine = ExchangeStateMachine(idleTimeout: idleTimeout, host: host, onStream: true)
        self.framing = ResponseFraming(requestMethod: request.method)
        self.decoding = decompress ? ResponseDecoding() : nil
    }

    // MARK: The request

    /// Opens the stream and writes the request: HEADERS, and when `body` is given the whole request
    /// (HEADERS and DATA, END_STREAM on the last frame, one flush: kresd 5.6's doh2 answers 400 to a
    /// POST whose HEADERS and DATA arrive in separate writes). Without `body`, the body streams
    /// through `send` and ends with `send(.end)`.
    func start(_ request: HTTPRequestHead, scheme: String, body: ByteBuffer??) {
        run(machine.handlerAdded(now: eventLoop.now))
        // The server sent GOAWAY or allows no streams, and the pool had not heard of it yet when it gave
        // this connection the request (that news crosses threads; this check is on the connection's
        // loop, after it): NIOHTTP2Handler would hold the stream until the server raised its limit,
        // perhaps forever. Never sent, so the engine sends it again elsewhere.
        if connection.goAway.wasReceived {
            refusedBeforeSending()
            return
        }
        guard let id = connection.open(self) else {
            run(machine.channelInactive())
            return
        }
        self.id = id
        outcome.opened(id)
        machine.requestHeadWritten(now: eventLoop.now)
        let headers = RequestFraming.headers(request, scheme: scheme)
        // A frame the connection refuses (a header field HTTP/2 does not allow, a connection gone)
        // fails the exchange.
        let written = eventLoop.makePromise(of: Void.self)
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        written.futureResult.whenFailure { bound.value.requestWriteFailed($0) }
        if let body {
            // No empty DATA frame: NIO servers count those as a flood.
            if let bytes = body, bytes.readableBytes > 0 {
                connection.write(.headers(.init(headers: headers, endStream: false)), on: id, promise: nil)
                connection.write(.data(.init(data: .byteBuffer(bytes), endStream: true)), on: id, promise: written)
            } else {
                connection.write(.headers(.init(headers: headers, endStream: true)), on: id, promise: written)
            }
            machine.requestEndWritten(now: eventLoop.now)
        } else {
            connection.write(.headers(.init(headers: headers, endStream: false)), on: id, promise: written)
        }
        connection.flush()
    }

    /// A part of a streamed body, or its end (an empty DATA frame with END_STREAM).
    func send(_ part: HTTPClientRequestPart, promise: EventLoopPromise<Void>) {
        guard let id, connection.isOpen(id) else {
            promise.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch part {
        case .head:
            promise.succeed()  // written by `start`
            return
        case .body(let body):
            machine.requestBodyPartWritten(now: eventLoop.now)
            guard case .byteBuffer(let bytes) = body else {
                promise.fail(HTTPEngineError(.invalidRequest, "a request body part that is not in memory"))
                return
            }
            connection.write(.data(.init(data: .byteBuffer(bytes), endStream: false)), on: id, promise: promise)
        case .end:
            machine.requestEndWritten(now: eventLoop.now)
            connection.write(.data(.init(data: .byteBuffer(ByteBuffer()), endStream: true)), on: id, promise: promise)
        }
        connection.flush()
    }

    // MARK: From the connection

    func received(_ payload: HTTP2Frame.FramePayload) {
        do {
            switch payload {
            case .headers(let headers):
                for part in try framing.headers(headers.headers, endStream: headers.endStream) {
                    pending.append((part, 0))
                }
            case .data(let data):
                guard case .byteBuffer(let bytes) = data.data else { return }
                let counted = bytes.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
                for (index, part) in try framing.data(bytes, endStream: data.endStream).enumerated() {
                    pending.append((part, index == 0 ? counted : 0))
                }
            default:
                return  // WINDOW_UPDATE, PRIORITY: NIOHTTP2Handler has dealt with them.
            }
        } catch {
            failed(error)
            return
        }
        deliver()
    }

    /// The stream is closed: both sides ended (`reason` nil), or it was reset (by the server, or by
    /// its GOAWAY).
    func closed(reason: HTTP2ErrorCode?) {
        guard let reason else { return }  // the response's end may still be waiting in `pending`
        if reason == .refusedStream { outcome.refused() }
        // A server may answer in full and then reset the rest of the request with NO_ERROR (RFC 9113
        // §8.1): the answer stands.
        if framing.ended { return }
        let host = machine.host
        let error =
            if let id, connection.goAway.refuses(id) {
                HTTPEngineError(.protocolError, "\(host) refused the stream with GOAWAY")
            } else {
                HTTPEngineError(.protocolError, "\(host) reset the stream (\(reason))")
            }
        run(machine.errorCaught(error))
    }

    func connectionClosed() {
        if framing.ended { return }
        run(machine.channelInactive())
    }

    /// Never sent: the server allows no streams on this connection (SETTINGS_MAX_CONCURRENT_STREAMS 0).
    func refusedWithoutStreams() {
        outcome.refused()
        let error = HTTPEngineError(
            .protocolError,
            "\(machine.host) allows no streams on this connection (SETTINGS_MAX_CONCURRENT_STREAMS 0)"
        )
        run(machine.errorCaught(error))
    }

    /// Never sent: the connection had been retired by its server before this stream was opened.
    private func refusedBeforeSending() {
        outcome.refused()
        let error = HTTPEngineError(
            .protocolError,
            "\(machine.host) refused new streams on this connection (GOAWAY, or SETTINGS_MAX_CONCURRENT_STREAMS 0)"
        )
        run(machine.errorCaught(error))
    }

    func failed(_ error: any Error) {
        run(machine.errorCaught(error))
    }

    // MARK: Driven by the exchange

    func produceMore() { run(machine.produceMore(now: eventLoop.now)) }
    func bodyAbandoned() { run(machine.bodyAbandoned()) }
    func cancel() { run(machine.cancelled()) }
    func totalTimeoutFired() { run(machine.totalTimeoutFired()) }
    func requestWriteFailed(_ error: any Error) { run(machine.requestWriteFailed(error)) }

    // MARK: Reading

    /// Hands the exchange what has arrived, as far as its consumer keeps up, and gives the bytes it
    /// took back to the stream's window.
    private func deliver() {
        guard !delivering else { return }
        delivering = true
        defer { delivering = false }
        while !pending.isEmpty, machine.state != .finished {
            guard machine.readRequested() == .read else { return }  // `produceMore` reads again
            var taken = 0
            while let (part, bytes) = pending.popFirst(), machine.state != .finished {
                taken += bytes
                take(part)
            }
            giveBack(taken)
        }
    }

    private func take(_ part: HTTPClientResponsePart) {
        guard decoding != nil else { return handle(part) }
        do {
            try decoding?.decode(part, allocator: ByteBufferAllocator()) { handle($0) }
        } catch {
            run(machine.errorCaught(error))
        }
    }

    private func handle(_ part: HTTPClientResponsePart) {
        let now = eventLoop.now
        switch part {
        case .head(let h):
            run(machine.responseHeadReceived(h, now: now))
        case .body(let chunk):
            let action = machine.responseBodyPartReceived(now: now)
            guard case .yieldBodyPart = action else { return run(action) }
            run(machine.bodyPartYielded(source.yield(chunk)))
        case .end:
            run(machine.responseEndReceived())
        }
    }

    private func giveBack(_ bytes: Int) {
        unreturned += bytes
        // Not once the server has ended its side, nor on a stream that is closed or reset.
        guard let id, !framing.ended, unreturned >= HTTP2ClientStreams.window / 2, connection.isOpen(id) else {
            return
        }
        connection.write(.windowUpdate(windowSizeIncrement: unreturned), on: id, promise: nil)
        connection.flush()
        unreturned = 0
    }

    // MARK: Carrying out the machine's actions

    private func run(_ action: ExchangeStateMachine.Action) {
        switch action {
        case .nothing:
            break
        case .read:
            deliver()
        case .scheduleIdleCheck(let delay):
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            idleTask = eventLoop.scheduleTask(in: delay) { bound.value.idleCheckFired() }
        case .succeedHead(let h):
            head.succeed(h)
        case .yieldBodyPart:
            preconditionFailure("the body part is yielded by handle")
        case .finish(let reusable, _):
            tearDown()
            end.succeed(reusable)
            source.finish()
        case .fail(let error, let failHead, let close):
            tearDown()
            pending.removeAll()
            if close, let id { connection.reset(id) }
            if failHead { head.fail(error) }
            source.finish(error)
            end.fail(error)
        }
    }

    /// The exchange is over: its idle timer and its decoder go.
    private func tearDown() {
        idleTask?.cancel()
        idleTask = nil
        decoding?.reset()
    }

    /// The decoder of the response in progress (tests watch it go).
    var decoderForTesting: ContentDecoder? { decoding?.decoder }

    private func idleCheckFired() {
        idleTask = nil
        run(machine.idleCheckFired(now: eventLoop.now))
    }
}

/// A request head as an HTTP/2 header block (RFC 9113 §8.3.1): the pseudo-header fields first,
/// `:authority` from Host, then the other fields in lower case without the connection-specific ones.
enum RequestFraming {
    static func headers(_ head: HTTPRequestHead, scheme: String) -> HPACKHeaders {
        var fields = head.headers
        let authority = fields.first(name: "host") ?? ""
        fields.remove(name: "host")
        var block = HPACKHeaders()
        block.reserveCapacity(fields.count + 4)
        block.add(name: ":method", value: head.method.rawValue)
        block.add(name: ":scheme", value: scheme)
        block.add(name: ":authority", value: authority)
        block.add(name: ":path", value: head.uri)
        block.add(contentsOf: HPACKHeaders(httpHeaders: fields, normalizeHTTPHeaders: true))
        return block
    }
}

/// A stream's response frames as HTTP/1-style parts, as HTTP2FramePayloadToHTTP1ClientCodec gives
/// them: informational heads (1xx), then the final head, the body, and the end (with trailers when a
/// HEADERS frame ends the stream). NIOHTTP2Handler has already checked the header blocks.
struct ResponseFraming {
    let requestMethod: HTTPMethod
    private var finalHeadSeen = false
    /// The server's END_STREAM has been seen.
    private(set) var ended = false

    init(requestMethod: HTTPMethod) { self.requestMethod = requestMethod }

    mutating func headers(_ block: HPACKHeaders, endStream: Bool) throws -> [HTTPClientResponsePart] {
        ended = ended || endStream
        guard !finalHeadSeen else {
            return [.end(HTTPHeaders(block.filter { !$0.name.hasPrefix(":") }.map { ($0.name, $0.value) }))]
        }
        var head = try Self.head(block)
        guard !(100..<200).contains(head.status.code) else { return [.head(head)] }
        finalHeadSeen = true
        // As NIO's codec does: an HTTP/1 reader learns from these how the body is framed.
        let code = head.status.code
        if code != 204, code != 304, requestMethod != .HEAD, requestMethod != .CONNECT,
            !block.contains(name: "content-length")
        {
            if endStream {
                head.headers.add(name: "content-length", value: "0")
            } else {
                head.headers.add(name: "transfer-encoding", value: "chunked")
            }
        }
        return endStream ? [.head(head), .end(nil)] : [.head(head)]
    }

    mutating func data(_ bytes: ByteBuffer, endStream: Bool) throws -> [HTTPClientResponsePart] {
        guard finalHeadSeen else { throw HTTPEngineError(.protocolError, "DATA before the response's HEADERS") }
        ended = ended || endStream
        if !endStream { return [.body(bytes)] }
        return bytes.readableBytes == 0 ? [.end(nil)] : [.body(bytes), .end(nil)]
    }

    private static func head(_ block: HPACKHeaders) throws -> HTTPResponseHead {
        guard let text = block.first(name: ":status"), let code = Int(text), (100...999).contains(code) else {
            throw HTTPEngineError(.protocolError, "the response's HEADERS carry no valid :status")
        }
        var fields = HTTPHeaders()
        for (name, value, _) in block where !name.hasPrefix(":") { fields.add(name: name, value: value) }
        return HTTPResponseHead(version: .http2, status: HTTPResponseStatus(statusCode: code), headers: fields)
    }
}
