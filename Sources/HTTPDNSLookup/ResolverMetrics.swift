// What the resolver reports through swift-metrics. The app or server picks the backend with
// `MetricsSystem.bootstrap` before it makes its first resolver (`httpdns serve --metrics` bootstraps
// Prometheus); without one every metric here is a no-op. Names follow Prometheus' conventions, and
// every label has a bounded set of values (the configured providers' names, never a hostname).
//
//   httpdns_lookups_total                       resolve() calls
//   httpdns_cache_hits_total                    families answered from the cache while fresh
//   httpdns_cache_misses_total                  families that had to wait for an upstream answer
//   httpdns_cache_stale_served_total            families answered stale (serve-stale) while refreshed
//   httpdns_upstream_queries_total{provider}    queries sent to each HTTPDNS provider
//   httpdns_upstream_failures_total{provider}   of those, the ones that failed
//   httpdns_fallbacks_total                     lookups that fell back to LocalDNS
//   httpdns_hijacks_detected_total{verdict}     comparisons whose verdict was `hijacked` or `blocked`

import CoreMetrics
import HTTPDNSCore

struct ResolverMetrics: Sendable {
    let lookups = Counter(label: "httpdns_lookups_total")
    let cacheHits = Counter(label: "httpdns_cache_hits_total")
    let cacheMisses = Counter(label: "httpdns_cache_misses_total")
    let staleServed = Counter(label: "httpdns_cache_stale_served_total")
    let fallbacks = Counter(label: "httpdns_fallbacks_total")
    /// By verdict: `hijacked` and `blocked` (`HijackVerdict.isHijack`).
    let hijacks: [HijackVerdict: Counter] = Dictionary(
        uniqueKeysWithValues: [HijackVerdict.hijacked, .blocked].map {
            ($0, Counter(label: "httpdns_hijacks_detected_total", dimensions: [("verdict", $0.rawValue)]))
        }
    )
    /// Per provider, in the resolver's `providers` order.
    let upstreamQueries: [Counter]
    let upstreamFailures: [Counter]

    init(providers: [String]) {
        upstreamQueries = providers.map {
            Counter(label: "httpdns_upstream_queries_total", dimensions: [("provider", $0)])
        }
        upstreamFailures = providers.map {
            Counter(label: "httpdns_upstream_failures_total", dimensions: [("provider", $0)])
        }
    }
}
