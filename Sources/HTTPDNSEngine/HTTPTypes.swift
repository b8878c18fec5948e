import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// An absolute http(s) URL split the way the engine needs it: who we talk to (scheme, host, port) and
/// what we ask for (target = path and query). The host keeps its name; it is never replaced by an IP.
package struct HTTPURL: Hashable, Sendable, CustomStringConvertible {
    package var scheme: String
    package var host: String
    package var port: Int
    /// Path and query, percent-encoded, starting with `/`.
    package var target: String

    package init(scheme: String, host: String, port: Int? = nil, target: String = "/") {
        self.scheme = scheme
        self.host = host
        self.port = port ?? (scheme == "https" ? 443 : 80)
        self.target = target.isEmpty ? "/" : target
    }

    /// Parses `http://` and `https://` URLs (`HTTPURLParts.parse`); throws `.invalidRequest` saying what is
    /// wrong.
    package init(_ text: String) throws {
        do {
            self.init(try HTTPURLParts.parse(text))
        } catch {
            throw HTTPEngineError(.invalidRequest, error.reason)
        }
    }

    /// An origin as an app names it for a pre-connect: a host name (`api.example.com`, meaning https on
    /// 443) or a URL (`https://api.example.com:8443/`, whose path is ignored). Throws `.invalidRequest`.
    package init(origin text: String) throws {
        try self.init(text.contains("://") ? text : "https://\(text)/")
        target = "/"
    }

    /// The URL the parser split, its port filled in when it had none.
    package init(_ parts: HTTPURLParts) {
        self.init(scheme: parts.scheme, host: parts.host, port: parts.port, target: parts.target)
    }

    package var isTLS: Bool { scheme == "https" }
    package var hostIsIP: Bool { IPAddress(host) != nil }

    /// `host[:port]` for Host / :authority; the port is left out when it is the scheme's default.
    package var authority: String { formatAuthority(host: host, port: port == (isTLS ? 443 : 80) ? nil : port) }

    package var description: String { "\(scheme)://\(authority)\(target)" }

    /// The URL a `Location` header points to, resolved against this one (RFC 3986 §5).
    package func resolving(_ location: String) throws -> HTTPURL {
        guard let base = URL(string: description), let next = URL(string: location, relativeTo: base)?.absoluteURL
        else {
            throw HTTPEngineError(.protocolError, "redirect to \"\(location)\", which is not a URL")
        }
        return try HTTPURL(next.absoluteString)
    }
}

/// A request body: bytes in memory, a file streamed from disk, or any async sequence of buffers.
/// Bytes and files can be sent again (redirects that keep the body, retries); a stream only if its
/// factory can make it again.
public struct HTTPRequestBody: Sendable {
    enum Storage: Sendable {
        case bytes(ByteBuffer)
        case file(String)
        case stream(@Sendable () -> AsyncThrowingStream<ByteBuffer, any Error>)
    }

    let storage: Storage
    /// Bytes in the body when known (sent as content-length; otherwise chunked / h2 DATA until END_STREAM).
    package let length: Int?

    /// A body held in memory (sent with its length; can be sent again on a redirect).
    ///
    /// - Parameter bytes: The body's bytes, copied.
    /// - Returns: The body.
    public static func bytes(_ bytes: some Collection<UInt8>) -> HTTPRequestBody {
        HTTPRequestBody(storage: .bytes(ByteBuffer(bytes: bytes)), length: bytes.count)
    }

    package static func bytes(_ buffer: ByteBuffer) -> HTTPRequestBody {
        HTTPRequestBody(storage: .bytes(buffer), length: buffer.readableBytes)
    }

    /// Streams the file at `path`, read in 64 KiB chunks as the connection can take them.
    package static func file(_ path: String) throws -> HTTPRequestBody {
        // The size from the end's offset, not the file's attributes: no file timestamp is ever read
        // (Sources/HTTPDNSPrivacy/PrivacyInfo.xcprivacy).
        guard let handle = FileHandle(forReadingAtPath: path), let end = try? handle.seekToEnd() else {
            throw HTTPEngineError(.invalidRequest, "cannot read \(path): no such file or not readable")
        }
        try? handle.close()
        return HTTPRequestBody(storage: .file(path), length: Int(end))
    }

    /// A body produced by `make`, which is called once per send. Use `AsyncThrowingStream(unfolding:)`
    /// for a producer that is only asked for the next chunk when the connection can take it.
    ///
    /// - Parameters:
    ///   - length: The body's length in bytes when known (sent as content-length); nil sends it chunked
    ///     (HTTP/1.1) or as DATA frames until END_STREAM (HTTP/2).
    ///   - make: Makes the body's chunks; called once per send.
    /// - Returns: The body; it can be sent again only because `make` can make it again.
    public static func stream(
        length: Int?,
        _ make: @escaping @Sendable () -> AsyncThrowingStream<ByteBuffer, any Error>
    ) -> HTTPRequestBody {
        HTTPRequestBody(storage: .stream(make), length: length)
    }

    /// The body's chunks, in order, as an async sequence.
    func chunks() -> AsyncThrowingStream<ByteBuffer, any Error> {
        switch storage {
        case .bytes(let buffer):
            let remaining = NIOLockedValueBox(buffer)
            return AsyncThrowingStream(unfolding: {
                remaining.withLockedValue { rest in
                    guard rest.readableBytes > 0 else { return nil }
                    return rest.readSlice(length: min(rest.readableBytes, 1 << 16))
                }
            })
        case .file(let path):
            let reader = FileChunkReader(path: path)
            return AsyncThrowingStream(unfolding: { try await reader.next() })
        case .stream(let make):
            return make()
        }
    }
}

/// Reads a file in 64 KiB chunks on NIO's blocking-I/O pool, so no concurrency thread blocks on disk.
final class FileChunkReader: Sendable {
    let path: String
    let handle = NIOLockedValueBox<FileHandle?>(nil)

    init(path: String) { self.path = path }

    func next() async throws -> ByteBuffer? {
        let path = self.path
        let handle = self.handle
        return try await NIOThreadPool.singleton.runIfActive {
            try handle.withLockedValue { h -> ByteBuffer? in
                if h == nil {
                    guard let opened = FileHandle(forReadingAtPath: path) else {
                        throw HTTPEngineError(.invalidRequest, "cannot open \(path) for reading")
                    }
                    h = opened
                }
                guard let data = try h!.read(upToCount: 1 << 16), !data.isEmpty else {
                    try? h?.close()
                    return nil
                }
                return ByteBuffer(bytes: data)
            }
        }
    }
}

/// A request: method, URL, headers, optional body.
public struct HTTPEngineRequest: Sendable {
    /// The request method.
    public var method: HTTPMethod
    package var url: HTTPURL
    /// Headers to send; `Host` is set from the URL when absent.
    public var headers: HTTPHeaders
    /// The body, or nil for none.
    public var body: HTTPRequestBody?
    /// Ask for gzip/deflate and decompress the response body; an Accept-Encoding of the request's own is
    /// narrowed to the codings decoded (`ContentCodings`).
    package var decompress = false
    /// Bound on the whole request, body included (overrides `Configuration.timeouts.request`).
    public var timeout: Duration?
    /// Longest wait for the connection and then between two received bytes (overrides
    /// `Configuration.timeouts.connect` and `.read`; URLRequest's `timeoutInterval` means this).
    package var idleTimeout: Duration?
    /// HTTP versions for this request (overrides `Configuration.http.versions`).
    package var versions: HTTPVersionPolicy?
    /// What the request's session narrows for its connections (a URLSession's, made by its one
    /// factory); empty for the engine's defaults.
    package var terms = ConnectionProfile.Terms()
    /// Told the body bytes handed to the connection so far, each time a chunk goes (an inline body:
    /// once, with the head); the URLSession integration turns it into upload progress. On the
    /// connection's event loop or the sending task: keep it short.
    package var onBodySent: (@Sendable (Int) -> Void)?
    /// An http:// URL to a known https origin goes to https (`HTTPSettings.keepHTTP` says where not);
    /// false where the caller decides itself (the URLSession route, as the system it stands in for).
    package var upgradesKnownHTTPSOrigins = true

    package init(method: HTTPMethod = .GET, url: HTTPURL, headers: HTTPHeaders = [:], body: HTTPRequestBody? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A request for `url` (an http or https URL with a hostname or an IP).
    ///
    /// - Parameters:
    ///   - method: The request method; GET by default.
    ///   - url: The URL to request.
    ///   - headers: Headers to send; `Host` is set from the URL when absent.
    ///   - body: The body, or nil for none.
    /// - Throws: `HTTPEngineError` with code `.invalidRequest` for a URL it cannot use.
    public init(method: HTTPMethod = .GET, url: String, headers: HTTPHeaders = [:], body: HTTPRequestBody? = nil) throws
    {
        self.init(method: method, url: try HTTPURL(url), headers: headers, body: body)
    }
}

/// Where the time of one request went, and what it used. A phase that did not happen (a reused
/// connection has no lookup, connect or TLS) is nil.
///
/// As JSON (`Encodable`) it is the object `httpdns fetch --metrics` prints: durations as milliseconds
/// (`dnsMs`, `recordsWaitMs`, `stalledMs`, `connectMs`, `tlsMs`, `ttfbMs`, `totalMs`), the protocol and
/// the DNS source as text, and, only when there were any, `reasks` and the earlier redirect `hops`
/// (objects of the same keys). Everything before the response head is accounted for: `ttfbMs` is `stalledMs`,
/// `dnsMs`, `recordsWaitMs`, `connectMs` and `tlsMs`, then the server's time and the request's round trip.
public struct RequestMetrics: Sendable, Hashable {
    /// The URL requested (after redirects, the last one).
    public var url: String
    /// The address the connection went to.
    public var ip: String?
    /// The IPv4 address the answer gave, when `ip` is its NAT64-synthesized IPv6 form (an IPv6-only
    /// network); nil otherwise.
    package var synthesizedFrom: String?
    /// The port connected to (the URL's).
    public var port: Int?
    /// The HTTP version the connection speaks.
    public var httpVersion: HTTPVersionUsed?
    /// Who gave the address: an HTTPDNS provider, the cache, LocalDNS, a literal. Nil on a reused
    /// connection (no lookup ran) or when the request failed before one.
    public var dnsSource: ResolutionSource?
    /// Time spent resolving the name.
    public var dns: Duration?
    /// How long the connect waited for the origin's HTTPS records (RFC 9460) after its addresses were
    /// in: only an https URL on port 443 asks for them, and the wait is bounded (nil: no wait).
    public var recordsWait: Duration?
    /// Time before the connection was ready that no phase here accounts for: waiting for a connection
    /// from the pool (its limit reached, or another request's connect to join), an alias target's
    /// lookup, an address tried before the one that answered. Nil when the request failed before it
    /// had a connection.
    public var stalled: Duration?
    /// Time to establish TCP (nil on a reused connection).
    public var connect: Duration?
    /// Time of the TLS handshake (nil on a reused connection or plain http).
    public var tls: Duration?
    /// From the start of the request to the response head.
    public var timeToFirstByte: Duration?
    /// From the start of the request to the last body byte (or the failure).
    public var total: Duration?
    /// True when the request went on a pooled connection: one an earlier request used, or one opened
    /// ahead of it by a pre-connect.
    public var reused: Bool = false
    /// The response's status code (nil when none came).
    public var status: Int?
    /// Body bytes sent.
    public var bytesSent: Int = 0
    /// Body bytes received (after decompression).
    public var bytesReceived: Int = 0
    /// Redirects followed before this response.
    public var redirects: Int = 0
    /// The times the connect asked for other addresses because the ones it had failed or stayed silent
    /// (a remembered address of an origin that moved), in order. Their time, and the failed attempts',
    /// is part of `stalled`. Empty when the first addresses served.
    public var reasks: [AddressReask] = []
    /// The redirect hops before this response, first first, each as it was measured (its own URL,
    /// status, lookup, connect, TLS and time to its head): with this response they make up the whole
    /// request. Empty without redirects.
    public var hops: [RequestMetrics] = []

    package init(url: String) { self.url = url }
}

/// One time a connect asked for other addresses of its host: past the cache (the origin may have moved
/// since the cached answer), or the fallback the policy allows (LocalDNS).
public struct AddressReask: Sendable, Hashable, Encodable {
    /// What was asked.
    public enum Kind: String, Sendable, Hashable, Encodable {
        /// HTTPDNS again, past the cache (joining a refresh already on its way).
        case pastCache = "past-cache"
        /// The fallback the policy allows (LocalDNS), after HTTPDNS's addresses failed.
        case fallback
    }

    /// What was asked.
    public var kind: Kind
    /// The addresses that had failed to connect when it was asked; empty when the attempt delay started
    /// it (the addresses tried had not answered yet).
    public var failed: [String]
    /// Who answered; nil when nothing did (or it failed).
    public var source: ResolutionSource?
    /// How long it took to answer.
    public var duration: Duration

    package init(kind: Kind, failed: [String], source: ResolutionSource?, duration: Duration) {
        self.kind = kind
        self.failed = failed
        self.source = source
        self.duration = duration
    }

    private enum Keys: String, CodingKey {
        case kind, failed, source, ms
    }

    /// `{"kind": "past-cache", "failed": ["192.0.2.1"], "source": "doh", "ms": 12.5}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(kind, forKey: .kind)
        try c.encode(failed, forKey: .failed)
        try c.encodeIfPresent(source?.description, forKey: .source)
        try c.encode(duration.milliseconds, forKey: .ms)
    }
}

extension RequestMetrics: Encodable {
    private enum Keys: String, CodingKey {
        case url, ip, synthesizedFrom, port, `protocol`, dnsSource, dnsMs, recordsWaitMs, stalledMs, connectMs, tlsMs
        case ttfbMs, totalMs
        case reused, status, bytesSent, bytesReceived, redirects, reasks, hops
    }

    /// The object `httpdns fetch --metrics` prints (milliseconds; a reused connection's DNS source is
    /// "reused connection").
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(url, forKey: .url)
        try c.encodeIfPresent(ip, forKey: .ip)
        try c.encodeIfPresent(synthesizedFrom, forKey: .synthesizedFrom)
        try c.encodeIfPresent(port, forKey: .port)
        try c.encodeIfPresent(httpVersion?.rawValue, forKey: .protocol)
        try c.encodeIfPresent(dnsSource?.description ?? (reused ? "reused connection" : nil), forKey: .dnsSource)
        try c.encodeIfPresent(dns?.milliseconds, forKey: .dnsMs)
        try c.encodeIfPresent(recordsWait?.milliseconds, forKey: .recordsWaitMs)
        try c.encodeIfPresent(stalled?.milliseconds, forKey: .stalledMs)
        try c.encodeIfPresent(connect?.milliseconds, forKey: .connectMs)
        try c.encodeIfPresent(tls?.milliseconds, forKey: .tlsMs)
        try c.encodeIfPresent(timeToFirstByte?.milliseconds, forKey: .ttfbMs)
        try c.encodeIfPresent(total?.milliseconds, forKey: .totalMs)
        try c.encode(reused, forKey: .reused)
        try c.encodeIfPresent(status, forKey: .status)
        try c.encode(bytesSent, forKey: .bytesSent)
        try c.encode(bytesReceived, forKey: .bytesReceived)
        try c.encode(redirects, forKey: .redirects)
        // Only when there were any: the object scripts read stays as it was.
        if !reasks.isEmpty { try c.encode(reasks, forKey: .reasks) }
        if !hops.isEmpty { try c.encode(hops, forKey: .hops) }
    }
}

/// Collects metrics as a request goes; shared by the engine, the handler and the response body.
final class MetricsRecorder: Sendable {
    let started = ContinuousClock.now
    private let box: NIOLockedValueBox<RequestMetrics>
    /// The span of the attempt that got the response, ended with its body; nil when the engine does
    /// not trace (an untraced request touches nothing of tracing).
    private let span: NIOLockedValueBox<AttemptSpan?>?

    init(url: HTTPURL, traced: Bool = false) {
        box = NIOLockedValueBox(RequestMetrics(url: url.description))
        span = traced ? NIOLockedValueBox(nil) : nil
    }

    func update(_ body: (inout RequestMetrics) -> Void) { box.withLockedValue(body) }
    var snapshot: RequestMetrics { box.withLockedValue { $0 } }
    func sinceStart() -> Duration { ContinuousClock.now - started }

    /// Ends `attempt`'s span with the body (`finish`), or at once when the body has already ended.
    func endSpanWithBody(_ attempt: AttemptSpan) {
        span?.withLockedValue { $0 = attempt }
        // The body may have ended already: whoever takes the span out of its box ends it, once.
        if box.withLockedValue({ $0.total != nil }) { takeSpan()?.span.end() }
    }

    /// The body has ended (`error` when it was cut short): total time, and the span ends.
    func finish(error: (any Error)? = nil) {
        update { if $0.total == nil { $0.total = ContinuousClock.now - self.started } }
        guard let taken = takeSpan() else { return }
        if let error { taken.failed(error) } else { taken.span.end() }
    }

    /// The body was dropped before its end: the span ends as cancelled (the metrics stay as they are,
    /// with no total time).
    func abandoned() {
        takeSpan()?.failed(HTTPEngineError(.cancelled, "the response body was dropped before its end"))
    }

    /// The response, its body and the exchange are all gone: a span still held was never read to its
    /// end (the exchange may have finished first, so the body's producer did not report the drop).
    deinit { abandoned() }

    private func takeSpan() -> AttemptSpan? {
        span?.withLockedValue { held in
            defer { held = nil }
            return held
        }
    }
}

/// A response: status and headers as soon as they arrive, the body as it arrives.
public struct HTTPEngineResponse: Sendable {
    /// The response status.
    public var status: HTTPResponseStatus
    /// The response headers.
    public var headers: HTTPHeaders
    package var version: HTTPVersionUsed
    /// The URL this response answers (after redirects, the last one).
    package var url: HTTPURL
    /// The body, delivered as the server sends it; reading it slowly slows the server down (TCP or h2
    /// flow control). Iterate it once. Dropping it unread cancels the rest of the transfer.
    public var body: HTTPResponseBody
    let recorder: MetricsRecorder
    /// Metrics so far; complete (total time, bytes) once the body has been read to the end.
    public var metrics: RequestMetrics { recorder.snapshot }
}

/// The response body as an async sequence of buffers, with back-pressure.
public struct HTTPResponseBody: AsyncSequence, Sendable {
    /// Each chunk of the body as it arrives.
    public typealias Element = ByteBuffer
    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, BodyDelegate
    >
    let producer: Producer?
    let recorder: MetricsRecorder?

    static let empty = HTTPResponseBody(producer: nil, recorder: nil)

    /// Reads the body chunk by chunk; reading drives back-pressure.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var inner: Producer.AsyncIterator?
        let recorder: MetricsRecorder?

        /// The next chunk of the body.
        ///
        /// - Returns: The next chunk, or nil at the end of the body.
        /// - Throws: `HTTPEngineError` when the body is cut short.
        public mutating func next() async throws -> ByteBuffer? {
            guard let it = inner else { return nil }
            do {
                let chunk = try await it.next()
                inner = it
                if let chunk {
                    recorder?.update { $0.bytesReceived += chunk.readableBytes }
                } else {
                    recorder?.finish()
                    inner = nil
                }
                return chunk
            } catch {
                recorder?.finish(error: error)
                inner = nil
                throw error
            }
        }
    }

    /// The body can be read once.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(inner: producer?.makeAsyncIterator(), recorder: recorder)
    }

    /// Reads the whole body.
    ///
    /// - Parameter maxBytes: The most bytes the body may have.
    /// - Returns: The body's bytes.
    /// - Throws: `HTTPEngineError` with code `.responseTooLarge` past `maxBytes`, or as ``AsyncIterator/next()``
    ///   when the body is cut short.
    public func collect(upTo maxBytes: Int) async throws -> ByteBuffer {
        var out = ByteBuffer()
        for try await var chunk in self {
            guard out.readableBytes + chunk.readableBytes <= maxBytes else {
                throw HTTPEngineError(.responseTooLarge, "response body larger than \(maxBytes) bytes")
            }
            out.writeBuffer(&chunk)
        }
        return out
    }
}
