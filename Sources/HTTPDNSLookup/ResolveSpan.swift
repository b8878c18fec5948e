// Spans of the lookups the app asks for itself: `resolve` (what answered, whether the cache
// did, how stale) and `compare` (both answers and the hijack verdict). A lookup the engine makes for a
// request is traced by the engine, inside that request's span, from the same facts.

import HTTPDNSCore
import HTTPDNSEngine
import Tracing

enum ResolveSpan {
    /// Runs `lookup` inside a "resolve" span, a child of the caller's context.
    static func around(
        _ tracer: any Tracer,
        _ host: String,
        _ lookup: () async throws -> Resolution
    ) async throws -> Resolution {
        let span = tracer.startSpan("resolve", ofKind: .internal)
        span.attributes["dns.question.name"] = host
        do {
            let resolution = try await lookup()
            span.updateAttributes { describe(resolution, into: &$0, prefix: "httpdns") }
            span.end()
            return resolution
        } catch {
            span.endFailed(error, type: (error as? ResolverError)?.code.description ?? "\(type(of: error))")
            throw error
        }
    }

    /// A finished "compare" span for `report`: the verdict, and what each side answered.
    static func compared(_ tracer: any Tracer, _ report: HijackReport, started: DefaultTracerClock.Instant) {
        let span = tracer.startSpan("compare", ofKind: .internal, at: started)
        span.updateAttributes { a in
            a["dns.question.name"] = report.name
            a["httpdns.verdict"] = report.verdict.rawValue
            for (side, result) in [("httpdns.trusted", report.httpdns), ("httpdns.localdns", report.localDNS)] {
                switch result {
                case .success(let resolution): describe(resolution, into: &a, prefix: side)
                case .failure(let error): a["\(side).error"] = error.code.description
                }
            }
        }
        span.end()
    }

    /// A resolution's facts as span attributes under `prefix`: `.source`, `.cache` (hit, stale, miss;
    /// absent where no cache is involved), `.expired_for_s` for a stale answer, `.addresses`.
    static func describe(_ resolution: Resolution, into a: inout SpanAttributes, prefix: String) {
        a["\(prefix).source"] = resolution.source.description
        if let cache = resolution.source.cacheState { a["\(prefix).cache"] = cache }
        if let expired = resolution.expiredFor {
            let (seconds, attoseconds) = expired.components
            a["\(prefix).expired_for_s"] = Double(seconds) + Double(attoseconds) / 1e18
        }
        // Set as a string array outright: through `SpanAttributeConvertible` an array is found by
        // dynamic casts, a third of the whole span's cost.
        a.set("\(prefix).addresses", value: .stringArray((resolution.ipv4 + resolution.ipv6).map(\.description)))
    }
}
