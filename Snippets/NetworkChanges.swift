// The app tells HTTPDNS about network changes from its own monitor instead of HTTPDNS watching.
import HTTPDNSKit

// snippet.hide
let resolvers = [try ResolverSpec(parsing: "doh:https://223.5.5.5/dns-query")]
let policy = try HostPolicy(only: ["*.example.com"])
// snippet.show
var configuration = HTTPDNS.Configuration(resolvers: resolvers, policy: policy)
configuration.network.watchesChanges = false
let httpdns = try HTTPDNS(configuration)
// later, from the app's own monitor:
httpdns.networkChanged(to: "cellular-460-01")
// snippet.hide
await httpdns.shutdown()
