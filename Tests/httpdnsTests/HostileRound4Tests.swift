// Hostile round 4 against `httpdns serve` as an operator runs it (the real binary, a separate process):
// a configuration value the wire form cannot carry is refused at start (it trapped on the first query),
// and SIGHUP reads the hosts file again instead of killing every request in flight. The rules behind them
// are tested without a process: EncoderLimitTests (HTTPDNSCoreTests), HostsReloadRuleTests.

@testable import HTTPDNSTestSupport
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ServeConfigurationLimitTests {
    /// `serve` with `arguments`, which must refuse to start: its exit status and stderr.
    func refused(_ arguments: [String]) async throws -> CLIResult {
        try await runCLI(["serve", "--listen", "127.0.0.1:0"] + arguments)
    }

    @Test(arguments: [
        ("x.test 1 . alpn=" + String(repeating: "a", count: 300), "1 to 255"),
        ("x.test 1 " + String(repeating: "b", count: 70) + ".example. alpn=h2", "63"),
        ("x.test 1 " + (0..<60).map { _ in "abcd" }.joined(separator: ".") + ". alpn=h2", "255"),
        ("x.test 1 . no-default-alpn", "no-default-alpn without alpn"),
    ])
    func anHTTPSRecordTheWireCannotCarryIsAUsageError(_ record: String, _ limit: String) async throws {
        let r = try await refused(["--https-record", record])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("--https-record") && r.stderr.contains(limit), "\(r.stderr)")
    }

    @Test func aNamesRecordsThatDoNotFitOneAnswerAreAUsageError() async throws {
        let hints = (1...5).map { "2001:db8::\($0)" }.joined(separator: ",")
        let records = (0..<1000).flatMap { _ in ["--https-record", "many.test 1 . alpn=h2 ipv6hint=\(hints)"] }
        let r = try await refused(records)
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("many.test") && r.stderr.contains("65535"), "\(r.stderr)")
    }

    @Test func theConfigFilesValuesAreCheckedTheSameWay() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-limits-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ech = Data(repeating: 7, count: 70_000).base64EncodedString()
        let hints = (0..<20_000).map { "10.0.\($0 / 256).\($0 % 256)" }.joined(separator: ",")
        for record in ["x.test 1 . alpn=h2 ech=\(ech)", "x.test 1 . ipv4hint=\(hints)"] {
            let config = dir + "/serve.json"
            let json = try JSONSerialization.data(withJSONObject: ["https-record": [record]])
            try json.write(to: URL(fileURLWithPath: config))
            let r = try await refused(["--config", config])
            #expect(r.status == 64, "\(r.stderr)")
            #expect(r.stderr.contains("65535"), "\(r.stderr.prefix(300))")
        }
    }
}

@Suite struct ServeHangUpTests {
    /// SIGHUP killed serve with every request in flight (0 of 40 answered). Now it reads the hosts file
    /// again, as it is, and every request in flight is answered.
    @Test func sighupReadsTheHostsFileAgainAndEveryRequestInFlightIsAnswered() async throws {
        let upstream = try await SilentUDPServer.start()
        defer { Task { await upstream.stop() } }
        let hosts = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-hup-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: hosts) }
        try "198.51.0.7 served.example.com\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let serve = try await ServeProcess.launch([
            "--listen", "127.0.0.1:0", "--hosts", hosts, "--upstream", "dns:127.0.0.1:\(upstream.port)",
        ])
        defer { Task { await serve.stop() } }
        let engine = try manyConnectionEngine(connections: 40)
        defer { engine.shutdown() }
        // 40 questions the upstream never answers: in flight until serve's own lookup deadline.
        let inFlight = (0..<40).map { i in
            Task { try await dohRcode(engine, serve.port, "n\(i).pending.example") }
        }
        // The hosts file changes in place, to a size and time the poll may not have seen yet.
        try "198.51.0.8 added.example.com\n198.51.0.7 served.example.com\n".write(
            toFile: hosts,
            atomically: false,
            encoding: .utf8
        )
        serve.signal(SIGHUP)
        try await eventually("serve said it read the hosts file again") {
            serve.output.contains("SIGHUP: read \(hosts) again")
        }
        #expect(serve.process.isRunning, "\(serve.errors)")
        #expect(try await dohRcode(engine, serve.port, "added.example.com") == 0)
        var answered = 0
        for task in inFlight {
            // SERVFAIL: the upstream is down; an answer all the same, not a reset connection.
            if (try? await task.value) == 2 { answered += 1 }
        }
        #expect(answered == 40, "\(answered) of 40 requests in flight were answered")
        #expect(serve.process.isRunning, "\(serve.errors)")
    }
}
