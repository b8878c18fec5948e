// What one request cost, phase by phase, and the recorder that fills it in as the request runs.

import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

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
    var synthesizedFrom: String?
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

    init(url: String) { self.url = url }
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

    init(kind: Kind, failed: [String], source: ResolutionSource?, duration: Duration) {
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
