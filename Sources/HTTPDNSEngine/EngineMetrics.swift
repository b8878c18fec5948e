// What the engine reports through swift-metrics; a no-op until the app or server bootstraps a
// backend (`MetricsSystem.bootstrap`) before it makes its first engine. Timers become histograms in
// Prometheus. Only new connections feed the connect and TLS timers: a reused one did neither.
//
//   httpdns_requests_total{protocol}     requests that got a response head, by "http/1.1" or "h2"
//   httpdns_request_connect_seconds      TCP connect of each new connection (happy eyeballs included)
//   httpdns_request_tls_seconds          TLS handshake of each new connection
//   httpdns_request_ttfb_seconds         from the request's start (lookup included) to its response head

import CoreMetrics
import HTTPDNSCore

struct EngineMetrics: Sendable {
    let http1Requests = Counter(label: "httpdns_requests_total", dimensions: [("protocol", "http/1.1")])
    let http2Requests = Counter(label: "httpdns_requests_total", dimensions: [("protocol", "h2")])
    let connect = Timer(label: "httpdns_request_connect_seconds")
    let tls = Timer(label: "httpdns_request_tls_seconds")
    let ttfb = Timer(label: "httpdns_request_ttfb_seconds")

    func connected(connect: Duration, tls: Duration?) {
        self.connect.recordNanoseconds(connect.nanoseconds)
        if let tls { self.tls.recordNanoseconds(tls.nanoseconds) }
    }

    func responseHead(after ttfb: Duration, version: HTTPVersionUsed) {
        (version == .http2 ? http2Requests : http1Requests).increment()
        self.ttfb.recordNanoseconds(ttfb.nanoseconds)
    }
}
