// Every request's span, with the lookup inside it, in the app's own traces (swift-distributed-tracing).
// The app picks the backend (swift-otel, for one) and bootstraps it at launch, before it makes
// `HTTPDNS`; with nothing bootstrapped there are no spans and nothing is paid for them. Needs the
// internet (AliDNS's public DoH server).
import HTTPDNSKit
import Tracing

var configuration = HTTPDNS.Configuration(
    resolvers: [try ResolverSpec(parsing: "doh:https://223.5.5.5/dns-query")],
    policy: try HostPolicy(only: ["*.example.com"])
)
// `traceparent` on every request, so the API's own spans join the app's trace (off by default).
configuration.tracing.propagatesContext = true
let httpdns = try HTTPDNS(configuration)
try await withSpan("checkout") { _ in
    // A CLIENT span per attempt, a child of "checkout": method, address, status, protocol version;
    // connect, TLS and first byte as events; the lookup a new connection made as a "resolve" span.
    let response = try await httpdns.engine.send(try HTTPEngineRequest(url: "https://api.example.com/cart"))
    _ = try await response.body.collect(upTo: 1 << 20)
}
await httpdns.shutdown()
