// Metrics go to whatever swift-metrics backend the app bootstraps (StatsD, Prometheus, OpenTelemetry…):
// bootstrap it before making the HTTPDNS. The app's own target depends on swift-metrics for that:
//
//     import Metrics
//     MetricsSystem.bootstrap(myBackend)
//
// (A snippet builds on this package's products alone, so the call is shown, not compiled, here.)
import HTTPDNSKit

let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
// snippet.hide
await httpdns.shutdown()
