// The `httpdns resolve` contract, run as a user would: the built binary, its stdout, stderr and exit code.

import Foundation
import HTTPDNSEngine
import NIOPosix
import Testing

struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs the `httpdns` binary built next to the tests (scripts/test.sh builds it with --build-tests).
/// The blocking wait happens on NIO's thread pool, never on the test's concurrency threads.
func runCLI(_ arguments: [String], namespace: String? = nil) async throws -> CLIResult {
    try await NIOThreadPool.singleton.runIfActive { try runCLIBlocking(arguments, namespace: namespace) }
}

func runCLIBlocking(_ arguments: [String], namespace: String?) throws -> CLIResult {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let binary = root.appendingPathComponent(".build/debug/httpdns")
    try #require(
        FileManager.default.isExecutableFile(atPath: binary.path),
        "build the CLI first: swift build --build-tests"
    )
    if let namespace {
        return try runProcessBlocking("/usr/sbin/ip", ["netns", "exec", namespace, binary.path] + arguments)
    }
    return try runProcessBlocking(binary.path, arguments)
}

/// Runs a program to its end and collects its output. Blocking: call it on NIO's thread pool.
func runProcessBlocking(_ path: String, _ arguments: [String]) throws -> CLIResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CLIResult(
        status: process.terminationStatus,
        stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self)
    )
}

@Suite(.serialized) struct CLIUsageTests {
    @Test(arguments: [
        (["resolve", "a.test", "--resolver", "foo:bar"], "--resolver"),
        (["resolve", "a.test", "--resolver", "doh:ftp://x/"], "--resolver"),
        (["resolve", "a.test", "--resolver", "system", "--local-dns", "dns:nowhere"], "--local-dns"),
        (["resolve", "a.test", "--resolver", "system", "--bootstrap", "doh.test"], "--bootstrap"),
        (["resolve", "a.test", "--resolver", "doh:https://doh.test/dns-query"], "--bootstrap doh.test=IP"),
        (["resolve", "a.test", "--resolver", "system", "--only", "a*b"], "--only"),
        (["resolve", "a.test"], "--resolver"),
    ])
    func usageErrorsExit64NamingTheFlag(_ arguments: [String], _ mention: String) async throws {
        let r = try await runCLI(arguments)
        #expect(r.status == 64)
        #expect(r.stderr.contains(mention), "\(r.stderr)")
    }

    @Test func demoRunsEveryStepAndExitsZero() async throws {
        let r = try await runCLI(["demo"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("Every step came out as expected"))
        #expect(r.stdout.components(separatedBy: "   ok  ").count - 1 == 6)
        #expect(!r.stdout.contains("FAIL"))
    }
}

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct CLIPeerTests {
    @Test func resolveJSONThroughKresdDoH() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "b.test", "--json", "--cacert", peers.ca, "--resolver",
            "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 2)
        #expect(array.first?["name"] as? String == "a.test")
        #expect(array.first?["addresses"] as? [String] == ["127.0.0.1", "::1"])
        #expect(array.first?["ttl"] as? Int == 5)
        #expect((array.first?["source"] as? String)?.hasPrefix("doh:https://127.0.0.1") == true)
        #expect(array.first?["elapsedMs"] is Double)
    }

    @Test func plainOutputIsLikeDigShortWithSourceAndTTL() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "c.test", "--type", "a", "--resolver", "dns:127.0.0.1:\(peers.kresdDNS.1)",
        ])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix(";; c.test ttl=5s source=dns:127.0.0.1:") == true)
        #expect(lines.dropFirst() == ["127.0.0.1"])
    }

    @Test func compareReportsTheHijackingLocalDNS() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "--compare", "--json", "--type", "a", "--cacert", peers.ca,
            "--resolver", "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query",
            "--local-dns", "dns:127.0.0.2:\(peers.hijacker.1)",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let first = try #require(
            (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])?.first
        )
        #expect(first["hijacked"] as? Bool == true)
        #expect((first["localDNS"] as? [String: Any])?["addresses"] as? [String] == ["127.0.0.66"])
        #expect(first["addresses"] as? [String] == ["127.0.0.1"])
    }

    @Test func failedNameExitsOneWithAnErrorPerName() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "www.nx.test", "--no-fallback", "--resolver", "dns:127.0.0.1:\(peers.kresdDNS.1)",
        ])
        #expect(r.status == 1)
        #expect(r.stdout.contains("127.0.0.1"))
        #expect(r.stderr.contains("www.nx.test: no A or AAAA record"))
        #expect(!r.stderr.contains("a.test:"))
    }

    @Test func deadFirstResolverStillResolvesWithinTheTimeout() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "--timeout", "3", "--no-fallback", "--resolver", "dns:127.0.0.1:1", "--resolver",
            "dns:127.0.0.1:\(peers.kresdDNS.1)",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("127.0.0.1"))
    }
}

@Suite struct ServeCLITests {
    @Test func serveAnswersFromItsHostsFileAndStopsOnSIGTERM() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let hosts = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-serve-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: hosts) }
        try "198.51.0.7 served.example.com\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let (process, line) = try await startInBackground(
            root.appendingPathComponent(".build/debug/httpdns").path,
            ["serve", "--listen", "127.0.0.1:0", "--hosts", hosts]
        )
        let afterHost = try #require(line.range(of: "127.0.0.1:"), "\(line)")
        let port = try #require(Int(line[afterHost.upperBound...].prefix { $0.isNumber }), "\(line)")
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let response = try await engine.execute(
            try HTTPRequest(url: "http://127.0.0.1:\(port)/d?dn=served.example.com&ttl=1")
        )
        #expect(String(buffer: try await response.body.collect(upTo: 4096)) == "198.51.0.7,60")
        process.terminate()
        let status = try await NIOThreadPool.singleton.runIfActive {
            process.waitUntilExit()
            return process.terminationStatus
        }
        #expect(status == 0)
    }
}

/// Starts a long-running program and returns it with the first line it prints (its listening address).
func startInBackground(_ path: String, _ arguments: [String]) async throws -> (Process, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    // Read off the concurrency pool: availableData blocks.
    let line = try await NIOThreadPool.singleton.runIfActive { () -> String in
        var data = Data()
        while !data.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            data.append(chunk)
        }
        return String(decoding: data, as: UTF8.self)
    }
    return (process, line)
}
