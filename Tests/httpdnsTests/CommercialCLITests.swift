// The commercial forms through the CLI: `httpdns resolve` and `fetch` with credentials from
// files against `httpdns serve` playing each vendor; an independent client (OpenSSL and Python,
// Tests/Fixtures/vendors/vendor_client.py) against the same server; secrets in no output, log or cache
// file; every credential mistake a usage error naming the flag.

import Foundation
@testable import HTTPDNSDemoPKI
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOPosix
import Testing

@Suite(.serialized) struct CommercialCLITests {
    static let aesKey = "0123456789abcdef"
    static let desKey = "dnspodpass"
    static let token = "tok-SECRET-7f3a"
    static let aliSecret = "9f8e7d6c5b4a39281716054433221100"  // hex, as Alibaba's console shows it
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A folder with the secret files, a hosts file and a throw-away CA and certificate for `localhost`.
    final class Workspace: Sendable {
        let dir: String
        init() throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-vendors-\(UUID())").path
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let pki = try DemoPKI()
            let (certificate, key) = try pki.leafPEM("localhost")
            let files = [
                "aes.key": CommercialCLITests.aesKey + "\n", "des.key": CommercialCLITests.desKey,
                "token": CommercialCLITests.token + "\n", "alibaba.secret": CommercialCLITests.aliSecret,
                "short.key": "tooshort", "hosts": "127.0.0.1 a.test\n2001:db8::7 a.test\n",
                "ca.pem": pki.caPEM, "cert.pem": certificate, "key.pem": key,
            ]
            for (name, text) in files { try text.write(toFile: path(name), atomically: true, encoding: .utf8) }
        }
        func path(_ name: String) -> String { "\(dir)/\(name)" }
        deinit { try? FileManager.default.removeItem(atPath: dir) }
    }

    /// `httpdns serve` with one account of each kind, HTTPS when `tls`, and its port.
    static func serve(_ ws: Workspace, tls: Bool, log: String, _ extra: [String] = []) async throws -> (
        ChildProcess, Int
    ) {
        var arguments =
            [
                "serve", "--listen", "127.0.0.1:0", "--hosts", ws.path("hosts"), "--require-auth", "--debug",
                "--dnspod-account", "1001:aes:\(ws.path("aes.key"))", "--dnspod-account",
                "1002:des:\(ws.path("des.key"))",
                "--dnspod-token", "1003:\(ws.path("token"))", "--alibaba-account",
                "139450:\(ws.path("alibaba.secret"))",
            ] + extra
        if tls { arguments += ["--tls-cert", ws.path("cert.pem"), "--tls-key", ws.path("key.pem")] }
        let (process, line) = try await startInBackground(
            httpdnsBinary,
            arguments,
            stderr: log
        )
        let afterHost = try #require(line.range(of: "127.0.0.1:"), "\(line)")
        return (process, try #require(Int(line[afterHost.upperBound...].prefix { $0.isNumber }), "\(line)"))
    }

    static func stop(_ process: ChildProcess) async throws {
        process.terminate()
        _ = try await processThreads.runIfActive { process.waitUntilExit() }
    }

    /// The resolver and credential flags of one form against a server on `port`.
    static func flags(_ form: String, _ ws: Workspace, port: Int) -> [String] {
        switch form {
        case "aes":
            return [
                "--resolver", "dnspod:http://127.0.0.1:\(port)/d", "--dnspod-id", "1001",
                "--dnspod-key-file", ws.path("aes.key"),
            ]
        case "des":
            return [
                "--resolver", "dnspod:http://127.0.0.1:\(port)/d", "--dnspod-id", "1002",
                "--dnspod-key-file", ws.path("des.key"), "--dnspod-alg", "des",
            ]
        case "token":
            return [
                "--resolver", "dnspod:https://localhost:\(port)/d", "--bootstrap", "localhost=127.0.0.1",
                "--cacert", ws.path("ca.pem"), "--dnspod-id", "1003", "--dnspod-token-file", ws.path("token"),
            ]
        case "alibaba-v2":
            return [
                "--resolver", "json:http://127.0.0.1:\(port)/v2/d?id=139450", "--alibaba-secret-file",
                ws.path("alibaba.secret"),
            ]
        default:
            return [
                "--resolver", "json:http://127.0.0.1:\(port)/139450/d", "--alibaba-secret-file",
                ws.path("alibaba.secret"),
            ]
        }
    }

    static func expectNoSecret(_ text: String, _ what: String) {
        for secret in [aesKey, desKey, String(desKey.prefix(8)), token, aliSecret] {
            #expect(!text.contains(secret), "\(what) holds a secret")
        }
    }

    @Test(arguments: ["aes", "des", "token", "alibaba", "alibaba-v2"])
    func eachFormResolvesAndFetchesWithNoSecretInAnyOutputLogOrCache(_ form: String) async throws {
        let ws = try Workspace()
        let log = ws.path("serve.log")
        let (server, port) = try await Self.serve(ws, tls: form == "token", log: log)
        let common = Self.flags(form, ws, port: port) + ["--no-fallback", "--allow-private", "*"]
        let cache = ws.path("cache.json")
        let resolve = try await runCLI(["resolve", "a.test", "--debug", "--json", "--cache-file", cache] + common)
        #expect(resolve.status == 0, "\(resolve.stderr)")
        #expect(resolve.stdout.contains("127.0.0.1") && resolve.stdout.contains("2001:db8::7"), "\(resolve.stdout)")
        let plain = try await runCLI(["resolve", "a.test", "--debug", "--cache-file", cache] + common)
        #expect(plain.status == 0, "\(plain.stderr)")
        let scheme = form == "token" ? "https" : "http"
        let fetch = try await runCLI(
            ["fetch", "-v", "--debug", "--trace-json", "\(scheme)://a.test:\(port)/healthz", "--only", "a.test"]
                + (form == "token" ? [] : ["--cacert", ws.path("ca.pem")]) + common
        )
        try await Self.stop(server)
        let cacheText = (try? String(contentsOfFile: cache, encoding: .utf8)) ?? ""
        let serverLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(cacheText.contains("127.0.0.1"), "the cache file was written")
        #expect(serverLog.contains("uri="), "the server logged its requests")
        for (text, what) in [
            (resolve.stdout, "resolve stdout"), (resolve.stderr, "resolve stderr"), (plain.stdout, "stdout"),
            (plain.stderr, "stderr"), (fetch.stdout, "fetch stdout"), (fetch.stderr, "fetch stderr"),
            (cacheText, "the cache file"), (serverLog, "the server's debug log"),
        ] {
            Self.expectNoSecret(text, "\(form): \(what)")
        }
        // `fetch` reached the origin (our server's /healthz) at the address the vendor form gave.
        #expect(fetch.status == 0 || form == "token", "\(fetch.stderr)")
        if form != "token" { #expect(fetch.stdout.contains("ok")) }
    }

    /// The same server answers a client that shares nothing with ours (OpenSSL's ciphers, Python's MD5
    /// and HTTP), in each form.
    @Test(arguments: ["aes", "des", "token", "alibaba", "alibaba-v2"])
    func anIndependentClientIsAnsweredAsTheVendorsSDKsExpect(_ form: String) async throws {
        let opensslPresent = FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")
        try #require(opensslPresent || !Peers.shouldRun, "openssl is needed (scripts/test.sh installs it)")
        guard opensslPresent else { return }
        let ws = try Workspace()
        let (server, port) = try await Self.serve(ws, tls: form == "token", log: ws.path("serve.log"))
        let (account, file) =
            ["aes": ("1001", "aes.key"), "des": ("1002", "des.key"), "token": ("1003", "token")][form]
            ?? ("139450", "alibaba.secret")
        let base = form == "token" ? "https://localhost:\(port)" : "http://127.0.0.1:\(port)"
        let client = Self.root.appendingPathComponent("Tests/Fixtures/vendors/vendor_client.py").path
        let result = try await processThreads.runIfActive {
            try runProcessBlocking(
                "/usr/bin/env",
                ["python3", client, form, base, account, ws.path(file), "a.test", ws.path("ca.pem")]
            )
        }
        // A wrong key gets the vendor's refusal: an empty body for DNSPod, 403 with a code for Alibaba.
        let wrong = try await processThreads.runIfActive {
            try runProcessBlocking(
                "/usr/bin/env",
                ["python3", client, form, base, account, ws.path("short.key"), "a.test", ws.path("ca.pem")]
            )
        }
        try await Self.stop(server)
        #expect(result.status == 0, "\(result.stderr)")
        if form == "alibaba-v2" {
            #expect(result.stdout.contains(#""code":"success""#), "\(result.stdout)")
            #expect(result.stdout.contains(#""ips":["127.0.0.1"]"#), "\(result.stdout)")
            #expect(result.stdout.contains(#""cip":"127.0.0.1""#), "\(result.stdout)")
            #expect(wrong.stderr.contains("HTTP 403") && wrong.stderr.contains("InvalidSignature"), "\(wrong.stderr)")
        } else if form == "alibaba" {
            #expect(result.stdout.contains(#""ips":["127.0.0.1"]"#), "\(result.stdout)")
            #expect(result.stdout.contains(#""client_ip":"127.0.0.1""#), "\(result.stdout)")
            #expect(wrong.stderr.contains("HTTP 403") && wrong.stderr.contains("InvalidSignature"), "\(wrong.stderr)")
        } else {
            #expect(result.stdout.hasPrefix("127.0.0.1,60-2001:db8::7,60|127.0.0.1"), "\(result.stdout)")
            #expect(wrong.status != 0)
        }
    }

    /// The SDKs' other requests, from the same independent client: the C SDK's signed `/ss` (with
    /// per-address ports in the answer), DNSPod's `/conf?token=` without an id, an unsigned v2 query
    /// under `--require-auth`, v2's `cip` and `no_ip_code`, and a v1 and a v2 secret on one account.
    @Test func anIndependentClientsOtherRequestsAreAnsweredAsTheSDKsExpect() async throws {
        let opensslPresent = FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")
        try #require(opensslPresent || !Peers.shouldRun, "openssl is needed (scripts/test.sh installs it)")
        guard opensslPresent else { return }
        let ws = try Workspace()
        try "127.0.0.1 a.test\n2001:db8::7 a.test\n127.0.0.9 v4.test\n".write(
            toFile: ws.path("hosts"),
            atomically: true,
            encoding: .utf8
        )
        try "plain-v1-secret".write(toFile: ws.path("v1.secret"), atomically: true, encoding: .utf8)
        let (server, port) = try await Self.serve(
            ws,
            tls: true,
            log: ws.path("serve.log"),
            [
                "--alibaba-account", "139450:\(ws.path("v1.secret"))", "--service-ip", "127.0.0.2:8443",
                "--service-ip", "::1",
            ]
        )
        let base = "https://localhost:\(port)"
        let client = Self.root.appendingPathComponent("Tests/Fixtures/vendors/vendor_client.py").path
        func run(_ form: String, _ account: String, _ file: String, _ name: String = "a.test") async throws
            -> CLIResult
        {
            try await processThreads.runIfActive {
                try runProcessBlocking(
                    "/usr/bin/env",
                    ["python3", client, form, base, account, ws.path(file), name, ws.path("ca.pem")]
                )
            }
        }
        let list = try await run("alibaba-ss", "139450", "alibaba.secret")
        let listWrongKey = try await run("alibaba-ss", "139450", "short.key")
        let conf = try await run("dnspod-conf", "-", "token")
        let unsigned = try await run("alibaba-v2-unsigned", "139450", "alibaba.secret")
        let cip = try await run("alibaba-v2-cip", "139450", "alibaba.secret", "v4.test")
        let v1 = try await run("alibaba", "139450", "v1.secret")
        let v2 = try await run("alibaba-v2", "139450", "alibaba.secret")
        try await Self.stop(server)
        #expect(list.stdout.contains(#""service_ip":["127.0.0.2"]"#), "\(list.stdout) \(list.stderr)")
        #expect(list.stdout.contains(#""service_ip_port":[8443]"#), "\(list.stdout)")
        #expect(listWrongKey.stderr.contains("403") && listWrongKey.stderr.contains("InvalidSignature"))
        #expect(conf.stdout.contains("ip:127.0.0.2;::1|"), "\(conf.stdout) \(conf.stderr)")
        #expect(unsigned.stderr.contains("HTTP 403") && unsigned.stderr.contains("UnsignedInterfaceDisabled"))
        #expect(cip.stdout.contains(#""cip":"203.0.113.7""#), "\(cip.stdout) \(cip.stderr)")
        #expect(cip.stdout.contains(#""no_ip_code":"RRNotExist""#), "\(cip.stdout)")
        #expect(v1.status == 0 && v1.stdout.contains(#""ips":["127.0.0.1"]"#), "\(v1.stderr)")
        #expect(v2.status == 0 && v2.stdout.contains(#""code":"success""#), "\(v2.stderr)")
    }

    /// Each mistake exits 64 naming the flag, and never prints the secret.
    @Test(arguments: [
        (
            ["--resolver", "dnspod:http://127.0.0.1:1/d", "--dnspod-id", "1001", "--dnspod-key-file", "short.key"],
            "--dnspod-key-file: an AES key is 16 bytes"
        ),
        (
            ["--resolver", "dnspod:http://127.0.0.1:1/d", "--dnspod-id", "1001", "--dnspod-key-file", "missing.key"],
            "--dnspod-key-file: cannot read"
        ),
        (
            ["--resolver", "doh:http://127.0.0.1:1/dns-query", "--dnspod-id", "1001", "--dnspod-key-file", "aes.key"],
            "--dnspod-id: no dnspod: resolver"
        ),
        (
            ["--resolver", "dnspod:http://127.0.0.1:1/d", "--dnspod-id", "1003", "--dnspod-token-file", "token"],
            "--dnspod-token-file: the token travels only over HTTPS"
        ),
        (
            ["--resolver", "dnspod:http://127.0.0.1:1/d", "--dnspod-key-file", "aes.key"],
            "--dnspod-id: give the account id"
        ),
        (
            [
                "--resolver", "dnspod:http://127.0.0.1:1/d", "--dnspod-id", "1001", "--dnspod-key-file", "aes.key",
                "--dnspod-alg", "rc4",
            ], "--dnspod-alg: use aes or des"
        ),
        (
            ["--resolver", "json:http://127.0.0.1:1/resolve", "--alibaba-secret-file", "alibaba.secret"],
            "--alibaba-secret-file: signed queries need the account"
        ),
        (
            ["--resolver", "json:http://127.0.0.1:1/v2/d?id=139450", "--alibaba-secret-file", "short.key"],
            "--alibaba-secret-file: the v2 API's secret is hex"
        ),
        (
            ["--resolver", "dnspod:http://127.0.0.1:1/d", "--alibaba-secret-file", "alibaba.secret"],
            "--alibaba-secret-file: no json: resolver"
        ),
    ])
    func credentialMistakesAreUsageErrorsNamingTheFlag(_ arguments: [String], _ expected: String) async throws {
        let ws = try Workspace()
        let resolved = arguments.map {
            ["short.key", "missing.key", "aes.key", "token", "alibaba.secret"].contains($0) ? ws.path($0) : $0
        }
        let result = try await runCLI(["resolve", "a.test"] + resolved)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        Self.expectNoSecret(result.stderr + result.stdout, "the usage error")
    }

    @Test func serveRefusesABadAccountFlagNamingIt() async throws {
        let ws = try Workspace()
        let result = try await runCLI([
            "serve", "--listen", "127.0.0.1:0", "--dnspod-account", "1001:aes:\(ws.path("short.key"))",
        ])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--dnspod-account: an AES key is 16 bytes"), "\(result.stderr)")
        let noAccount = try await runCLI(["serve", "--listen", "127.0.0.1:0", "--require-auth"])
        #expect(noAccount.status == 64)
        #expect(noAccount.stderr.contains("--require-auth"), "\(noAccount.stderr)")
    }
}
