// The HTTP engine: every HTTP exchange of the project goes through this type, the resolver's own DoH
// and JSON queries included (`HTTPDNS` owns two instances of it: one for the app's requests, resolving
// through HTTPDNS, and one for the resolver's queries, which connect to configured addresses).
//
// "Who we talk to" and "where we connect" are kept apart: the request URL keeps the real host (TLS SNI,
// certificate check, Host / :authority); the socket address comes from an AddressSource (the resolver)
// at connect time, ranked by how earlier connects to each address went. Verification is never off.
//
// A request: resolve (unless the connection is reused) → lease a connection from the pool → run the
// exchange on it (HTTP/1.1) or on a new stream (HTTP/2) → hand back the response with its body still
// streaming. The connection returns to the pool when the body has been read to the end.

import HTTPDNSCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL

/// Sends HTTP requests to addresses from an `AddressSource` while speaking to the real hostname.
///
/// Thread-safe; share one instance. Call `shutdown()` to close pooled connections.
public final class HTTPEngine: Sendable {
    package let configuration: Configuration
    let group: any EventLoopGroup
    let logger: Logger
    let addressSource: (any AddressSource)?
    let pool: ConnectionPool
    let factory: ConnectionFactory
    let metrics = EngineMetrics()
    /// The network path: where IPv4 is reached through NAT64, IPv4 addresses are connected to through
    /// their synthesized IPv6 form; when it changes, pooled connections are retired.
    package let path: NetworkPath

    /// - Parameters:
    ///   - addressSource: where host names are resolved at connect time (the HTTPDNS resolver). Without
    ///     one, names go to getaddrinfo; IP-literal URLs never need one.
    ///   - path: the network path to connect on; by default the address source's, else one that stays
    ///     unprobed (addresses used as they are).
    package init(
        configuration: Configuration = Configuration(),
        addressSource: (any AddressSource)? = nil,
        path: NetworkPath? = nil,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "httpdns.engine")
    ) throws {
        self.configuration = configuration
        self.addressSource = addressSource
        self.path = path ?? addressSource?.networkPath ?? NetworkPath()
        self.group = eventLoopGroup
        self.logger = logger
        let factory = try ConnectionFactory(
            configuration: configuration,
            addressSource: addressSource,
            path: self.path,
            group: eventLoopGroup
        )
        let limits = PoolStateMachine.Limits(
            maxConnectionsPerHost: configuration.maxConnectionsPerHost,
            maxConcurrentStreams: configuration.maxConcurrentStreams,
            idleTimeout: .nanoseconds(configuration.idleConnectionTimeout.nanoseconds)
        )
        self.factory = factory
        self.pool = ConnectionPool(limits: limits, group: eventLoopGroup) { recipe, deadline in
            try await factory.connect(recipe, deadline: deadline)
        }
        self.path.onChange { [weak pool] in pool?.retireConnections() }
    }

    /// An engine with default settings and extra trust roots.
    package convenience init(
        tls: HTTPEngineTLS,
        addressSource: (any AddressSource)? = nil,
        logger: Logger = Logger(label: "httpdns.engine")
    ) throws {
        var configuration = Configuration()
        configuration.tls = tls
        try self.init(configuration: configuration, addressSource: addressSource, logger: logger)
    }

    /// A plain TCP connection to `host:port` for a CONNECT tunnel, made the way the engine makes its own
    /// (lookup through the address source, ranking, NAT64, happy eyeballs), on `loop`, within
    /// `timeout`. The proxy's tunnels use it. Throws `HTTPEngineError`.
    package func openTunnel(host: String, port: Int, on loop: any EventLoop, timeout: Duration) async throws
        -> any Channel
    {
        try await factory.tunnel(host: host, port: port, on: loop, timeout: timeout)
    }

    /// Closes every pooled connection. Requests started afterwards fail.
    package func shutdown() {
        pool.shutdown()
    }

    /// Connections open now.
    package var openConnections: Int { pool.openConnections }

    /// One of the engine's event loops (the next, in turn). A task that prefers it through
    /// `EventLoopTaskExecutor` (`Task(executorPreference:)`, `withTaskExecutorPreference`; macOS 15 /
    /// iOS 18) sends its requests on connections of that loop and is resumed there when their answers
    /// arrive: no thread hop per request. Only for work that never blocks.
    package func nextEventLoop() -> any EventLoop {
        group.next()
    }

    // MARK: Requests

    /// Sends `request` and returns as soon as the response head has arrived; read `response.body` for
    /// the rest. Redirects are returned as they are (see `send(_:followRedirects:)`).
    ///
    /// - Parameter addresses: where to connect, instead of asking the address source (e.g. a resolver
    ///   endpoint's bootstrap IPs).
    package func execute(_ request: HTTPRequest, addresses: ResolvedAddresses? = nil) async throws -> HTTPResponse {
        let recorder = MetricsRecorder(url: request.url)
        do {
            return try await execute(request, addresses: addresses, recorder: recorder, retries: Self.retries)
        } catch {
            recorder.finish()
            throw error
        }
    }

    private func execute(
        _ request: HTTPRequest,
        addresses given: ResolvedAddresses?,
        recorder: MetricsRecorder,
        retries: Int
    ) async throws -> HTTPResponse {
        let url = request.url
        let versions = request.versions ?? configuration.versions
        let h2c = !url.isTLS && configuration.http2PriorKnowledge
        let key = PoolKey(scheme: url.scheme, host: url.host, port: url.port, versions: versions, h2c: h2c)
        let deadline = (request.timeout ?? configuration.timeouts.total).map {
            NIODeadline.now() + .nanoseconds($0.nanoseconds)
        }

        let recipe = ConnectRecipe(
            url: url,
            given: given,
            versions: versions,
            h2c: h2c,
            idleTimeout: request.idleTimeout
        )
        let connection: Connection
        let reused: Bool
        do {
            (connection, reused) = try await pool.lease(key, recipe: recipe, deadline: deadline, eventLoop: group.any())
        } catch let failed as ConnectAttemptFailed {
            if let lookup = failed.lookup {
                recorder.update {
                    $0.dnsSource = lookup.source
                    $0.dnsMs = lookup.duration?.milliseconds
                }
            }
            throw failed.error
        }
        recorder.update {
            $0.reused = reused
            $0.ip = connection.remote.ipAddress
            $0.synthesizedFrom = connection.synthesizedFrom?.description
            $0.port = connection.remote.port
            $0.protocol = connection.version.rawValue
            if reused {
                $0.dnsSource = $0.dnsSource ?? "reused connection"
            } else {
                $0.dnsSource = connection.lookup.source
                $0.dnsMs = connection.lookup.duration?.milliseconds
                $0.connectMs = connection.connectDuration.milliseconds
                $0.tlsMs = connection.tlsDuration?.milliseconds
            }
        }
        if !reused { metrics.connected(connect: connection.connectDuration, tls: connection.tlsDuration) }
        do {
            return try await exchange(request, on: connection, key: key, deadline: deadline, recorder: recorder)
        } catch let error as HTTPEngineError
            where retries > 0 && error.code == .protocolError && isRetriable(request)
            && (reused && connection.version == .http1 || connection.goAway?.wasReceived == true)
        {
            // A kept-alive HTTP/1.1 connection the server had already closed, or an HTTP/2 one it is
            // closing (GOAWAY): an idempotent request goes once more on a new connection.
            logger.debug("retrying on a new connection", metadata: ["host": "\(url.host)"])
            return try await execute(request, addresses: given, recorder: recorder, retries: retries - 1)
        } catch let refused as StreamNotProcessed {
            // The server never saw this stream: safe to send again on a new one, whatever the method.
            guard retries > 0, isReplayable(request) else { throw refused.error }
            logger.debug("retrying a stream the server never processed", metadata: ["host": "\(url.host)"])
            return try await execute(request, addresses: given, recorder: recorder, retries: retries - 1)
        }
    }

    /// New connections a request may be sent again on when the one it got was closing under it. More
    /// than one: under load the retry can land on the next connection a server is retiring (nginx ends
    /// an h2 connection every `keepalive_requests` streams).
    static let retries = 2

    private func isRetriable(_ request: HTTPRequest) -> Bool {
        let idempotent: [HTTPMethod] = [.GET, .HEAD, .OPTIONS, .PUT, .DELETE]
        return idempotent.contains(request.method) && isReplayable(request)
    }

    /// A body that can be sent a second time (none, or bytes in memory).
    private func isReplayable(_ request: HTTPRequest) -> Bool {
        if case .stream = request.body?.storage { return false }
        return true
    }

    /// Runs one exchange on `connection` (or a new stream on it) and returns at the response head.
    private func exchange(
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

    // MARK: Redirects

    /// Sends `request`, following up to `followRedirects` redirects. Each hop is a new request: its
    /// host is resolved again at connect time. Method rules: 301/302 turn POST into GET and 303 turns
    /// anything but HEAD into GET, dropping the body; 307/308 keep method and body (a body that cannot
    /// be sent again fails the redirect). Credentials and cookies are not carried to another host.
    /// The request's total timeout (`timeout`, else the configuration's) bounds the whole chain.
    public func send(_ request: HTTPRequest, followRedirects: Int = 0) async throws -> HTTPResponse {
        var current = request
        var hops = 0
        let deadline = (request.timeout ?? configuration.timeouts.total).map { ContinuousClock.now + $0 }
        while true {
            if let deadline {
                let left = deadline - ContinuousClock.now
                guard left > .zero else {
                    throw HTTPEngineError(.totalTimeout, "\(current.url.host): no time left for redirect \(hops)")
                }
                current.timeout = left
            }
            let response = try await execute(current)
            response.recorder.update { $0.redirects = hops }
            guard followRedirects > 0, let next = try Self.redirect(from: current, response: response) else {
                return response
            }
            guard hops < followRedirects else {
                throw HTTPEngineError(.tooManyRedirects, "more than \(followRedirects) redirects (last to \(next.url))")
            }
            // Drain a small redirect body so the connection can be reused; abandon a large one.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            hops += 1
            current = next
        }
    }

    /// The request a redirect response asks for, or nil when `response` is not a redirect to follow.
    package static func redirect(from request: HTTPRequest, response: HTTPResponse) throws -> HTTPRequest? {
        let code = Int(response.status.code)
        guard let rule = RedirectRule.next(status: code, method: request.method.rawValue),
            let location = response.headers.first(name: "location")
        else {
            return nil
        }
        var next = request
        next.url = try request.url.resolving(location)
        if !rule.keepsBody {
            next.method = HTTPMethod(rawValue: rule.method)
            next.body = nil
            for name in RedirectRule.bodyHeaders { next.headers.remove(name: name) }
        } else if let body = request.body, case .stream = body.storage {
            throw HTTPEngineError(
                .invalidRequest,
                "redirect \(code) to \(next.url) must resend the body, but a streamed body cannot be sent twice"
            )
        }
        if next.url.host != request.url.host || next.url.port != request.url.port
            || next.url.scheme != request.url.scheme
        {
            for name in RedirectRule.crossOriginDroppedHeaders { next.headers.remove(name: name) }
        }
        return next
    }
}

/// An HTTP/2 exchange that failed before the server processed it (RFC 9113 §6.8: a stream above the
/// last one its GOAWAY accepted, or one never written): `execute` sends it again on a new connection.
struct StreamNotProcessed: Error {
    var error: HTTPEngineError
}
