// HTTP2ClientStreams and ClientStream on an EmbeddedChannel, without NIOHTTP2Handler: frames are
// written inbound by hand (as NIOHTTP2Handler would pass them on, with its StreamClosedEvents), and the
// frames the streams write are read back. The rules: stream IDs, the request as HPACK, the response's
// parts, flow control per stream, RST_STREAM on cancel, and which streams were never processed.
// Interop with a real server (nginx's h2, its GOAWAY) is in the integration tests.

@testable import HTTPDNSEngine
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import Testing

/// A connection's streams on an EmbeddedChannel.
struct StreamRig {
    let channel = EmbeddedChannel()
    let goAway = GoAwayRecord()
    let streams: HTTP2ClientStreams

    init() throws {
        streams = HTTP2ClientStreams(goAway: goAway)
        try channel.pipeline.syncOperations.addHandler(streams)
    }

    /// One started exchange.
    struct Started {
        let stream: ClientStream
        let head: Outcome<HTTPResponseHead>
        let end: Outcome<Bool>
        let body: HTTPResponseBody.Producer
        let outcome: StreamOutcome
    }

    /// Starts an exchange: a GET unless `body` (`.some(nil)`: a request with no body, `nil`: a body to
    /// stream with `send`).
    func start(
        method: HTTPMethod = .GET,
        headers: HTTPHeaders = ["host": "a.test", "user-agent": "t"],
        body: ByteBuffer?? = .some(nil),
        highWatermark: Int = 8,
        decompress: Bool = false
    ) -> Started {
        let loop = channel.embeddedEventLoop
        let head = loop.makePromise(of: HTTPResponseHead.self)
        let end = loop.makePromise(of: Bool.self)
        let box = NIOLoopBoundBox.makeEmptyBox(
            valueType: ClientStream.self,
            eventLoop: MultiThreadedEventLoopGroup.singleton.next()
        )
        let sequence = testBodySequence(BodyDelegate(driver: box), highWatermark: highWatermark)
        let outcome = StreamOutcome()
        let stream = ClientStream(
            connection: streams,
            eventLoop: loop,
            head: head,
            end: end,
            source: sequence.source,
            idleTimeout: .seconds(30),
            request: HTTPRequestHead(version: .http1_1, method: method, uri: "/p?q=1", headers: headers),
            host: "a.test",
            decompress: decompress,
            outcome: outcome
        )
        stream.start(
            HTTPRequestHead(version: .http1_1, method: method, uri: "/p?q=1", headers: headers),
            scheme: "https",
            body: body
        )
        return Started(
            stream: stream,
            head: Outcome(head.futureResult),
            end: Outcome(end.futureResult),
            body: sequence.sequence,
            outcome: outcome
        )
    }

    /// The frames written since the last call.
    func written() throws -> [HTTP2Frame] {
        var frames: [HTTP2Frame] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.self) { frames.append(frame) }
        return frames
    }

    func receive(_ id: Int32, _ payload: HTTP2Frame.FramePayload) throws {
        try channel.writeInbound(HTTP2Frame(streamID: HTTP2StreamID(id), payload: payload))
    }

    func respond(_ id: Int32, status: Int = 200, _ fields: [(String, String)] = [], endStream: Bool = false) throws {
        let block = HPACKHeaders([(":status", "\(status)")] + fields)
        try receive(id, .headers(.init(headers: block, endStream: endStream)))
    }

    func data(_ id: Int32, bytes: Int, endStream: Bool = false) throws {
        let payload = ByteBuffer(repeating: 0x61, count: bytes)
        try receive(id, .data(.init(data: .byteBuffer(payload), endStream: endStream)))
    }

    func closed(_ id: Int32, _ reason: HTTP2ErrorCode?) {
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: HTTP2StreamID(id), reason: reason))
    }

    func finish() { _ = try? channel.finish() }
}

/// The stream-level WINDOW_UPDATE increments among `frames`.
private func windowUpdates(_ frames: [HTTP2Frame], on id: Int32) -> [Int] {
    frames.compactMap { frame in
        guard frame.streamID == HTTP2StreamID(id), case .windowUpdate(let n) = frame.payload else { return nil }
        return n
    }
}

@Suite struct ClientStreamTests {
    @Test func aGetIsOneHeadersFrameWithPseudoFieldsFirstAndNoConnectionFields() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        _ = rig.start(headers: ["host": "a.test:8443", "connection": "keep-alive", "X-Custom": "v"])
        let frames = try rig.written()
        #expect(frames.count == 1)
        guard case .headers(let headers) = frames.first?.payload else {
            Issue.record("no HEADERS")
            return
        }
        #expect(frames[0].streamID == 1)
        #expect(headers.endStream)
        let names = headers.headers.map(\.name)
        #expect(names == [":method", ":scheme", ":authority", ":path", "x-custom"])
        #expect(headers.headers.first(name: ":authority") == "a.test:8443")
        #expect(headers.headers.first(name: ":path") == "/p?q=1")
    }

    @Test func streamsGetOddRisingIDsAndASmallBodyGoesWithItsHeaders() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        _ = rig.start()
        _ = rig.start(method: .POST, headers: ["host": "a.test"], body: .some(ByteBuffer(string: "abc")))
        let frames = try rig.written()
        #expect(frames.map(\.streamID) == [1, 3, 3])
        guard case .headers(let h) = frames[1].payload, case .data(let d) = frames[2].payload else {
            Issue.record("not HEADERS then DATA")
            return
        }
        #expect(!h.endStream)
        #expect(d.endStream)
    }

    @Test func aResponseIsItsHeadItsBodyAndItsEnd() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let s = rig.start()
        try rig.respond(1, status: 103)  // informational: skipped
        #expect(s.head.result == nil)
        try rig.respond(1, [("content-length", "5")])
        #expect(s.head.value?.status == .ok)
        try rig.data(1, bytes: 5)
        try rig.receive(1, .headers(.init(headers: ["grpc-status": "0"], endStream: true)))  // trailers end it
        #expect(s.end.value != nil)  // ended without an error
    }

    /// One decoder per compressed response, gone when its exchange ends (an EmbeddedChannel that ran NIO's
    /// decompressor once kept itself alive: the soak's leak).
    @Test func aCompressedResponsesDecompressorGoesWithItsExchange() async throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let gzipHello: [UInt8] = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00,
            0x86, 0xa6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00,
        ]
        for (id, endsWell) in [(Int32(1), true), (3, false)] {
            let s = rig.start(decompress: true)
            try rig.respond(id, [("content-encoding", "gzip"), ("content-length", "\(gzipHello.count)")])
            weak let decompressor = s.stream.decoderForTesting
            #expect(decompressor != nil)
            if endsWell {
                try rig.receive(id, .data(.init(data: .byteBuffer(ByteBuffer(bytes: gzipHello)), endStream: true)))
                var body = ByteBuffer()
                for try await chunk in s.body { body.writeImmutableBuffer(chunk) }
                #expect(String(buffer: body) == "hello")
                #expect(s.end.value != nil)
            } else {
                rig.closed(id, .cancel)  // reset by the server midway
                #expect(s.end.errorCode != nil)
            }
            #expect(decompressor == nil)
        }
    }

    @Test func aResponseWithoutContentLengthIsMarkedChunkedAsNIOsCodecDid() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let s = rig.start()
        try rig.respond(1)
        #expect(s.head.value?.headers.first(name: "transfer-encoding") == "chunked")
        let empty = rig.start()
        try rig.respond(3, endStream: true)
        #expect(empty.head.value?.headers.first(name: "content-length") == "0")
        #expect(empty.end.value != nil)  // ended without an error
    }

    @Test func theStreamsWindowComesBackOnlyForBytesTheExchangeTook() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let s = rig.start(highWatermark: 2)
        _ = try rig.written()
        try rig.respond(1)
        // Two chunks fill the consumer's buffer: the producer says stop after the second.
        try rig.data(1, bytes: 20_000)
        try rig.data(1, bytes: 20_000)
        #expect(windowUpdates(try rig.written(), on: 1) == [40_000])
        // The consumer is behind: these stay with the stream, and its window stays closed.
        try rig.data(1, bytes: 20_000)
        try rig.data(1, bytes: 20_000)
        #expect(windowUpdates(try rig.written(), on: 1).isEmpty)
        // It catches up: they are taken, and their bytes go back.
        s.stream.produceMore()
        #expect(windowUpdates(try rig.written(), on: 1) == [40_000])
    }

    @Test func cancellingResetsThatStreamAlone() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let first = rig.start()
        let second = rig.start()
        _ = try rig.written()
        first.stream.cancel()
        let frames = try rig.written()
        #expect(frames.count == 1)
        #expect(frames.first?.streamID == 1)
        guard case .rstStream(let code) = frames.first?.payload else {
            Issue.record("no RST_STREAM")
            return
        }
        #expect(code == .cancel)
        #expect(first.head.errorCode == .cancelled)
        // Frames still in flight for the reset stream are dropped; the other stream goes on.
        try rig.respond(1)
        try rig.respond(3, endStream: true)
        #expect(second.end.value != nil)  // ended without an error
        #expect(!first.outcome.neverProcessed(goAway: rig.goAway))
    }

    /// NIO takes a frame on a stream it has closed for a connection error, which would end every other
    /// stream: after a reset, an upload's next part and a late WINDOW_UPDATE are not written.
    @Test func nothingIsWrittenOnAResetStream() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let upload = rig.start(method: .PUT, body: nil, highWatermark: 2)
        try rig.respond(1)
        try rig.data(1, bytes: 20_000)
        try rig.data(1, bytes: 20_000)
        try rig.data(1, bytes: 20_000)  // held: the reader is behind
        _ = try rig.written()
        upload.stream.cancel()
        #expect(try rig.written().count == 1)  // the RST_STREAM
        upload.stream.produceMore()
        let part = rig.channel.embeddedEventLoop.makePromise(of: Void.self)
        upload.stream.send(.body(.byteBuffer(ByteBuffer(string: "more"))), promise: part)
        #expect((try? part.futureResult.wait()) == nil)
        #expect(try rig.written().isEmpty)
    }

    @Test func aStreamTheServerRefusedWasNeverProcessed() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let refused = rig.start()
        let reset = rig.start()
        rig.closed(1, .refusedStream)
        rig.closed(3, .internalError)
        #expect(refused.head.errorCode == .protocolError)
        #expect(refused.outcome.neverProcessed(goAway: rig.goAway))
        #expect(reset.head.errorCode == .protocolError)
        #expect(!reset.outcome.neverProcessed(goAway: rig.goAway))
    }

    @Test func streamsAboveAGoAwaysLastStreamWereNeverProcessed() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let taken = rig.start()
        let dropped = rig.start()
        try rig.receive(0, .goAway(lastStreamID: 1, errorCode: .noError, opaqueData: nil))
        rig.closed(3, .cancel)  // NIOHTTP2Handler closes the streams the GOAWAY refused
        #expect(rig.goAway.wasReceived)
        #expect(dropped.outcome.neverProcessed(goAway: rig.goAway))
        #expect(!taken.outcome.neverProcessed(goAway: rig.goAway))
        try rig.respond(1, endStream: true)
        #expect(taken.end.value != nil)  // ended without an error
    }

    @Test func aCompleteAnswerStandsWhenTheServerThenResetsTheRestOfTheRequest() throws {
        let rig = try StreamRig()
        defer { rig.finish() }
        let s = rig.start(method: .PUT, body: nil)
        try rig.respond(1, status: 413, [("content-length", "0")], endStream: true)
        rig.closed(1, .noError)
        #expect(s.head.value?.status == .payloadTooLarge)
        #expect(s.end.value == false)  // the request was not complete: nothing to reuse, on HTTP/1.1
    }

    @Test func aClosedConnectionFailsTheUnfinishedStreams() throws {
        let rig = try StreamRig()
        let s = rig.start()
        try rig.respond(1)
        rig.finish()
        #expect(s.head.value?.status == .ok)
        #expect(s.end.errorCode == .protocolError)
    }

    @Test func aStreamOpenedOnAGoneConnectionWasNeverWritten() throws {
        let rig = try StreamRig()
        rig.finish()
        let s = rig.start()
        #expect(s.head.errorCode == .protocolError)
        #expect(s.outcome.neverProcessed(goAway: rig.goAway))
    }
}
