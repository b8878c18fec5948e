// The full form. Needs the internet (AliDNS's DoH, DNSPod's public HTTPDNS); example.com stands for your
// own names.
import Foundation
import HTTPDNSKit

let cacheURL = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-cache.json")
var configuration = HTTPDNS.Configuration(
    resolvers: [
        try ResolverSpec(parsing: "doh:https://223.5.5.5/dns-query"),
        try ResolverSpec(parsing: "dnspod:http://119.29.29.98/d"),
    ],
    policy: try HostPolicy(only: ["*.example.com"], strict: ["pay.example.com"])
)
configuration.bootstrap = ["dns.example": [IPAddress("203.0.113.53")!]]  // a DoH server's own address
configuration.persistencePath = cacheURL.path  // the cache survives launches, kept per network
configuration.http.upgradeToHTTPS = ["api.example.com"]  // http:// sent as https (h2 when offered)
configuration.cache.serveExpired = .seconds(86_400)  // cold start: last good answer at once, refreshed behind
configuration.cache.ttlOverrides = ["api.example.com": 600]  // and minTTL / maxTTL
configuration.addressOverrides = ["staging.example.com": [IPAddress("10.0.0.7")!]]  // pinned, nothing asked
configuration.http.versions = .http1Only  // or .http2Only; default: ALPN chooses
configuration.timeouts.request = .seconds(30)
let httpdns = try HTTPDNS(configuration)
// snippet.hide
await httpdns.shutdown()
