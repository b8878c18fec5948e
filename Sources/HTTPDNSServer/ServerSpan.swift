// The SERVER span of each request `httpdns serve` answers, named and attributed as
// OpenTelemetry's HTTP server conventions say, a child of the client's span when the request carries
// its context (`traceparent`). Recorded once the answer is ready, from the time the request was whole.

import HTTPDNSEngine
import NIOHTTP1
import Tracing

enum ServerSpan {
    static func record(
        _ tracer: any Tracer,
        _ request: ListenerRequest,
        _ response: ListenerResponse,
        started: DefaultTracerClock.Instant
    ) {
        var context = ServiceContext.topLevel
        tracer.extract(request.headers, into: &context, using: HTTPHeadersExtractor())
        let path = request.path
        // The route from a fixed set (RequestObserver's), so span names stay few whatever clients send.
        let route = RequestObserver.endpoint(path)
        let method = request.method.rawValue
        let span = tracer.startSpan(
            route == "other" ? method : "\(method) \(route)",
            context: context,
            ofKind: .server,
            at: started
        )
        let status = Int(response.status.code)
        span.updateAttributes { a in
            a["http.request.method"] = method
            a["url.path"] = String(path.prefix(256))
            a["url.scheme"] = request.isTLS ? "https" : "http"
            if route != "other" { a["http.route"] = route }
            a["http.response.status_code"] = status
            a["network.protocol.name"] = "http"
            a["network.protocol.version"] = request.version == "h2" ? "2" : "1.1"
            a["client.address"] = request.remoteIP?.description ?? request.remote
            if status >= 500 { a["error.type"] = String(status) }
        }
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
        span.end()
    }
}
