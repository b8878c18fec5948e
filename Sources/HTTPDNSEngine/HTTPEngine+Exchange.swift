// One exchange on a leased connection (HTTP/1.1) or on a new stream of it (HTTP/2): the handler
// installed and the request written in one event-loop turn where the body allows, the response head
// awaited while a streamed body uploads, the connection given back when the exchange is over. The
// rules are ExchangeStateMachine's; ExchangeHandler carries them out on the channel.

import HTTPDNSCore
import NIOCore
import NIOHTTP1
import NIOHTTPCompression

extension HTTPEngine {
    /// Runs one exchange on `connection` (or a new stream on it) and returns at the response head.
    func exchange(
        _ request: HTTPRequest,
        on connection: Connection,
        key: PoolKey,
        deadline: NIODeadline?,
        recorder: MetricsRecorder
    ) async throws -> HTTPResponse {
        let channel: any Channel
        do {
            channel = try await connection.exchangeChannel(scheme: request.url.scheme)
        } catch {
            pool.release(connection, key: key, reusable: false)
            // Only HTTP/2 opens a channel here, and a stream that could not be opened sent nothing.
            throw StreamNotProcessed(
                error: HTTPEngineError(
                    .protocolError,
                    "could not open a stream to \(request.url.host): \(error)",
                    underlying: error
                )
            )
        }
        let loop = channel.eventLoop
        let headPromise = loop.makePromise(of: HTTPResponseHead.self)
        let endPromise = loop.makePromise(of: Bool.self)
        let box = NIOLoopBoundBox<ExchangeHandler?>.makeEmptyBox(valueType: ExchangeHandler.self, eventLoop: loop)
        let sequence = HTTPResponseBody.Producer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
            finishOnDeinit: false,
            delegate: BodyDelegate(handler: box)
        )
        let idle = TimeAmount.nanoseconds((request.idleTimeout ?? configuration.timeouts.idleRead).nanoseconds)
        let decompress = request.decompress
        let host = request.url.host
        let source = sequence.source
        let head = makeHead(request)
        // A request without a body, or with a small one, is written in the same event-loop turn that
        // installs the handler: no upload task, no extra hops. Larger bodies stream from a task below.
        let inline: ByteBuffer?? =
            switch request.body?.storage {
            case .none: .some(nil)
            case .bytes(let b) where b.readableBytes <= 1 << 16: .some(b)
            default: nil
            }
        // Not awaited: the task waits once, for the response head. A failure to install the handler
        // fails the head and the exchange (the connection is then not reused). The total timeout is
        // armed once the handler is in place (a busy loop may run a due timer before this closure).
        let timeoutTask = NIOLoopBoundBox.makeEmptyBox(valueType: Scheduled<Void>.self, eventLoop: loop)
        let onStream = connection.version == .http2
        let installed = loop.submit {
            let sync = channel.pipeline.syncOperations
            let decompressor = decompress ? NIOHTTPResponseDecompressor(limit: .none) : nil
            if let decompressor { try sync.addHandler(decompressor) }
            let handler = ExchangeHandler(
                head: headPromise,
                end: endPromise,
                source: source,
                idleTimeout: idle,
                host: host,
                onStream: onStream,
                decompressor: decompressor
            )
            try sync.addHandler(handler)
            box.value = handler
            if let deadline {
                timeoutTask.value = loop.scheduleTask(deadline: deadline) { box.value?.totalTimeoutFired() }
            }
            if let inline {
                // One flush: HEADERS(+DATA) with END_STREAM on h2. kresd 5.6's doh2 answers 400 to a
                // POST whose HEADERS and DATA frames arrive in separate writes.
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                // No empty DATA frame without END_STREAM (NIO servers count those as a flood).
                if let body = inline, body.readableBytes > 0 {
                    channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil)
                }
                let written = loop.makePromise(of: Void.self)
                written.futureResult.whenFailure { box.value?.requestWriteFailed($0) }
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: written)
            }
        }
        installed.whenFailure { error in
            // No handler to finish the body or close the channel (e.g. the stream was closed with its
            // connection).
            let error = HTTPEngineError(
                .protocolError,
                "could not start the exchange with \(host): \(error)",
                underlying: error
            )
            source.finish(error)
            headPromise.fail(error)
            endPromise.fail(error)
            channel.close(promise: nil)
        }
        if let inline { recorder.update { $0.bytesSent = inline?.readableBytes ?? 0 } }

        // Give the connection back once the exchange is over, whichever way it ends. The handler has
        // already left the channel clean for the next request, or closed it.
        let pool = self.pool
        endPromise.futureResult.whenComplete { result in
            timeoutTask.value?.cancel()
            box.value = nil
            pool.release(connection, key: key, reusable: (try? result.get()) ?? false)
        }

        do {
            return try await responseHead(
                of: request,
                head: head,
                inline: inline,
                on: channel,
                connection: connection,
                sequence: sequence.sequence,
                headPromise: headPromise,
                recorder: recorder
            ) {
                loop.execute { box.value?.cancel() }
            }
        } catch let error as HTTPEngineError where connection.version == .http2 {
            if await connection.neverProcessed(stream: channel) { throw StreamNotProcessed(error: error) }
            throw error
        }
    }

    /// Waits for the response head (uploading a streamed body meanwhile) and returns the response with
    /// its body still streaming.
    private func responseHead(
        of request: HTTPRequest,
        head: HTTPRequestHead,
        inline: ByteBuffer??,
        on channel: any Channel,
        connection: Connection,
        sequence: HTTPResponseBody.Producer,
        headPromise: EventLoopPromise<HTTPResponseHead>,
        recorder: MetricsRecorder,
        onCancel: @escaping @Sendable () -> Void
    ) async throws -> HTTPResponse {
        let host = request.url.host
        return try await withTaskCancellationHandler {
            let responseHead: HTTPResponseHead
            if inline != nil {
                responseHead = try await headPromise.futureResult.get()
            } else {
                async let upload: Void = send(head: head, body: request.body, on: channel, recorder: recorder)
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
                $0.ttfbMs = recorder.sinceStart()
                $0.status = Int(responseHead.status.code)
            }
            metrics.responseHead(after: ContinuousClock.now - recorder.started, version: connection.version)
            return HTTPResponse(
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

    private func makeHead(_ request: HTTPRequest) -> HTTPRequestHead {
        var headers = request.headers
        if !headers.contains(name: "host") { headers.add(name: "host", value: request.url.authority) }
        if !headers.contains(name: "user-agent") { headers.add(name: "user-agent", value: configuration.userAgent) }
        if request.decompress, !headers.contains(name: "accept-encoding") {
            headers.add(name: "accept-encoding", value: "gzip, deflate")
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
    /// only once the one before it has been taken by the connection (TCP or h2 flow control).
    ///
    /// The HTTP/2 codec holds each part back until the next one arrives (so it can set END_STREAM on
    /// the last frame): waiting on the part just written would stall, so each wait is on the part
    /// before. A GET goes out as one HEADERS frame with END_STREAM, a body's last DATA frame carries it.
    private func send(head: HTTPRequestHead, body: HTTPRequestBody?, on channel: any Channel, recorder: MetricsRecorder)
        async throws
    {
        func write(_ part: HTTPClientRequestPart, flush: Bool) -> EventLoopFuture<Void> {
            let promise = channel.eventLoop.makePromise(of: Void.self)
            if flush { channel.writeAndFlush(part, promise: promise) } else { channel.write(part, promise: promise) }
            return promise.futureResult
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
