// Running `httpdns serve` in production, as an operator would, against the real peers:
// /metrics read by Prometheus' own parser (Python prometheus_client) and following the traffic; SIGTERM
// draining with settings from --config; and two replicas behind HAProxy (Debian's, with
// deploy/haproxy.cfg as shipped) losing one under load.

import Foundation
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Prometheus samples by "name{labels}", read by Python's prometheus_client parser.
func scrapeMetrics(_ url: String, ca: String? = nil) async throws -> [String: Double] {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/ops/scrape_metrics.py").path
    let r = try await runProcess("/usr/bin/env", ["python3", script, url] + (ca.map { [$0] } ?? []))
    try #require(r.status == 0, "prometheus_client could not read \(url): \(r.stderr)")
    return try JSONDecoder().decode([String: Double].self, from: Data(r.stdout.utf8))
}

/// The sum of the samples whose key starts with `prefix` (a metric and some of its labels).
func total(_ samples: [String: Double], _ prefix: String) -> Double {
    samples.filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +)
}

func temporaryDirectory() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-ops-\(UUID())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct ServerOperationsCLITests {
    @Test func metricsParseAsPrometheusTextAndFollowTheTraffic() async throws {
        let peers = try Peers.require()
        let serve = try await ServeProcess.launch(
            ["--listen", "127.0.0.1:0", "--upstream", "dns:127.0.0.1:\(peers.kresdDNS.1)", "--metrics"]
        )
        defer { serve.signal(SIGKILL) }
        let base = "http://127.0.0.1:\(serve.port)"
        let before = try await scrapeMetrics(base + "/metrics")
        // Five DoH (JSON) queries for a name kresd answers: the first asks the upstream, the rest are
        // answered from the cache.
        for _ in 0..<5 {
            let r = try await runProcess("/usr/bin/curl", ["-sS", "-f", base + "/dns-query?name=a.test&type=A"])
            #expect(r.status == 0 && r.stdout.contains("127.0.0.1"), "\(r.stdout)\(r.stderr)")
        }
        let after = try await scrapeMetrics(base + "/metrics")
        func moved(_ prefix: String) -> Double { total(after, prefix) - total(before, prefix) }
        #expect(moved(#"httpdns_server_requests_total{endpoint="/dns-query",status="200"}"#) == 5)
        #expect(moved("httpdns_server_request_seconds_count") >= 5)
        #expect(moved("httpdns_upstream_queries_total{provider=") >= 1)
        #expect(moved("httpdns_cache_misses_total") >= 1)
        #expect(moved("httpdns_cache_hits_total") >= 4)
        #expect(moved("httpdns_upstream_failures_total") == 0)
        // The scrape itself is counted, under its own endpoint.
        #expect(total(after, #"httpdns_server_requests_total{endpoint="/metrics",status="200"}"#) >= 1)
    }

    @Test func sigtermDrainsWithTheConfigFilesSettingsAndExitsZero() async throws {
        let peers = try Peers.require()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("serve.json")
        let log = dir.appendingPathComponent("access.log").path
        let settings = """
            {"listen": ["127.0.0.1:0"], "upstream": "dns:127.0.0.1:\(peers.kresdDNS.1)", "access-log": "\(log)",
             "shutdown-delay": 0.2, "drain-timeout": 5}
            """
        try Data(settings.utf8).write(to: config)
        let serve = try await ServeProcess.launch(["--config", config.path])
        defer { serve.signal(SIGKILL) }
        let base = "http://127.0.0.1:\(serve.port)"
        try await eventually("ready", pollEvery: .milliseconds(50)) {
            try await runProcess("/usr/bin/curl", ["-s", "-f", base + "/readyz"]).status == 0
        }
        serve.signal(SIGTERM)
        #expect(try await serve.exitStatus() == 0, "\(serve.output)")
        #expect(serve.output.contains("httpdns serve: draining"))
        #expect(serve.output.contains("httpdns serve: stopped"))
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains { $0.contains(#""path":"/readyz""#) && $0.contains(#""status":200"#) }, "\(lines)")
    }

    @Test func twoReplicasBehindHAProxySurviveLosingOne() async throws {
        let peers = try Peers.require()
        let certs = try #require(ProcessInfo.processInfo.environment["HTTPDNS_PEERS_DIR"]) + "/certs"
        let hosts = try #require(ProcessInfo.processInfo.environment["HTTPDNS_PEERS_DIR"]) + "/kresd-hosts"
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let replicaArguments = [
            "--listen", "127.0.0.1:0", "--tls-cert", certs + "/doh.pem", "--tls-key", certs + "/doh.key",
            "--hosts", hosts, "--metrics",
        ]
        let replicas = [
            try await ServeProcess.launch(replicaArguments),
            try await ServeProcess.launch(replicaArguments),
        ]
        defer { for r in replicas { r.signal(SIGKILL) } }
        let front = try freeTCPPort()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let haproxyLog = dir.appendingPathComponent("haproxy.log").path
        let haproxy = try await ChildProcess.launch(
            "/usr/sbin/haproxy",
            ["-db", "-f", root.appendingPathComponent("deploy/haproxy.cfg").path],
            environment: [
                "HTTPDNS_FRONT": "127.0.0.1:\(front)", "HTTPDNS_REPLICA1": "127.0.0.1:\(replicas[0].port)",
                "HTTPDNS_REPLICA2": "127.0.0.1:\(replicas[1].port)", "HTTPDNS_CA": peers.ca, "HTTPDNS_SNI": "doh.test",
            ],
            stdout: .file(haproxyLog),
            stderr: .appending(haproxyLog)
        )
        defer { haproxy.terminate() }

        // DoH queries, each on a connection of its own (HTTP/1.1, Connection: close), so each one is
        // balanced again: the status of each, in order.
        let query = "https://doh.test:\(front)/dns-query?name=a.test&type=A"
        func queries(_ n: Int) async throws -> [String] {
            var arguments = [
                "-s", "--http1.1", "--max-time", "5", "--cacert", peers.ca, "--resolve", "doh.test:\(front):127.0.0.1",
                "-H", "Connection: close", "-w", "%{http_code}\\n",
            ]
            for _ in 0..<n { arguments += ["-o", "/dev/null", query] }
            return try await runProcess("/usr/bin/curl", arguments).stdout.split(separator: "\n").map(String.init)
        }
        func served(_ replica: ServeProcess) async throws -> Double {
            total(
                try await scrapeMetrics("https://127.0.0.1:\(replica.port)/metrics", ca: peers.ca),
                #"httpdns_server_requests_total{endpoint="/dns-query",status="200"}"#
            )
        }
        // Both replicas healthy in HAProxy's eyes: each has answered its /readyz checks, and queries
        // go through.
        for replica in replicas {
            try await eventually("HAProxy checked replica \(replica.port)", pollEvery: .milliseconds(100)) {
                total(
                    try await scrapeMetrics("https://127.0.0.1:\(replica.port)/metrics", ca: peers.ca),
                    #"httpdns_server_requests_total{endpoint="/readyz",status="200"}"#
                ) >= 2
            }
        }
        let warmUp = try await queries(40)
        #expect(warmUp.allSatisfy { $0 == "200" }, "\(warmUp)")
        let first = try await served(replicas[0])
        let second = try await served(replicas[1])
        #expect(first > 0 && second > 0, "both replicas take load: \(first), \(second)")

        // Lose replica 1 in the middle of a run of queries.
        let survivorBefore = try await served(replicas[1])
        async let during = queries(300)
        try await eventually("the run is under way", pollEvery: .milliseconds(20)) {
            try await served(replicas[1]) >= survivorBefore + 20
        }
        replicas[0].signal(SIGKILL)
        let duringStatuses = try await during
        let lostDuring = duringStatuses.filter { $0 != "200" }.count
        print("HAProxy: \(lostDuring) of \(duringStatuses.count) queries lost while replica 1 was killed")
        // At most the queries that were on the killed replica's connections when it died are lost:
        // a refused connection is sent to the survivor (retries, option redispatch).
        #expect(lostDuring <= 5, "lost \(lostDuring) of \(duringStatuses.count) while a replica died")

        // After the health-check window (2 x 500 ms) nothing is lost, and the survivor answers it all.
        try await eventually("HAProxy marked replica 1 down", within: .seconds(10), pollEvery: .milliseconds(100)) {
            ((try? String(contentsOfFile: haproxyLog, encoding: .utf8)) ?? "").contains("replica1 is DOWN")
        }
        let survivorAfterKill = try await served(replicas[1])
        let after = try await queries(200)
        #expect(after.count == 200 && after.allSatisfy { $0 == "200" }, "\(after.filter { $0 != "200" })")
        let survivorNow = try await served(replicas[1])
        #expect(survivorNow - survivorAfterKill == 200)
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for a program that takes no port 0).
func freeTCPPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    try #require(bound == 0)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
