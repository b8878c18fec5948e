// The listener's HTTP/2 connections without a child channel per stream: HTTP2RequestHandler on an
// EmbeddedChannel, fed the frames NIOHTTP2Handler would pass on, and the frames it writes back; the
// rules themselves (HTTP2Requests) without a channel. An empty answer must not carry an empty DATA frame
// without END_STREAM: NIO's HTTP/2 clients count those as a flood and close the connection on the
// second in a row, which two empty answers on one connection used to be (the DNSPod "wrong
// credentials" answer is an empty 200).

@testable import HTTPDNSCore
@testable import HTTPDNSDemoPKI
@testable import HTTPDNSEngine
@testable import HTTPDNSListener
@testable import HTTPDNSServer
import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import Testing

@Suite struct HTTP2RequestHandlerTests {
    /// A connection whose requests are all answered at once (on the loop) with `body` and the request
    /// body's size (an empty `body`: an empty answer).
    private func connection(answering body: String, maxRequestBytes: Int = 1024) throws -> EmbeddedChannel {
        try connectionWithLimiter(answering: body, maxRequestBytes: maxRequestBytes).0
    }

    /// `connection(answering:)` and the limiter its slot is in.
    private func connectionWithLimiter(answering body: String, maxRequestBytes: Int = 1024) throws
        -> (EmbeddedChannel, ConnectionLimiter)
    {
        let channel = EmbeddedChannel()
        let limiter = ConnectionLimiter(limit: 1, metricsPrefix: "test")
        var limits = HTTPListener.Limits()
        limits.maxRequestBytes = maxRequestBytes
        limits.requestTimeout = .seconds(10)
        let context = ConnectionContext(
            isTLS: true,
            remote: "test",
            remoteIP: nil,
            limits: limits,
            logger: Logger(label: "test"),
            immediate: { request in
                ListenerResponse(
                    status: .ok,
                    body: Array((body.isEmpty ? "" : "\(body) \(request.body.readableBytes)").utf8)
                )
            },
            handler: { _ in ListenerResponse(status: .internalServerError, text: "not the immediate path") },
            setup: channel.eventLoop.scheduleTask(in: .hours(1)) {},
            slot: try limiter.admit(channel).wait()!
        )
        try channel.pipeline.syncOperations.addHandler(HTTP2RequestHandler(context: context))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        return (channel, limiter)
    }

    private let stream = HTTP2StreamID(1)

    private func request(_ method: String = "GET", endStream: Bool = true) -> HTTP2Frame {
        let headers: HPACKHeaders = [
            ":method": method, ":scheme": "https", ":authority": "dns.test", ":path": "/d?dn=a.test",
        ]
        return HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers, endStream: endStream)))
    }

    private func data(_ bytes: Int, endStream: Bool) -> HTTP2Frame {
        HTTP2Frame(
            streamID: stream,
            payload: .data(.init(data: .byteBuffer(ByteBuffer(repeating: 0x61, count: bytes)), endStream: endStream))
        )
    }

    /// Every frame written so far, in short: "HEADERS 200 es", "DATA 11 es", "RST_STREAM NO_ERROR"…
    private func written(_ channel: EmbeddedChannel) throws -> [String] {
        var frames: [String] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.self) {
            switch frame.payload {
            case .headers(let h):
                frames.append("HEADERS \(h.headers.first(name: ":status") ?? "")\(h.endStream ? " es" : "")")
            case .data(let d): frames.append("DATA \(d.data.readableBytes)\(d.endStream ? " es" : "")")
            case .rstStream(let code):
                frames.append("RST_STREAM " + (code == .noError ? "NO_ERROR" : code == .cancel ? "CANCEL" : "\(code)"))
            case .windowUpdate(let n): frames.append("WINDOW_UPDATE \(frame.streamID == .rootStream ? 0 : 1) \(n)")
            default: frames.append("other")
            }
        }
        return frames
    }

    @Test func anEmptyAnswerEndsTheStreamOnItsHeaders() throws {
        let channel = try connection(answering: "")
        try channel.writeInbound(request())
        #expect(try written(channel) == ["HEADERS 200 es"])
        _ = try channel.finish()
    }

    @Test func anAnswerIsHeadersThenOneDataFrameThatEndsTheStream() throws {
        let channel = try connection(answering: "198.51.0.1;")
        try channel.writeInbound(request())
        #expect(try written(channel) == ["HEADERS 200", "DATA 13 es"])
        _ = try channel.finish()
    }

    @Test func aHeadRequestGetsTheHeadersOnly() throws {
        let channel = try connection(answering: "198.51.0.1;")
        try channel.writeInbound(request("HEAD"))
        #expect(try written(channel) == ["HEADERS 200 es"])
        _ = try channel.finish()
    }

    @Test func aBodyIsReadWholeAndItsBytesOpenTheWindowsAgain() throws {
        let channel = try connection(answering: "got")
        try channel.writeInbound(request("POST", endStream: false))
        try channel.writeInbound(data(300, endStream: false))
        try channel.writeInbound(data(200, endStream: true))
        #expect(
            try written(channel) == [
                "WINDOW_UPDATE 0 300", "WINDOW_UPDATE 1 300", "WINDOW_UPDATE 0 200", "HEADERS 200", "DATA 7 es",
            ]
        )
        _ = try channel.finish()
    }

    @Test func aBodyPastTheLimitIsAnswered413AndTheRestRefused() throws {
        let channel = try connection(answering: "got", maxRequestBytes: 400)
        try channel.writeInbound(request("POST", endStream: false))
        try channel.writeInbound(data(300, endStream: false))
        try channel.writeInbound(data(200, endStream: false))
        let frames = try written(channel)
        #expect(frames.suffix(3) == ["HEADERS 413", "DATA 35 es", "RST_STREAM NO_ERROR"])
        // What the client still sends is not read, only given back to the connection's window.
        try channel.writeInbound(data(100, endStream: true))
        #expect(try written(channel) == ["WINDOW_UPDATE 0 100"])
        _ = try channel.finish()
    }

    @Test func aRequestNotCompleteInTimeIsReset() throws {
        let channel = try connection(answering: "got")
        try channel.writeInbound(request("POST", endStream: false))
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(try written(channel) == [])
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try written(channel) == ["RST_STREAM CANCEL"])
        _ = try channel.finish()
    }

    @Test func anAnswerSentWholeEndsItsTimer() throws {
        let channel = try connection(answering: "")
        try channel.writeInbound(request())
        _ = try written(channel)
        // NIOHTTP2Handler wrote the END_STREAM: the stream is closed.
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: stream, reason: nil))
        channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        #expect(try written(channel) == [])
        _ = try channel.finish()
    }

    /// Hostile round 4, item 1: a client that keeps its flow-control window shut (SETTINGS_INITIAL_WINDOW_SIZE
    /// 0) leaves every answer's END_STREAM unsent. Before, such a stream kept its connection busy for
    /// ever (never closed for room, its timer cancelled when answered); now its send is timed, as nginx's
    /// send_timeout, and reset.
    @Test func anAnswerTheClientWillNotTakeIsResetAfterTheRequestTimeout() throws {
        let (channel, limiter) = try connectionWithLimiter(answering: "198.51.0.1;")
        try channel.writeInbound(request())
        #expect(try written(channel) == ["HEADERS 200", "DATA 13 es"])
        // Written to NIOHTTP2Handler, which holds the DATA for a window that never opens: no
        // StreamClosedEvent. The connection is sending, not idle: it makes room for a newcomer only once
        // it has stalled (ConnectionSlots).
        #expect(!limiter.isIdle(channel))
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(try written(channel) == [])
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try written(channel) == ["RST_STREAM CANCEL"])
        #expect(limiter.isIdle(channel))
        _ = try channel.finish()
    }

    /// Hostile round 5, item 2: the send timeout timed the whole answer, so a steady slow reader was cut
    /// once the request timeout had passed since the answer was written. Each WINDOW_UPDATE (the
    /// stream's or the connection's) now starts it again, as nginx's send_timeout times each write.
    @Test func eachWindowTheClientOpensStartsTheSendTimeoutAgain() throws {
        let (channel, _) = try connectionWithLimiter(answering: "198.51.0.1;")
        try channel.writeInbound(request())
        #expect(try written(channel) == ["HEADERS 200", "DATA 13 es"])
        for window in [stream, HTTP2StreamID.rootStream, stream] {
            channel.embeddedEventLoop.advanceTime(by: .seconds(9))
            try channel.writeInbound(HTTP2Frame(streamID: window, payload: .windowUpdate(windowSizeIncrement: 1)))
            #expect(try written(channel) == [])
        }
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(try written(channel) == [])
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try written(channel) == ["RST_STREAM CANCEL"])
        _ = try channel.finish()
    }

    @Test func aConnectionWithoutAStreamClosesAfterTheIdleTimeoutWhateverElseArrives() throws {
        let channel = try connection(answering: "")
        try channel.writeInbound(request())
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: stream, reason: nil))
        _ = try written(channel)
        // A PING every 2 s, as the hostile client sent: before, each reset the idle timer.
        for _ in 0..<29 {
            try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(), ack: false)))
            channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        }
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(try written(channel) == ["other"])  // GOAWAY
        #expect(!channel.isActive)
    }

    @Test func anOpenStreamHoldsTheIdleTimerOff() throws {
        let channel = try connection(answering: "")
        try channel.writeInbound(request("POST", endStream: false))
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        try channel.writeInbound(data(1, endStream: true))
        _ = try written(channel)
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        // The answer's END_STREAM went out at 14 s; the idle timeout (60 s) counts from there.
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: stream, reason: nil))
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
    }
}

/// Hostile round 4, item 10: a header block trickled in CONTINUATION frames is timed by requestTimeout.
@Suite struct HeaderBlockDeadlineTests {
    private func frameHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32 = 1) -> [UInt8] {
        [UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
    }

    private let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    @Test func theScannerFollowsFramesSplitAnywhere() {
        // Preface, SETTINGS (6 bytes), HEADERS without END_HEADERS (3), CONTINUATION (2), CONTINUATION with
        // END_HEADERS (1), then a HEADERS with END_HEADERS: two blocks, however the bytes are split.
        let bytes =
            preface + frameHeader(length: 6, type: 4, flags: 0) + [0, 3, 0, 0, 0, 100]
            + frameHeader(length: 3, type: 1, flags: 1) + [0x82, 0x84, 0x86]
            + frameHeader(length: 2, type: 9, flags: 0) + [0x41, 0x01]
            + frameHeader(length: 1, type: 9, flags: 4) + [0x61]
            + frameHeader(length: 3, type: 1, flags: 5, stream: 3) + [0x82, 0x84, 0x86]
        for split in [1, 2, 5, 9, 24, 25, 40, bytes.count] {
            var scanner = HeaderBlockScanner()
            var changes: [HeaderBlockScanner.Change] = []
            var at = 0
            while at < bytes.count {
                let chunk = ByteBuffer(bytes: bytes[at..<min(at + split, bytes.count)])
                changes += scanner.scan(chunk.readableBytesView)
                at += split
            }
            #expect(changes == [.opened, .closed, .opened, .closed], "split every \(split) bytes")
            #expect(!scanner.inHeaderBlock)
        }
    }

    /// Feeds `head` in one piece, then `payload` a byte at a time: the block must be open from `head` until
    /// the payload's last byte, and closed by it.
    private func expectOpenUntilTheLastPayloadByte(
        _ head: [UInt8],
        _ payload: [UInt8],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        var scanner = HeaderBlockScanner()
        #expect(scanner.scan(ByteBuffer(bytes: head).readableBytesView) == [.opened], sourceLocation: sourceLocation)
        for (i, byte) in payload.enumerated() {
            let changes = scanner.scan(ByteBuffer(bytes: [byte]).readableBytesView)
            let last = i == payload.count - 1
            #expect(changes == (last ? [.closed] : []), "payload byte \(i)", sourceLocation: sourceLocation)
            #expect(scanner.inHeaderBlock == !last, "payload byte \(i)", sourceLocation: sourceLocation)
        }
    }

    /// Issue 74, item 3: a HEADERS frame with END_HEADERS whose payload trickles is a block still arriving
    /// until its last byte; it used to be no block at all, so its payload was timed by the idle timeout.
    @Test func aHeadersFrameWithEndHeadersIsOpenUntilItsLastPayloadByte() {
        let payload: [UInt8] = [0x82, 0x84, 0x86, 0x41, 0x01, 0x78]
        expectOpenUntilTheLastPayloadByte(preface + frameHeader(length: payload.count, type: 1, flags: 5), payload)
    }

    /// Issue 74, item 3: the last CONTINUATION's payload trickled keeps the block open until its last byte;
    /// the block used to close at that frame's 9-byte header.
    @Test func aLastContinuationIsOpenUntilItsLastPayloadByte() {
        let head =
            preface + frameHeader(length: 3, type: 1, flags: 1) + [0x82, 0x84, 0x86]
            + frameHeader(length: 3, type: 9, flags: 4)
        expectOpenUntilTheLastPayloadByte(head, [0x41, 0x01, 0x78])
    }

    @Test func aHeadersFrameWithEndHeadersAndNoPayloadOpensAndClosesAtOnce() {
        var scanner = HeaderBlockScanner()
        let bytes = preface + frameHeader(length: 0, type: 1, flags: 4)
        #expect(scanner.scan(ByteBuffer(bytes: bytes).readableBytesView) == [.opened, .closed])
        #expect(!scanner.inHeaderBlock)
    }

    /// A connection behind a 3 s deadline that has sent its preface and a HEADERS frame without END_HEADERS.
    private func connectionWithAnOpenHeaderBlock() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: HeaderBlockDeadline(timeout: .seconds(3)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeInbound(
            ByteBuffer(bytes: preface + frameHeader(length: 3, type: 1, flags: 1) + [0x82, 0x84, 0x86])
        )
        return channel
    }

    @Test func aHeaderBlockStillArrivingAfterTheTimeoutClosesTheConnection() throws {
        let channel = try connectionWithAnOpenHeaderBlock()
        // A CONTINUATION every 2.5 s, as the hostile client sent: each once reset the idle timer.
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(2500))
        try channel.writeInbound(ByteBuffer(bytes: frameHeader(length: 1, type: 9, flags: 0) + [0x61]))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        #expect(!channel.isActive)
    }

    /// Issue 74, item 3: a HEADERS frame with END_HEADERS whose payload arrives a byte a second is cut at the
    /// 3 s deadline; before, no timer ran for it (the block counted as closed at the frame's header).
    @Test func aLastFrameWhosePayloadTricklesIsCutAtTheDeadline() throws {
        let channel = EmbeddedChannel(handler: HeaderBlockDeadline(timeout: .seconds(3)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeInbound(ByteBuffer(bytes: preface + frameHeader(length: 6, type: 1, flags: 5)))
        for byte: UInt8 in [0x82, 0x84] {
            channel.embeddedEventLoop.advanceTime(by: .seconds(1))
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
            #expect(channel.isActive)
        }
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
    }

    /// The usual request, a whole HEADERS frame in one read, opens and closes its block in that read: no
    /// timer is left to close the connection.
    @Test func aWholeHeadersFrameInOneReadLeavesNoTimer() throws {
        let channel = EmbeddedChannel(handler: HeaderBlockDeadline(timeout: .seconds(3)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeInbound(
            ByteBuffer(bytes: preface + frameHeader(length: 3, type: 1, flags: 5) + [0x82, 0x84, 0x86])
        )
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(channel.isActive)
        _ = try channel.finish()
    }

    @Test func aWholeHeaderBlockStopsTheTimer() throws {
        let channel = try connectionWithAnOpenHeaderBlock()
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        try channel.writeInbound(ByteBuffer(bytes: frameHeader(length: 1, type: 9, flags: 4) + [0x61]))
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(channel.isActive)
        // Every byte went on unchanged.
        var passed = 0
        while let chunk = try channel.readInbound(as: ByteBuffer.self) { passed += chunk.readableBytes }
        #expect(passed == preface.count + 12 + 10)
        _ = try channel.finish()
    }
}

/// The rules, without a channel.
@Suite struct HTTP2RequestsTests {
    let id = HTTP2StreamID(3)
    let headers: HPACKHeaders = [":method": "POST", ":path": "/dns-query", ":authority": "dns.test", "accept": "a"]

    @Test func trailersEndARequestOnceAndAnythingAfterTheEndResetsTheStream() {
        var requests = HTTP2Requests(maxRequestBytes: 100)
        #expect(requests.headers(id, headers, endStream: false) == [.startTimer(id)])
        #expect(requests.headers(id, ["x-trailer": "1"], endStream: true) == [.answer(id)])
        #expect(requests.headers(id, ["x-trailer": "2"], endStream: true) == [.reset(id, .protocolError)])
        #expect(requests.request(id) == nil)
    }

    @Test func headersInTheMiddleOfABodyWithoutTheEndResetTheStream() {
        var requests = HTTP2Requests(maxRequestBytes: 100)
        _ = requests.headers(id, headers, endStream: false)
        #expect(requests.headers(id, ["x": "1"], endStream: false) == [.reset(id, .protocolError)])
    }

    @Test func aClosedStreamIsForgottenSoALateAnswerFindsNothing() {
        var requests = HTTP2Requests(maxRequestBytes: 100)
        _ = requests.headers(id, headers, endStream: true)
        #expect(requests.request(id) != nil)
        requests.closed(id)
        #expect(requests.request(id) == nil)
    }

    /// The body grows where it is: a stream copied out of the table would share its storage, and
    /// appending to the copy would copy the whole body on every DATA frame (a 20 MB upload took 9x longer).
    @Test func aBodyGrowsInPlaceNotCopiedPerFrame() throws {
        var requests = HTTP2Requests(maxRequestBytes: 1 << 20)
        _ = requests.headers(id, headers, endStream: false)
        _ = requests.data(id, ByteBuffer(repeating: 1, count: 1000), flowControlledBytes: 1000, endStream: false)
        func storage() -> UInt? {
            requests.request(id)?.body.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        }
        let before = storage()
        try #require((requests.request(id)?.body.capacity ?? 0) > 1000)
        _ = requests.data(id, ByteBuffer(repeating: 2, count: 1), flowControlledBytes: 1, endStream: false)
        #expect(storage() == before)
        #expect(requests.request(id)?.body.readableBytes == 1001)
    }

    @Test func theRequestKeepsItsFieldsAndGetsAHostFromTheAuthority() {
        var requests = HTTP2Requests(maxRequestBytes: 100)
        _ = requests.headers(id, headers, endStream: false)
        _ = requests.data(id, ByteBuffer(string: "abc"), flowControlledBytes: 3, endStream: true)
        let request = requests.request(id)!.listenerRequest(isTLS: true, remote: "r", remoteIP: nil)
        #expect(request.method == .POST)
        #expect(request.uri == "/dns-query")
        #expect(request.headers["host"] == ["dns.test"])
        #expect(request.headers["accept"] == ["a"])
        #expect(!request.headers.contains { $0.name.hasPrefix(":") })
        #expect(String(buffer: request.body) == "abc")
    }

    @Test func drainingWithNoStreamSendsGoAwayAndClosesAtOnce() {
        var requests = HTTP2Requests(maxRequestBytes: 100)
        #expect(requests.drain() == [.goAway(lastStreamID: .rootStream), .close])
        #expect(requests.drain() == [], "a second quiesce event changes nothing")
    }

    @Test func drainingAnswersTheStreamsTakenRefusesLaterOnesAndClosesAfterTheLast() {
        var requests = HTTP2Requests(maxRequestBytes: 100)
        // Whole on its HEADERS: answered at once, nothing left to time.
        #expect(requests.headers(id, headers, endStream: true) == [.answer(id)])
        let next = HTTP2StreamID(5)
        _ = requests.headers(next, headers, endStream: false)
        #expect(requests.drain() == [.goAway(lastStreamID: next)])
        // A stream the client opened before it read the GOAWAY is refused: it may send it elsewhere.
        let late = HTTP2StreamID(7)
        #expect(requests.headers(late, headers, endStream: true) == [.reset(late, .refusedStream)])
        // Stream 5's request still arrives whole and is answered.
        #expect(
            requests.data(next, ByteBuffer(string: "q"), flowControlledBytes: 1, endStream: true)
                == [.openWindows(bytes: 1, stream: nil), .answer(next)]
        )
        #expect(requests.closed(id) == [])
        #expect(requests.closed(next) == [.close])
    }

}

/// Through real sockets: our engine uploading to our listener over TLS and h2 (a NIO server, with the
/// same flood count). Empty chunks in a streamed body are not sent as empty DATA frames, so the upload
/// arrives whole instead of the server closing the connection; bodies larger than HTTP/2's initial
/// windows arrive whole, one after another on one connection, as the listener opens the windows again.
@Suite struct HTTP2UploadTests {
    private func start(maxRequestBytes: Int = 64 * 1024) async throws -> (HTTPListener, HTTPEngine) {
        let pki = try DemoPKI()
        let (chain, key) = try pki.leaf("upload.test")
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(chain)],
            privateKey: .privateKey(key)
        )
        tls.applicationProtocols = ["h2"]
        var limits = HTTPListener.Limits()
        limits.maxRequestBytes = maxRequestBytes
        let listener = try await HTTPListener.start(
            host: "127.0.0.1",
            port: 0,
            tls: try NIOSSLContext(configuration: tls),
            limits: limits,
            logger: Logger(label: "test")
        ) { request in
            let text = String(buffer: request.body)
            return ListenerResponse(status: .ok, body: Array("\(request.version) \(text.count) \(text.suffix(3))".utf8))
        }
        var configuration = HTTPEngine.Configuration()
        configuration.tls = HTTPEngineTLS(additionalTrustRoots: [TrustAnchor(der: try pki.caCertificate.toDERBytes())])
        let engine = try HTTPEngine(
            configuration: configuration,
            addressSource: StaticAddressSource(["upload.test": [IPAddress("127.0.0.1")!]])
        )
        return (listener, engine)
    }

    private func post(_ engine: HTTPEngine, port: Int, _ body: HTTPRequestBody) async throws -> String {
        let response = try await engine.execute(
            try HTTPEngineRequest(method: .POST, url: "https://upload.test:\(port)/up", body: body)
        )
        #expect(response.status == .ok)
        return String(buffer: try await response.body.collect(upTo: 1024))
    }

    @Test func emptyChunksInAStreamedBodyAreNotSentAsEmptyDataFrames() async throws {
        let (listener, engine) = try await start()
        defer {
            engine.shutdown()
            Task { await listener.stop() }
        }
        let chunks = ["", "", "abc", "", "", "def", ""]
        let body = HTTPRequestBody.stream(length: nil) {
            AsyncThrowingStream { continuation in
                for chunk in chunks { continuation.yield(ByteBuffer(string: chunk)) }
                continuation.finish()
            }
        }
        #expect(try await post(engine, port: listener.port, body) == "h2 6 def")
    }

    @Test func bodiesLargerThanTheWindowsArriveWholeOnOneConnection() async throws {
        let (listener, engine) = try await start(maxRequestBytes: 1 << 20)
        defer {
            engine.shutdown()
            Task { await listener.stop() }
        }
        for round in 0..<3 {
            let body = Array(repeating: UInt8(ascii: "a"), count: 200_000 - 3) + Array("x\(round)z".utf8)
            #expect(try await post(engine, port: listener.port, .bytes(body)) == "h2 200000 x\(round)z")
        }
        #expect(listener.openConnections == 1)
    }
}
