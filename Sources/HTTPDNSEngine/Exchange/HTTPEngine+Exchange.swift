// One exchange on a leased connection (HTTP/1.1) or on a new stream of it (HTTP/2): the exchange set
// up and the request written in one event-loop turn where the body allows, the response head awaited
// while a streamed body uploads, the connection given back when the exchange is over. The rules are
// ExchangeStateMachine's; ExchangeHandler carries them out on an HTTP/1.1 channel, ClientStream on an
// HTTP/2 stream (HTTP2ClientStreams.swift).

import HTTPDNSCore
import NIOCore
import NIOHTTP1

extension HTTPEngine {
    /// Runs one exchange on `connection`, or on a new stream of it for HTTP/2, and returns at the
    /// response head.
    func exchange(
        _ request: HTTPEngineRequest,
        on connection: Connection,
        key: ConnectionProfile,
        deadline: NIODeadline?,
        recorder: MetricsRecorder
    ) async throws -> HTTPEngineResponse {
        let loop = connection.channel.eventLoop
        // A request without a body, or with a small one, is written in the same event-loop turn that
        // starts the exchange: no upload task, no extra hops. Larger bodies stream from a task below.
        let inline: ByteBuffer?? =
            switch request.body?.storage {
            case .none: .some(nil)
            case .bytes(let b) where b.readableBytes <= 1 << 16: .some(b)
            default: nil
            }
        let start = ExchangeStart(
            loop: loop,
            head: makeHead(request),
            scheme: request.url.scheme,
            host: request.url.host,
            inline: inline,
            decompress: request.decompress,
            idleTimeout: TimeAmount(request.idleTimeout ?? configuration.timeouts.read),
            deadline: deadline,
            headPromise: loop.makePromise(of: HTTPResponseHead.self),
            endPromise: loop.makePromise(of: Bool.self),
            timeoutTask: NIOLoopBoundBox.makeEmptyBox(valueType: Scheduled<Void>.self, eventLoop: loop),
            recorder: recorder
        )
        // HTTP/2: whether the server cannot have processed the stream, once it has failed.
        let outcome = connection.streams == nil ? nil : StreamOutcome()
        // Not awaited: the task waits once, for the response head.
        let started =
            if let streams = connection.streams, let outcome {
                start.onStream(of: streams, outcome: outcome)
            } else {
                start.onConnection(connection)
            }
        if let inline {
            let count = inline?.readableBytes ?? 0
            recorder.update { $0.bytesSent = count }
            if count > 0 { request.onBodySent?(count) }
        }

        // Give the connection back once the exchange is over, whichever way it ends. An HTTP/1.1
        // exchange has already left the channel clean for the next request, or closed it.
        let pool = self.pool
        let driver = started.driver
        start.endPromise.futureResult.whenComplete { result in
            start.timeoutTask.value?.cancel()
            driver.clear()
            pool.release(connection, key: key, reusable: (try? result.get()) ?? false)
        }

        do {
            return try await responseHead(
                of: request,
                head: start.head,
                inline: inline,
                sink: started.sink,
                connection: connection,
                sequence: started.sequence.sequence,
                headPromise: start.headPromise,
                recorder: recorder
            ) {
                driver.onLoop { $0.cancel() }
            }
        } catch let error as HTTPEngineError where connection.version == .http2 {
            if outcome?.neverProcessed(goAway: connection.goAway) ?? false {
                throw StreamNotProcessed(error: error)
            }
            throw error
        }
    }

    /// Waits for the response head (uploading a streamed body meanwhile) and returns the response with
    /// its body still streaming.
    private func responseHead(
        of request: HTTPEngineRequest,
        head: HTTPRequestHead,
        inline: ByteBuffer??,
        sink: RequestSink,
        connection: Connection,
        sequence: HTTPResponseBody.Producer,
        headPromise: EventLoopPromise<HTTPResponseHead>,
        recorder: MetricsRecorder,
        onCancel: @escaping @Sendable () -> Void
    ) async throws -> HTTPEngineResponse {
        let host = request.url.host
        return try await withTaskCancellationHandler {
            let responseHead: HTTPResponseHead
            if inline != nil {
                responseHead = try await headPromise.futureResult.get()
            } else {
                async let upload: Void = send(
                    head: head,
                    body: request.body,
                    to: sink,
                    recorder: recorder,
                    onBodySent: request.onBodySent
                )
                do {
                    responseHead = try await headPromise.futureResult.get()
                } catch {
                    _ = try? await upload
                    throw error
                }
                do {
                    try await upload
                } catch {
                    // The server answered before taking the whole body (e.g. 413): the answer stands.
                    logger.debug("request body not fully sent", metadata: ["host": "\(host)", "error": "\(error)"])
                }
            }
            recorder.update {
                $0.timeToFirstByte = recorder.sinceStart()
                $0.status = Int(responseHead.status.code)
            }
            metrics.responseHead(after: ContinuousClock.now - recorder.started, version: connection.version)
            return HTTPEngineResponse(
                status: responseHead.status,
                headers: responseHead.headers,
                version: connection.version,
                url: request.url,
                body: HTTPResponseBody(producer: sequence, recorder: recorder),
                recorder: recorder
            )
        } onCancel: {
            onCancel()
        }
    }

    private func makeHead(_ request: HTTPEngineRequest) -> HTTPRequestHead {
        var headers = request.headers
        if !headers.contains(name: "host") { headers.add(name: "host", value: request.url.authority) }
        if !headers.contains(name: "user-agent") { headers.add(name: "user-agent", value: configuration.userAgent) }
        if request.decompress {
            let accept = headers["accept-encoding"]
            headers.replaceOrAdd(
                name: "accept-encoding",
                value: ContentCodings.offered(accept.isEmpty ? nil : accept.joined(separator: ", "))
            )
        }
        if let body = request.body {
            headers.remove(name: "content-length")
            headers.remove(name: "transfer-encoding")
            if let length = body.length {
                headers.add(name: "content-length", value: "\(length)")
            } else {
                headers.add(name: "transfer-encoding", value: "chunked")
            }
        }
        return HTTPRequestHead(version: .http1_1, method: request.method, uri: request.url.target, headers: headers)
    }

    /// Writes the head and streams the body with one chunk in flight: a chunk is read from the source
    /// only once the one before it has been taken by the connection (TCP or h2 flow control). A GET
    /// goes out as one HEADERS frame with END_STREAM, a streamed body ends with an empty DATA frame
    /// that carries it.
    private func send(
        head: HTTPRequestHead,
        body: HTTPRequestBody?,
        to sink: RequestSink,
        recorder: MetricsRecorder,
        onBodySent: (@Sendable (Int) -> Void)?
    ) async throws {
        func write(_ part: HTTPClientRequestPart, flush: Bool) -> EventLoopFuture<Void> {
            sink.write(part, flush: flush)
        }
        var previous = write(.head(head), flush: false)
        var sent = 0
        if let body {
            for try await chunk in body.chunks() where chunk.readableBytes > 0 {
                sent += chunk.readableBytes
                if let length = body.length, sent > length {
                    throw HTTPEngineError(
                        .invalidRequest,
                        "the request body is longer than its declared \(length) bytes"
                    )
                }
                let written = write(.body(.byteBuffer(chunk)), flush: true)
                try await previous.get()
                previous = written
                recorder.update { $0.bytesSent = sent }
                onBodySent?(sent)
            }
            if let length = body.length, sent != length {
                throw HTTPEngineError(
                    .invalidRequest,
                    "the request body ended after \(sent) of its declared \(length) bytes"
                )
            }
        }
        let end = write(.end(nil), flush: true)
        try await previous.get()
        try await end.get()
    }
}

/// An HTTP/2 exchange that failed before the server processed it (RFC 9113 §6.8: a stream above the
/// last one its GOAWAY accepted, or one never written): `execute` sends it again on a new connection.
struct StreamNotProcessed: Error {
    var error: HTTPEngineError
}

/// What starting one exchange takes, and the two ways to start it: a stream of an HTTP/2 connection
/// (`ClientStream`) or an HTTP/1.1 connection's own channel (`ExchangeHandler`). Either way, on the
/// loop: the exchange is set up, the total timeout armed (once it is in place: a busy loop may run a
/// due timer before the closure that starts it) and an inline request written.
struct ExchangeStart: Sendable {
    let loop: any EventLoop
    let head: HTTPRequestHead
    let scheme: String
    let host: String
    /// The whole body when it is small (`.some(nil)`: no body); nil when it streams.
    let inline: ByteBuffer??
    let decompress: Bool
    let idleTimeout: TimeAmount
    let deadline: NIODeadline?
    let headPromise: EventLoopPromise<HTTPResponseHead>
    let endPromise: EventLoopPromise<Bool>
    let timeoutTask: NIOLoopBoundBox<Scheduled<Void>?>
    /// The request's metrics, whose span ends as cancelled when the body is dropped before its end.
    let recorder: MetricsRecorder

    /// The body's sequence, the driver that carries the exchange out, and where a streamed body goes.
    struct Started {
        var sequence: HTTPResponseBody.Producer.NewSequence
        var driver: DriverBox
        var sink: RequestSink
    }

    private static func bodySequence(_ delegate: BodyDelegate) -> HTTPResponseBody.Producer.NewSequence {
        HTTPResponseBody.Producer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
            finishOnDeinit: false,
            delegate: delegate
        )
    }

    /// HTTP/2: a new stream of the connection, with no channel of its own. A stream opened on a
    /// connection that has gone fails by itself, as never sent.
    func onStream(of streams: NIOLoopBound<HTTP2ClientStreams>, outcome: StreamOutcome) -> Started {
        let box = NIOLoopBoundBox<ClientStream?>.makeEmptyBox(valueType: ClientStream.self, eventLoop: loop)
        let sequence = Self.bodySequence(BodyDelegate(driver: box, recorder: recorder))
        let source = sequence.source
        loop.execute { [self] in
            let stream = ClientStream(
                connection: streams.value,
                eventLoop: loop,
                head: headPromise,
                end: endPromise,
                source: source,
                idleTimeout: idleTimeout,
                request: head,
                host: host,
                decompress: decompress,
                outcome: outcome
            )
            box.value = stream
            if let deadline {
                timeoutTask.value = loop.scheduleTask(deadline: deadline) { box.value?.totalTimeoutFired() }
            }
            stream.start(head, scheme: scheme, body: inline)
        }
        return Started(sequence: sequence, driver: .stream(box), sink: RequestSink(stream: box))
    }

    /// HTTP/1.1: the exchange's handler in the connection's pipeline. A failure to install it fails the
    /// exchange and closes the connection.
    func onConnection(_ connection: Connection) -> Started {
        let channel = connection.channel
        let box = NIOLoopBoundBox<ExchangeHandler?>.makeEmptyBox(valueType: ExchangeHandler.self, eventLoop: loop)
        let sequence = Self.bodySequence(BodyDelegate(driver: box, recorder: recorder))
        let source = sequence.source
        let installed = loop.submit { [self] in
            let sync = channel.pipeline.syncOperations
            let handler = ExchangeHandler(
                head: headPromise,
                end: endPromise,
                source: source,
                idleTimeout: idleTimeout,
                host: host,
                decompress: decompress
            )
            try sync.addHandler(handler)
            box.value = handler
            if let deadline {
                timeoutTask.value = loop.scheduleTask(deadline: deadline) { box.value?.totalTimeoutFired() }
            }
            if let inline {
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                // No empty body part: with chunked framing it would read as the body's end.
                if let body = inline, body.readableBytes > 0 {
                    channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil)
                }
                let written = loop.makePromise(of: Void.self)
                written.futureResult.whenFailure { box.value?.requestWriteFailed($0) }
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: written)
            }
        }
        installed.whenFailure { [self] error in
            let error = HTTPEngineError(
                .protocolError,
                "could not start the exchange with \(host): \(error)",
                underlying: error
            )
            source.finish(error)
            headPromise.fail(error)
            endPromise.fail(error)
            connection.close()
        }
        return Started(sequence: sequence, driver: .connection(box), sink: RequestSink(channel: channel))
    }
}
