// The HTTPDNS server: every format, answered to our own resolver (every provider kind), to real DoH
// clients (curl --doh-url, dig +https), forwarding to a real upstream (kresd), and hostile input.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSServer
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

func startService(
    logger: Logger = testLogger,
    _ tweak: (inout HTTPDNSService.Configuration) -> Void = { _ in }
) async throws -> HTTPDNSService {
    var config = HTTPDNSService.Configuration()
    config.staticHosts = [
        "a.example.com": [IPAddress("198.51.0.1")!, IPAddress("2606:4700::1")!],
        "v4.example.com": [IPAddress("198.51.0.2")!],
    ]
    config.ttl = 90
    // A client starved by the whole parallel suite on 2 cores can be slower than the default 10 s head
    // deadline between its requests (the server then closes, and the test sees a reset). Tests of these
    // timeouts set their own in `tweak`.
    config.limits.requestTimeout = .seconds(600)
    config.limits.idleTimeout = .seconds(600)
    tweak(&config)
    return try await HTTPDNSService.start(config, logger: logger)
}

func rawGet(
    _ engine: HTTPEngine,
    _ url: String,
    method: HTTPMethod = .GET,
    headers: HTTPHeaders = [:],
    body: [UInt8]? = nil
) async throws -> (Int, String) {
    let response = try await engine.execute(
        try HTTPEngineRequest(method: method, url: url, headers: headers, body: body.map { .bytes($0) })
    )
    return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 1 << 20)))
}

package func base64url(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// serve's DoH answer (POST, wire format) to the question `name` / `type`: the message, and the
/// response's header fields (cache-control).
func dohPost(_ engine: HTTPEngine, port: Int, _ name: String, _ type: DNSRecordType) async throws
    -> (DNSMessage, HTTPHeaders)
{
    let response = try await engine.execute(
        try HTTPEngineRequest(
            method: .POST,
            url: "http://127.0.0.1:\(port)/dns-query",
            headers: ["content-type": "application/dns-message"],
            body: .bytes(try DNSMessage.query(name: name, type: type, id: 9))
        )
    )
    let body = Array(try await response.body.collect(upTo: 1 << 16).readableBytesView)
    return (try DNSMessage(parsing: body), response.headers)
}
