// A resolver and an origin whose certificates a private CA signed (a company's own): trust that CA's
// PEM file, on top of the system's roots. It runs against the test peers (kresd's DoH and nginx, signed
// by a throw-away CA): `scripts/peers.sh start /tmp/peers && source /tmp/peers/env`, then run it.
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HTTPDNSKit

let env = ProcessInfo.processInfo.environment
let caFile = env["HTTPDNS_CA"] ?? "/etc/my-company/ca.pem"
let dohPort = env["HTTPDNS_KRESD_DOH2_PORT"] ?? "443"
let webPort = env["HTTPDNS_NGINX_TLS_PORT"] ?? "443"

let httpdns = try HTTPDNS(
    resolvers: ["doh:https://127.0.0.1:\(dohPort)/dns-query"],
    only: ["a.test"],
    trusting: [caFile]  // in the full form: configuration.tls.trustedCertificateFiles = [caFile]
)
let session = URLSession(configuration: httpdns.urlSessionConfiguration())
let (data, _) = try await session.data(from: URL(string: "https://a.test:\(webPort)/whoami")!)
print(String(decoding: data, as: UTF8.self), terminator: "")  // host=a.test sni=a.test proto=HTTP/2.0 ...
await httpdns.shutdown()
