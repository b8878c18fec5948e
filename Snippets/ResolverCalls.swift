// The resolver's calls. Needs the internet (AliDNS's public DoH); example.com stands for your own names.
import HTTPDNSKit

let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
let r = try await httpdns.resolver.resolve("api.example.com")  // r.addresses (IPv6 first), r.source, r.ttl
print(r.addresses, r.source, r.ttl ?? 0)
httpdns.networkChanged(to: "wifi-home")  // the app's own network key, when it watches the network itself
httpdns.resolver.clearCache("api.example.com")
// At launch: the first screen's answers cached and its connections open (TLS done), so its first
// request costs one round trip. Returns the origins that could not be reached, with why.
for (origin, error) in await httpdns.preResolve(["api.example.com", "img.example.com"], preconnect: true) {
    print(origin, error)
}

// Not async: a completion handler, a blocking call (on the main thread it never waits: the cached
// answer, or .wouldBlockMainThread with the lookup started; refused on a SwiftNIO event loop), the cached
// answer now or nil while a lookup starts, many names at once.
httpdns.resolver.resolve("api.example.com") { result in print(result) }
let blocking = try httpdns.resolver.resolveBlocking("api.example.com", timeout: .seconds(2))
let now = httpdns.resolver.resolveCachedOrStart("api.example.com")
let all = await httpdns.resolver.resolve(["a.example.com", "b.example.com"])  // [name: Result]
// snippet.hide
print(blocking, now as Any, all.count)
await httpdns.shutdown()
