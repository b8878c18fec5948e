// The short form: DoH through AliDNS's public resolver for the app's own names, used by URLSession.
// Needs the internet (223.5.5.5 answers DoH; api.example.com stands for your own host).
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking  // URLSession on Linux
#endif
import HTTPDNSKit

let url = URL(string: "https://api.example.com/")!
let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
let (data, _) = try await URLSession(configuration: httpdns.urlSessionConfiguration()).data(from: url)
// snippet.hide
print(data.count)
