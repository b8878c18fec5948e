// `httpdns fetch` as a user runs it, including the seeds' story in a network namespace whose system
// resolver is hijacked, and a blackholed first address.

import Crypto
import Foundation
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOPosix
import Testing

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct FetchCLITests {
    func common(_ peers: Peers) -> [String] {
        [
            "--cacert", peers.ca, "--resolver", "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query", "--local-dns",
            "dns:127.0.0.2:\(peers.hijacker.1)",
        ]
    }

    @Test func seedsStoryCurlFailsInTheHijackedNamespaceAndFetchSucceeds() async throws {
        let peers = try Peers.require()
        // The namespace's resolv.conf points at a hijacking dnsmasq: curl goes to 127.0.0.66 and fails.
        let curl = try await runProcess(
            "/usr/sbin/ip",
            [
                "netns", "exec", peers.netns, "curl", "-sS", "--max-time", "5", "--cacert", peers.ca,
                "https://a.test:8443/",
            ]
        )
        #expect(curl.status != 0)
        // The same URL through HTTPDNS (kresd DoH inside the namespace) reaches the real a.test.
        let r = try await runCLI(
            [
                "fetch", "https://a.test:8443/", "--cacert", peers.ca, "--resolver",
                "doh:https://127.0.0.1:8473/dns-query", "--trace-json",
            ],
            namespace: peers.netns
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("server=a.test host=a.test sni=a.test"))
        let trace = try lastJSONLine(r.stderr, as: Trace.self)
        #expect(trace.ip == "127.0.0.1")
        #expect(trace.dnsSource == "doh:https://127.0.0.1:8473/dns-query")
    }

    @Test func offlineANameNotCachedIsNotConnectedToInternetThroughURLSession() async throws {
        // Airplane mode: a network namespace of its own with no interface up. The system stack fails
        // too (curl: cannot resolve); URLSession must say -1009 (not -1003, "no such host"), as Apple's
        // does, so an app's retry-on-reconnect runs.
        _ = try Peers.require()
        let curl = try await runProcess(
            "/usr/bin/unshare",
            ["-n", "curl", "-sS", "--max-time", "5", "https://uncached.test/"]
        )
        #expect(curl.status == 6, "curl: \(curl.status) \(curl.stderr)")
        let r = try await runProcess(
            "/usr/bin/unshare",
            [
                "-n", httpdnsBinary, "fetch", "--engine", "urlsession", "-v", "--resolver",
                "doh:https://192.0.2.1/dns-query", "--max-time", "10", "https://uncached.test/",
            ]
        )
        #expect(r.status == 6, "\(r.stderr)")
        #expect(r.stderr.contains("* URLSession failed: NSURLErrorDomain -1009"), "\(r.stderr)")
    }

    @Test func blackholedFirstAddressSucceedsOnTheSecondAfterTheAttemptDelay() async throws {
        let peers = try Peers.require()
        // nginx's static /d answer lists 127.0.0.2 (SYNs dropped in the namespace) before 127.0.0.1.
        let r = try await runCLI(
            [
                "fetch", "https://a.test:8443/whoami", "--cacert", peers.ca, "--resolver",
                "dnspod:http://127.0.0.1:8080/d", "--no-fallback", "--trace-json",
            ],
            namespace: peers.netns
        )
        #expect(r.status == 0, "\(r.stderr)")
        let trace = try lastJSONLine(r.stderr, as: Trace.self)
        #expect(trace.ip == "127.0.0.1")
        #expect(trace.status == 200)
        // The second address is tried 250 ms after the first, not after the first's 10 s connect timeout.
        // The upper bound is generous (4 times the delay, a tenth of the timeout): it tells those apart
        // without timing a loaded machine; the lower bound is the delay itself, which load cannot shorten.
        #expect((trace.connectMs ?? 9999) < 1000, "connect took \(trace.connectMs ?? -1) ms")
        #expect((trace.connectMs ?? 0) >= 240, "the first attempt was not given its 250 ms")
    }

    @Test func traceJSONHasEveryField() async throws {
        let peers = try Peers.require()
        let r = try await runCLI(
            ["fetch", peers.url("b.test", "/whoami"), "--trace-json", "--http1.1"] + common(peers)
        )
        #expect(r.status == 0, "\(r.stderr)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(r.stderr.split(separator: "\n").last!.utf8)) as? [String: Any]
        )
        for key in [
            "url", "ip", "port", "protocol", "dnsSource", "dnsMs", "connectMs", "tlsMs", "ttfbMs", "totalMs", "reused",
            "status", "bytesSent", "bytesReceived", "redirects",
        ] {
            #expect(object[key] != nil, "missing \(key)")
        }
        #expect(object["protocol"] as? String == "http/1.1")
        #expect(r.stdout.contains("sni=b.test"))
    }

    @Test func postFileWithIncludeAndOutput() async throws {
        let peers = try Peers.require()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-fetch-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let payload = try #require(try FileHandle(forReadingAtPath: "/dev/urandom")?.read(upToCount: 3 << 20))
        try payload.write(to: dir.appendingPathComponent("in.bin"))
        let out = dir.appendingPathComponent("out.json").path
        let r = try await runCLI(
            [
                "fetch", peers.url("a.test", "/echo"), "-d", "@" + dir.appendingPathComponent("in.bin").path, "-i",
                "-o", out, "-H", "Content-Type: application/octet-stream", "--http2",
            ] + common(peers)
        )
        #expect(r.status == 0, "\(r.stderr)")
        let written = try String(contentsOfFile: out, encoding: .utf8)
        #expect(written.hasPrefix("HTTP/2 200\r\n"))
        let echo = try JSONDecoder().decode(
            Echo.self,
            from: Data(written.components(separatedBy: "\r\n\r\n").last!.utf8)
        )
        #expect(echo.method == "POST")
        #expect(echo.length == payload.count)
        #expect(echo.sha256 == SHA256.hash(data: payload).map { String(format: "%02x", $0) }.joined())
    }

    @Test func followRedirectsAcrossHostsWithVerboseTrace() async throws {
        let peers = try Peers.require()
        let r = try await runCLI(["fetch", peers.url("a.test", "/r/to-b"), "-L", "-v", "--trace-json"] + common(peers))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("host=b.test sni=b.test"))
        #expect(r.stderr.contains("* Followed 1 redirect(s)"))
        #expect(try lastJSONLine(r.stderr, as: Trace.self).redirects == 1)
    }

    @Test(arguments: [
        (["fetch", "ftp://x/"], Int32(3), "ftp"),
        (["fetch", "https://a.test/", "-H", "nocolon"], 64, "-H"),
        (["fetch", "https://a.test/", "--http1.1", "--http2"], 64, "--http2"),
        (["fetch", "https://a.test/", "-d", "@/nonexistent/file"], 64, "-d"),
    ])
    func usageErrors(_ arguments: [String], _ code: Int32, _ mention: String) async throws {
        let r = try await runCLI(arguments + ["--resolver", "system"])
        #expect(r.status == code)
        #expect(r.stderr.contains(mention), "\(r.stderr)")
    }

    @Test func failuresHaveCurlsExitCodesAndSayWhatHappened() async throws {
        let peers = try Peers.require()
        // www.nx.test does not exist anywhere.
        let nx = try await runCLI(["fetch", "https://www.nx.test:\(peers.nginxTLS)/", "--no-fallback"] + common(peers))
        #expect(nx.status == 6)
        #expect(nx.stderr.contains("www.nx.test"))
        // c.test resolves, but nginx has no c.test certificate.
        let cert = try await runCLI(["fetch", peers.url("c.test", "/")] + common(peers))
        #expect(cert.status == 35)
        #expect(cert.stderr.contains("not valid for c.test"))
        #expect(cert.stderr.contains("127.0.0.1:\(peers.nginxTLS)"))
        // No CA: not trusted.
        let untrusted = try await runCLI([
            "fetch", peers.url("a.test", "/"), "--resolver", "dns:127.0.0.1:\(peers.kresdDNS.1)",
        ])
        #expect(untrusted.status == 60)
        #expect(untrusted.stderr.contains("--cacert"))
        // Closed port.
        let refused = try await runCLI(["fetch", "https://a.test:1/"] + common(peers))
        #expect(refused.status == 7)
        // a.test is 127.0.0.1 and ::1 at kresd: one readable line per address, no NIO internals.
        #expect(refused.stderr.contains("could not connect to a.test at any address: "), "\(refused.stderr)")
        #expect(refused.stderr.contains("127.0.0.1:1: connection refused"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("errno") && !refused.stderr.contains("(connect)"), "\(refused.stderr)")
        // HTTP errors are responses: exit 0, like curl without -f.
        let notFound = try await runCLI(["fetch", peers.url("a.test", "/status/404")] + common(peers))
        #expect(notFound.status == 0)
        #expect(notFound.stdout.contains("status 404"))
    }

    @Test func urlsessionEngineGivesTheSameAnswersAndTraceKeys() async throws {
        let peers = try Peers.require()
        let direct = try await runCLI(["fetch", peers.url("a.test", "/"), "--trace-json"] + common(peers))
        let session = try await runCLI(
            ["fetch", "--engine", "urlsession", peers.url("a.test", "/"), "--trace-json"] + common(peers)
        )
        #expect(session.status == 0, "\(session.stderr)")
        #expect(session.stdout == direct.stdout)
        #expect(session.stdout.contains("server=a.test host=a.test sni=a.test"))
        func keys(_ text: String) throws -> Set<String> {
            let line = try #require(text.split(separator: "\n").last(where: { $0.hasPrefix("{") }))
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return Set(try #require(object).keys)
        }
        #expect(try keys(session.stderr) == keys(direct.stderr))
        let trace = try lastJSONLine(session.stderr, as: Trace.self)
        #expect(trace.status == 200 && trace.dnsSource?.contains("\(peers.doh2Port)") == true)
        // Without -L the session's delegate refuses the redirect: the 301 is the answer.
        let refused = try await runCLI(
            ["fetch", "--engine", "urlsession", "-i", peers.url("a.test", "/r/start")] + common(peers)
        )
        #expect(refused.status == 0 && refused.stdout.hasPrefix("HTTP 301"), "\(refused.stdout)")
        // With -L: a cross-host 307 keeps the POST body and is resolved again.
        let followed = try await runCLI(
            [
                "fetch", "--engine", "urlsession", "-L", "-d", "hello", peers.url("b.test", "/r/to-a-echo"),
                "--trace-json",
            ]
                + common(peers)
        )
        let echo = try JSONDecoder().decode(Echo.self, from: Data(followed.stdout.utf8))
        #expect(echo.method == "POST" && echo.length == 5 && echo.sni == "a.test")
        #expect(try lastJSONLine(followed.stderr, as: Trace.self).redirects == 1)
        let loop = try await runCLI(
            ["fetch", "--engine", "urlsession", "-L", "--max-redirs", "3", peers.url("a.test", "/r/loop")]
                + common(peers)
        )
        #expect(loop.status == 47)
    }
}
