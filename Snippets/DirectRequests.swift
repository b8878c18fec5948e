// Requests through the engine, the proxy for other clients, SwiftNIO's resolver, and shutting down.
// Needs the internet (AliDNS's public DoH); example.com stands for your own names.
import HTTPDNSKit
import HTTPDNSLoopbackProxy  // the proxy: a product of its own, opted into
import NIOCore
import NIOPosix

let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
// The URL keeps its hostname; the engine connects to what the resolver says.
var request = try HTTPEngineRequest(
    method: .POST,
    url: "https://api.example.com/upload",
    body: .bytes(Array("hello".utf8))
)
request.timeout = .seconds(60)
let response = try await httpdns.engine.send(request, followRedirects: 5)
for try await chunk in response.body { print(chunk.readableBytes) }  // streamed, back-pressured
print(response.metrics)  // dns/connect/tls/ttfb/total, address, protocol

let proxy = try await httpdns.startProxy()  // web views, players: proxy.pacURL
let loop = MultiThreadedEventLoopGroup.singleton.next()
let channel = try await ClientBootstrap(group: loop).resolver(httpdns.nioResolver(on: loop))
    .connect(host: "api.example.com", port: 443).get()
// snippet.hide
try await channel.close().get()
await proxy.stop()
// snippet.show
await httpdns.shutdown()  // saves the cache, closes connections
