// The `httpdns resolve` contract, run as a user would: the built binary, its stdout, stderr and exit code.

import Foundation
import HTTPDNSEngine
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOPosix
import Testing

@Suite(.serialized) struct CLIUsageTests {
    @Test(arguments: [
        (["resolve", "a.test", "--resolver", "foo:bar"], "--resolver"),
        (["resolve", "a.test", "--resolver", "doh:ftp://x/"], "--resolver"),
        (["resolve", "a.test", "--resolver", "system", "--local-dns", "dns:nowhere"], "--local-dns"),
        (["resolve", "a.test", "--resolver", "system", "--bootstrap", "doh.test"], "--bootstrap"),
        (["resolve", "a.test", "--resolver", "doh:https://doh.test/dns-query"], "--bootstrap doh.test=IP"),
        (["resolve", "a.test", "--resolver", "system", "--only", "a*b"], "--only"),
        (["resolve", "a.test"], "--resolver"),
        // Like resolve: a name needs a resolver (an IP-literal URL does not).
        (["fetch", "https://a.test/"], "--resolver"),
        (["trace", "https://a.test/", "https://127.0.0.1/"], "--resolver"),
        (["resolve", "a.test", "--resolver", "system", "--cacert", "/nonexistent.pem"], "--cacert: cannot read"),
        (["resolve", "a.test", "--resolver", "system", "--timeout", "-1"], "--timeout: -1.0 is negative"),
        (["resolve", "a.test", "--resolver", "system", "--timeout", "nan"], "--timeout: nan is not a number"),
        (["serve", "--listen", "127.0.0.1"], "has no port; give IP:PORT, e.g. 127.0.0.1:8053"),
        (["proxy", "--listen", "127.0.0.1", "--resolver", "system"], "has no port"),
    ])
    func usageErrorsExit64NamingTheFlag(_ arguments: [String], _ mention: String) async throws {
        let r = try await runCLI(arguments)
        #expect(r.status == 64)
        #expect(r.stderr.contains(mention), "\(r.stderr)")
    }

    @Test(arguments: [
        (#"{"listn": ["127.0.0.1:0"]}"#, #"unknown key "listn""#),
        (#"{"listen": "127.0.0.1:0"}"#, #""listen" must be a list of strings"#),
        (#"{"listen": ["127.0.0.1:0"], "ttl": "60"}"#, #""ttl" must be a number"#),
        (#"{"listen": ["127.0.0.1:0"], "ttl": 1.5}"#, #""ttl" must be a whole number"#),
        (#"{"listen": ["127.0.0.1:0"], "drain-timeout": -1}"#, #""drain-timeout" must be a number from"#),
        ("[1, 2]", "not a JSON object of settings"),
        ("{", "not a JSON object of settings"),
        ("{}", "--listen: give at least one"),
    ])
    func serveConfigFileMistakesExit64NamingTheKey(_ json: String, _ mention: String) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(json.utf8).write(to: file)
        let r = try await runCLI(["serve", "--config", file.path])
        #expect(r.status == 64)
        #expect(r.stderr.contains(mention), "\(r.stderr)")
    }

    @Test func traceUsageErrorsExit64() async throws {
        let none = try await runCLI(["trace", "--resolver", "system"])
        #expect(none.status == 64)
        let both = try await runCLI(["trace", "https://a.test/", "--http1.1", "--http2", "--resolver", "system"])
        #expect(both.status == 64)
        #expect(both.stderr.contains("--http1.1 and --http2"), "\(both.stderr)")
    }

    /// Proxy credentials are a secret: never a flag value, and no message repeats them. From a file
    /// they are required of clients (407 without, through with).
    @Test func proxyCredentialsComeFromAFileNeverAFlag() async throws {
        let flagged = try await runCLI(["proxy", "--resolver", "system", "--proxy-user", "u:s3cr3t-pw"])
        #expect(flagged.status == 64)
        #expect(flagged.stderr.contains("--proxy-user-file"), "\(flagged.stderr)")
        #expect(!flagged.stderr.contains("s3cr3t-pw"))

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("proxy-user-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bad = dir.appendingPathComponent("bad").path
        try Data("s3cr3t-without-colon\n".utf8).write(to: URL(fileURLWithPath: bad))
        let malformed = try await runCLI(["proxy", "--resolver", "system", "--proxy-user-file", bad])
        #expect(malformed.status == 64)
        #expect(malformed.stderr.contains("--proxy-user-file: give one line USER:PASSWORD"), "\(malformed.stderr)")
        #expect(!malformed.stderr.contains("s3cr3t"))

        let good = dir.appendingPathComponent("good").path
        try Data("u:s3cr3t-pw\n".utf8).write(to: URL(fileURLWithPath: good))
        let (proxy, line) = try await startInBackground(
            httpdnsBinary,
            [
                "proxy", "--listen", "127.0.0.1:0", "--resolver", "system", "--allow-port", "1", "--proxy-user-file",
                good,
            ]
        )
        defer { proxy.terminate() }
        let start = try #require(line.range(of: "127.0.0.1:"), "\(line)")
        let port = try #require(Int(line[start.upperBound...].prefix { $0.isNumber }), "\(line)")
        let (refused, _) = try await rawTunnel(
            proxyPort: port,
            request: "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n",
            payload: []
        )
        #expect(refused.contains(" 407 "), "\(refused)")
        let auth = Data("u:s3cr3t-pw".utf8).base64EncodedString()
        let (passed, _) = try await rawTunnel(
            proxyPort: port,
            request: "CONNECT 127.0.0.1:1 HTTP/1.1\r\nProxy-Authorization: Basic \(auth)\r\n\r\n",
            payload: []
        )
        // Past the credentials check: port 1 refuses, so the proxy answers 502, not 407.
        #expect(passed.contains(" 502 "), "\(passed)")
    }

    @Test func aCACertificateFileWithoutACertificateIsAUsageErrorNamingTheFlag() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-ca-\(UUID()).pem")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("hello\n".utf8).write(to: file)
        let r = try await runCLI(["fetch", "https://a.test/", "--resolver", "system", "--cacert", file.path])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--cacert"), "\(r.stderr)")
    }

    @Test func aRefusedConnectionIsOneReadableLine() async throws {
        let r = try await runCLI(["fetch", "http://127.0.0.1:1/"])
        #expect(r.status == 7)
        #expect(r.stderr.contains("could not connect to 127.0.0.1:1: connection refused"), "\(r.stderr)")
        #expect(!r.stderr.contains("errno") && !r.stderr.contains("error set"), "\(r.stderr)")
    }

    @Test func aPreconnectedFetchReportsTheRequestAloneAsReused() async throws {
        let origin = try await startService()
        let url = "http://127.0.0.1:\(origin.ports[0])/healthz"
        let r = try await runCLI(["fetch", "-v", "--preconnect", url])
        await origin.stop()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("* Pre-connected to http://127.0.0.1:\(origin.ports[0])"), "\(r.stderr)")
        #expect(r.stderr.contains("(reused)"), "\(r.stderr)")
        // No lookup, connect or TLS: zeros in their places, the body's size in its own.
        let timing = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("* dns ") })
        #expect(timing.hasPrefix("* dns 0.0 ms, connect 0.0 ms, tls 0.0 ms, first byte "), "\(timing)")
        #expect(timing.hasSuffix(", \(r.stdout.utf8.count) bytes"), "\(timing)")
    }

    @Test func demoRunsEveryStepAndExitsZero() async throws {
        let r = try await runCLI(["demo"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("Every step came out as expected"))
        #expect(!r.stdout.lowercased().contains("seed"), "internal words stay out of what users read")
        #expect(r.stdout.components(separatedBy: "   ok  ").count - 1 == 6)
        #expect(!r.stdout.contains("FAIL"))
    }
}

@Suite struct ServeCLITests {
    @Test func serveAnswersFromItsHostsFileAndStopsOnSIGTERM() async throws {
        let hosts = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-serve-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: hosts) }
        try "198.51.0.7 served.example.com\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let (process, line) = try await startInBackground(
            httpdnsBinary,
            ["serve", "--listen", "127.0.0.1:0", "--hosts", hosts]
        )
        let afterHost = try #require(line.range(of: "127.0.0.1:"), "\(line)")
        let port = try #require(Int(line[afterHost.upperBound...].prefix { $0.isNumber }), "\(line)")
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let response = try await engine.execute(
            try HTTPEngineRequest(url: "http://127.0.0.1:\(port)/d?dn=served.example.com&ttl=1")
        )
        #expect(String(buffer: try await response.body.collect(upTo: 4096)) == "198.51.0.7,60")
        process.terminate()
        let status = try await processThreads.runIfActive {
            process.waitUntilExit()
            return process.terminationStatus
        }
        #expect(status == 0)
    }
}
