// Tencent Cloud DNSPod (AES) and Alibaba Cloud (signed) HTTPDNS with the account's secrets, read from
// files (or the keychain), never from code. Needs the services and an account; `httpdns serve` speaks
// both protocols for a local try (README, "Commercial services").
import Foundation
import HTTPDNSKit

// snippet.hide
let keyPath = "/run/secrets/dnspod-key"
let alibabaSecretPath = "/run/secrets/alibaba-secret"
// snippet.show
let key = ResolverSecret(try String(contentsOfFile: keyPath, encoding: .utf8))  // never printed: <redacted>
let alibabaSecret = ResolverSecret(try String(contentsOfFile: alibabaSecretPath, encoding: .utf8))
var configuration = HTTPDNS.Configuration(resolvers: [
    .dnspod(try ResolverEndpoint(url: "http://119.29.29.98/d"), auth: .aes(id: "12345", key: key)),
    .json(try ResolverEndpoint(url: "http://203.107.1.1/139450/d"), secret: alibabaSecret),
])
configuration.policy = try HostPolicy(only: ["*.example.com"])
let httpdns = try HTTPDNS(configuration)
let resolution = try await httpdns.resolver.resolve("api.example.com")
print(resolution.clientAddress as Any)  // the address the service saw, when it says
