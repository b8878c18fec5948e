// `httpdns fetch` as a user runs it, including the seeds' story in a network namespace whose system
// resolver is hijacked, and a blackholed first address.

import Crypto
import Foundation
import NIOPosix
import Testing

struct Trace: Decodable {
    var url: String
    var ip: String?
    var port: Int?
    var `protocol`: String?
    var dnsSource: String?
    var dnsMs: Double?
    var connectMs: Double?
    var tlsMs: Double?
    var ttfbMs: Double?
    var totalMs: Double?
    var reused: Bool
    var status: Int?
    var bytesSent: Int
    var bytesReceived: Int
    var redirects: Int
}

func lastJSONLine<T: Decodable>(_ text: String, as type: T.Type) throws -> T {
    let line = try #require(text.split(separator: "\n").last(where: { $0.hasPrefix("{") }), "no JSON line in: \(text)")
    return try JSONDecoder().decode(T.self, from: Data(line.utf8))
}

/// Runs any program with the blocking wait on NIO's thread pool.
func runProcess(_ path: String, _ arguments: [String]) async throws -> CLIResult {
    try await processThreads.runIfActive { try runProcessBlocking(path, arguments) }
}
