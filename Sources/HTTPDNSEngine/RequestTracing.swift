// Spans of the engine's requests, through swift-distributed-tracing: one CLIENT span per
// attempt (a retry on a new connection and each redirect hop get their own), named and attributed as
// OpenTelemetry's HTTP client conventions say. A new connection adds the lookup it made as a child span
// ("resolve": who answered, whether the cache did) and its connect and TLS handshake as events; the
// response head adds "first byte". The span ends when the body has been read to the end (or fails).
//
// Off unless the engine has a tracer: with none, a request pays one nil check. The times come from
// what the engine measures anyway (`AddressLookup`, the connection's connect and TLS durations), so a
// span says the same as `RequestMetrics`.

import HTTPDNSCore
import NIOHTTP1
import Tracing

/// How an engine traces: where spans go, and whether requests carry the trace context.
package struct EngineTracing: Sendable {
    package var tracer: any Tracer
    /// Inject the attempt span's context into the request headers (W3C `traceparent` with an
    /// OpenTelemetry tracer), so the server's spans join the app's trace.
    var propagatesContext: Bool

    init(tracer: any Tracer, propagatesContext: Bool = false) {
        self.tracer = tracer
        self.propagatesContext = propagatesContext
    }

    /// `tracer`, unless it is the no-op one (nothing bootstrapped): then no tracing at all.
    package init?(_ tracer: (any Tracer)?, propagatesContext: Bool) {
        guard let tracer, !(tracer is NoOpTracer) else { return nil }
        self.init(tracer: tracer, propagatesContext: propagatesContext)
    }
}

extension EngineTracing {
    /// What `settings` ask for, the tracer bootstrapped in `InstrumentationSystem` when they name none;
    /// nil when that is the no-op tracer.
    package init?(_ settings: TracingSettings) {
        self.init(settings.tracer ?? InstrumentationSystem.tracer, propagatesContext: settings.propagatesContext)
    }
}

/// The CLIENT span of one attempt, and the rules that fill it in.
struct AttemptSpan: Sendable {
    let span: any Span

    /// Starts the span of an attempt at `request`, a child of the caller's context; when asked, the
    /// request's headers carry that span's context.
    init(_ tracing: EngineTracing, _ request: inout HTTPEngineRequest) {
        let url = request.url
        span = tracing.tracer.startSpan(request.method.rawValue, ofKind: .client)
        span.updateAttributes { a in
            a["http.request.method"] = request.method.rawValue
            a["server.address"] = url.host
            a["server.port"] = url.port
            // The query is left out: apps put tokens and signatures there.
            a["url.full"] = "\(url.scheme)://\(url.authority)\(url.target.prefix { $0 != "?" })"
        }
        if tracing.propagatesContext {
            tracing.tracer.inject(span.context, into: &request.headers, using: HTTPHeadersInjector())
        }
    }

    /// The connection is leased: where it goes, and, for a new one, the lookup (a child span) and the
    /// connect and TLS handshake (events, at the times they ended).
    func connected(_ connection: Connection, reused: Bool, host: String, tracer: any Tracer) {
        let remote = connection.remote
        span.updateAttributes { a in
            a["network.peer.address"] = remote.ipAddress
            a["network.peer.port"] = remote.port
            a["network.protocol.name"] = "http"
            a["network.protocol.version"] = connection.version == .http2 ? "2" : "1.1"
            a["httpdns.connection.reused"] = reused
            if !reused { a["httpdns.dns.source"] = connection.lookup.source.description }
        }
        guard !reused else { return }
        let lookup = connection.lookup
        var at = lookup.startedAt.nanosecondsSinceEpoch
        if let took = lookup.duration {
            at += UInt64(clamping: took.nanoseconds)
            Self.resolveSpan(lookup, host: host, parent: span.context, ends: at, tracer: tracer)
        }
        if let wait = lookup.recordsWait {
            // The wait for the origin's HTTPS records, which ends where the connect begins.
            at += UInt64(clamping: wait.nanoseconds)
            span.addEvent(SpanEvent(name: "https-records", at: DefaultTracerClock.Instant(nanosecondsSinceEpoch: at)))
            span.updateAttributes { $0["httpdns.https_records.wait_ms"] = wait.milliseconds }
        }
        for reask in lookup.reasks {
            // When each answered is not kept: the events say what was asked, in order.
            var attributes = SpanAttributes()
            attributes["httpdns.reask.kind"] = reask.kind.rawValue
            attributes["httpdns.reask.failed"] = reask.failed.joined(separator: " ")
            attributes["httpdns.reask.ms"] = reask.duration.milliseconds
            if let source = reask.source { attributes["httpdns.reask.source"] = source.description }
            span.addEvent(SpanEvent(name: "address-reask", attributes: attributes))
        }
        if !lookup.reasks.isEmpty {
            // The failed attempts and re-asks came between the lookup and this connection's connect.
            at = max(
                at,
                UInt64(clamping: DefaultTracerClock.now.nanosecondsSinceEpoch)
                    - UInt64(clamping: (connection.connectDuration + (connection.tlsDuration ?? .zero)).nanoseconds)
            )
        }
        at += UInt64(clamping: connection.connectDuration.nanoseconds)
        span.addEvent(SpanEvent(name: "connect", at: DefaultTracerClock.Instant(nanosecondsSinceEpoch: at)))
        if let tls = connection.tlsDuration {
            at += UInt64(clamping: tls.nanoseconds)
            span.addEvent(SpanEvent(name: "tls", at: DefaultTracerClock.Instant(nanosecondsSinceEpoch: at)))
        }
    }

    /// The lookup a new connection made, as a finished child span ("resolve").
    static func resolveSpan(
        _ lookup: AddressLookup,
        host: String,
        parent: ServiceContext,
        ends: UInt64,
        tracer: any Tracer
    ) {
        let child = tracer.startSpan("resolve", context: parent, ofKind: .internal, at: lookup.startedAt)
        child.updateAttributes { a in
            a["dns.question.name"] = host
            a["httpdns.source"] = lookup.source.description
            if let cache = lookup.source.cacheState { a["httpdns.cache"] = cache }
        }
        child.end(at: DefaultTracerClock.Instant(nanosecondsSinceEpoch: ends))
    }

    /// The response head has arrived. A 4xx or 5xx marks the span an error, as the conventions say for
    /// a client.
    func responded(_ status: HTTPResponseStatus) {
        let code = Int(status.code)
        span.addEvent("first byte")
        span.attributes["http.response.status_code"] = code
        if code >= 400 {
            span.attributes["error.type"] = String(code)
            span.setStatus(SpanStatus(code: .error))
        }
    }

    /// The attempt failed before or while its response head arrived (or its body was cut short).
    func failed(_ error: any Error) {
        span.endFailed(error, type: (error as? HTTPEngineError)?.code.description ?? "\(type(of: error))")
    }
}

extension Span {
    /// Ends the span as failed by `error`, with `error.type` set to `type` (OpenTelemetry's conventions:
    /// the error's code, not its text).
    package func endFailed(_ error: any Error, type: String) {
        attributes["error.type"] = type
        recordError(error)
        setStatus(SpanStatus(code: .error))
        end()
    }
}
