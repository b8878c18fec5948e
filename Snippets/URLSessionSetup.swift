// URLSession with the app's own delegate and per-task metrics. Needs the internet (AliDNS's public
// DoH); example.com stands for your own host.
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HTTPDNSKit

// snippet.hide
final class AppDelegate: NSObject, URLSessionTaskDelegate, Sendable {}
let myDelegate = AppDelegate()
let request = URLRequest(url: URL(string: "https://api.example.com/")!)
// snippet.show
let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
let configuration = httpdns.urlSessionConfiguration()  // or httpdns.enable(on: theirConfiguration)
let session = URLSession(configuration: configuration, delegate: myDelegate, delegateQueue: nil)
httpdns.onURLSessionMetrics { m in print(m.taskIdentifier as Any, m.hops) }  // dns/connect/tls/ttfb/total per hop
let (data, response) = try await session.data(for: request)
// snippet.hide
print(data.count, response)
