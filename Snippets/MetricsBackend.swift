// Metrics go to whatever swift-metrics backend the app bootstraps (StatsD, Prometheus, OpenTelemetry…):
// bootstrap it before making the HTTPDNS. Here the no-op backend stands in for the app's.
import HTTPDNSKit
import Metrics

MetricsSystem.bootstrap(NOOPMetricsHandler.instance)
let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
// snippet.hide
await httpdns.shutdown()
