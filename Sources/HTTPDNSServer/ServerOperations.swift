// Running the server in production: readiness apart from liveness, request metrics, the JSON
// access log. The graceful drain is `HTTPDNSService.drain(within:)` with `HTTPListener.drain(within:)`.
//
// Readiness (`/readyz`): not ready until the upstream has answered once (any DNS answer, NXDOMAIN or an
// error code such as REFUSED included: it proves the upstream is reachable), ready after that, and not
// ready again from the moment a graceful shutdown starts, so a load balancer stops sending new
// connections while the ones in flight finish. A server without an upstream (hosts only) is ready at
// once. Liveness (`/healthz`) is "the process answers", always 200 while it runs.
//
// The access log writes one JSON object per answered request, in the order answered, from a queue of
// its own (the event loops never wait for the disk). The query string is never logged: it can carry
// account tokens and signatures (Tencent Cloud, Alibaba Cloud forms), and the names a client asked for.
// Lines beyond `maxPending` waiting for the disk are dropped and counted, so a stalled disk cannot grow
// memory without bound.

import CoreMetrics
import Dispatch
import Foundation
import HTTPDNSCore
import HTTPDNSLookup
import NIOConcurrencyHelpers
import NIOCore

/// Whether the server should be sent traffic.
final class ServiceReadiness: Sendable {
    enum State: Sendable, Equatable {
        case waitingForUpstream
        case ready
        case draining
    }

    private let state: NIOLockedValueBox<State>

    init(hasUpstream: Bool) { state = NIOLockedValueBox(hasUpstream ? .waitingForUpstream : .ready) }

    var current: State { state.withLockedValue { $0 } }

    /// The upstream answered (a lookup or the start-up probe): ready, unless draining.
    func upstreamAnswered() {
        state.withLockedValue { if $0 == .waitingForUpstream { $0 = .ready } }
    }

    func draining() { state.withLockedValue { $0 = .draining } }

    /// The `/readyz` answer.
    var response: ListenerResponse {
        switch current {
        case .ready: ListenerResponse(status: .ok, text: "ready")
        case .waitingForUpstream:
            ListenerResponse(status: .serviceUnavailable, text: "not ready: the upstream has not answered yet")
        case .draining: ListenerResponse(status: .serviceUnavailable, text: "not ready: shutting down")
        }
    }
}

/// One line of the access log.
struct AccessLogEntry: Encodable, Sendable, Equatable {
    /// When the answer was ready, ISO 8601 UTC with milliseconds.
    var time: String
    var client: String
    var method: String
    /// The path only: never the query string.
    var path: String
    /// "http/1.1" or "h2".
    package var `protocol`: String
    var status: Int
    var bytes: Int
    var ms: Double
}

/// Appends access-log lines to a file (or standard output) without blocking the caller.
package final class AccessLog: Sendable {
    static let maxPending = 10_000
    private let queue = DispatchQueue(label: "httpdns.access-log")
    private let handle: FileHandle
    private let pending = NIOLockedValueBox(0)
    private let dropped = Counter(label: "httpdns_server_access_log_dropped_total")
    /// Used on `queue` only.
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `-` is standard output; otherwise the file is created if missing and appended to.
    package init(path: String) throws {
        if path == "-" {
            handle = FileHandle.standardOutput
            return
        }
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw AccessLogError(path: path, reason: "cannot create it")
            }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw AccessLogError(path: path, reason: "cannot open it for writing")
        }
        handle.seekToEndOfFile()
        self.handle = handle
    }

    func record(_ entry: AccessLogEntry) {
        let admitted = pending.withLockedValue { count -> Bool in
            guard count < Self.maxPending else { return false }
            count += 1
            return true
        }
        guard admitted else {
            dropped.increment()
            return
        }
        queue.async {
            if let line = try? self.encoder.encode(entry) {
                self.handle.write(line + Data("\n".utf8))
            }
            self.pending.withLockedValue { $0 -= 1 }
        }
    }

    /// Returns once every line recorded so far is written.
    func flush() {
        queue.sync {}
    }
}

struct AccessLogError: Error, CustomStringConvertible {
    var path: String
    var reason: String
    var description: String { "access log \(path): \(reason)" }
}

/// Counts and times every answered request (swift-metrics), and writes the access log.
///
///   httpdns_server_requests_total{endpoint, status}   answers, by route (a fixed set) and status code
///   httpdns_server_request_seconds                    from the complete request to its answer
struct RequestObserver: Sendable {
    let accessLog: AccessLog?
    let metered: Bool
    private let counters = NIOLockedValueBox<[String: Counter]>([:])
    private let duration = Timer(label: "httpdns_server_request_seconds")
    private let timeFormat = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    init(accessLog: AccessLog?, metered: Bool) {
        self.accessLog = accessLog
        self.metered = metered
    }

    var isActive: Bool { metered || accessLog != nil }

    func answered(_ request: ListenerRequest, _ response: ListenerResponse, after elapsed: Duration) {
        let path = request.path
        if metered {
            let endpoint = Self.endpoint(path)
            let status = Int(response.status.code)
            let key = "\(endpoint) \(status)"
            let counter = counters.withLockedValue { counters -> Counter in
                if let known = counters[key] { return known }
                let made = Counter(
                    label: "httpdns_server_requests_total",
                    dimensions: [("endpoint", endpoint), ("status", String(status))]
                )
                counters[key] = made
                return made
            }
            counter.increment()
            duration.recordNanoseconds(elapsed.nanoseconds)
        }
        accessLog?.record(
            AccessLogEntry(
                time: Date().formatted(timeFormat),
                client: request.remoteIP?.description ?? request.remote,
                method: request.method.rawValue,
                path: String(path.prefix(256)),
                protocol: request.version,
                status: Int(response.status.code),
                bytes: response.body.readableBytes,
                ms: Double(elapsed.nanoseconds) / 1e6
            )
        )
    }

    /// The route a path names, from a fixed set (a label value never comes from the client as is).
    static func endpoint(_ path: String) -> String {
        switch path {
        case "/d", "/resolve", "/dns-query", "/healthz", "/readyz", "/metrics", AlibabaJSONFormat.v2Path,
            ServiceListFormat.tencentPath:
            path
        default:
            if let (_, signed) = AlibabaJSONFormat.accountPath(path) {
                signed ? "/ACCOUNT/sign_d" : "/ACCOUNT/d"
            } else if ServiceListFormat.alibabaAccount(path: path) != nil {
                "/ACCOUNT/ss"
            } else {
                "other"
            }
        }
    }
}
