// W3C trace context in HTTP/1 header fields, for swift-distributed-tracing: the engine injects it into
// the requests it sends, the server extracts it from the requests it answers.

import NIOHTTP1
import Tracing

/// Writes trace context fields (`traceparent`, `tracestate`) into request headers.
struct HTTPHeadersInjector: Injector {
    init() {}
    func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: key, value: value)
    }
}

/// Reads trace context fields from request headers (the server side).
package struct HTTPHeadersExtractor: Extractor {
    package init() {}
    package func extract(key: String, from headers: HTTPHeaders) -> String? {
        headers.first(name: key)
    }
}
