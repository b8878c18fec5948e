// The loopback proxy: real curl and headless Chromium through it, raw CONNECT clients for limits and
// load, an in-process echo server as a tunnel target where every byte must come back.
/// Echoes every byte back.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOCore
import NIOPosix
import Testing

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct ProxyPeerTests {
    func proxy(_ peers: Peers, _ tweak: (inout HTTPDNSProxy.Configuration) -> Void = { _ in }) async throws
        -> HTTPDNSProxy
    {
        let resolver = try peers.resolver()
        return try await startProxy(resolver, engine: try peers.appEngine()) {
            $0.allowedPorts.formUnion([peers.nginxTLS, peers.nginxHTTP])
            tweak(&$0)
        }
    }

    @Test func curlThroughTheProxyGetsTheRealHostWithItsOwnSNI() async throws {
        let peers = try Peers.require()
        let proxy = try await proxy(peers)
        defer { Task { await proxy.stop() } }
        let https = try await curl(
            through: proxy,
            maxTime: 10,
            [
                "--cacert", peers.ca,
                peers.url("a.test", "/whoami"),
            ]
        )
        #expect(https.status == 0, "\(https.stderr)")
        #expect(https.stdout.contains("host=a.test sni=a.test"))
        // The tunnel is recorded once both of its sides have closed, which may be just after curl exits.
        try await eventually("the proxy records the tunnel") { !proxy.recentTunnels.isEmpty }
        let tunnel = try #require(proxy.recentTunnels.last)
        #expect(tunnel.host == "a.test")
        #expect(tunnel.address?.hasPrefix("127.0.0.1:") == true || tunnel.address?.hasPrefix("[::1]:") == true)
        #expect(tunnel.bytesUp > 0 && tunnel.bytesDown > 0)
        let http = try await curl(
            through: proxy,
            maxTime: 10,
            [
                "http://b.test:\(peers.nginxHTTP)/whoami"
            ]
        )
        #expect(http.status == 0, "\(http.stderr)")
        #expect(http.stdout.contains("host=b.test"))
        #expect(http.stdout.contains("scheme=http"))
    }

    @Test func listedHostsAreUpgradedToHTTPS() async throws {
        let peers = try Peers.require()
        let proxy = try await proxy(peers) { $0.upgradeToHTTPS = [try! HostPattern("a.test")] }
        defer { Task { await proxy.stop() } }
        let r = try await curl(
            through: proxy,
            maxTime: 10,
            [
                "http://a.test:\(peers.nginxTLS)/whoami"
            ]
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("sni=a.test"))
        #expect(r.stdout.contains("scheme=https"))
    }

    @Test func largeDownloadThroughATunnelArrivesWhole() async throws {
        let peers = try Peers.require()
        let proxy = try await proxy(peers)
        defer { Task { await proxy.stop() } }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-proxy-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let r = try await curl(
            through: proxy,
            maxTime: 60,
            [
                "--cacert", peers.ca, "-o", out,
                peers.url("b.test", "/files/big.bin"),
            ]
        )
        #expect(r.status == 0, "\(r.stderr)")
        let original = try Data(contentsOf: URL(fileURLWithPath: peers.www + "/big.bin"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == original)
    }
}

/// A real browser through the proxy. Chromium is heavy for a 2-core machine, so scripts/test.sh runs
/// this suite on its own, after the rest, where it cannot slow down timing-sensitive tests.
@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct ChromiumProxyTests {
    @Test func chromiumLoadsThePageThroughTheProxyWhileTheSystemResolverIsHijacked() async throws {
        let peers = try Peers.require()
        let browser = try #require(chromiumBinary, "chromium is not installed (scripts/test.sh installs it)")
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-chromium-\(UUID())")
        defer { try? FileManager.default.removeItem(at: home) }
        let nss = home.appendingPathComponent(".pki/nssdb").path
        try FileManager.default.createDirectory(atPath: nss, withIntermediateDirectories: true)
        #expect(try await runProcess("/usr/bin/certutil", ["-d", "sql:" + nss, "-N", "--empty-password"]).status == 0)
        #expect(
            try await runProcess(
                "/usr/bin/certutil",
                ["-d", "sql:" + nss, "-A", "-t", "C,,", "-n", "httpdns-test-ca", "-i", peers.ca]
            ).status == 0
        )
        // The proxy runs inside the namespace, as an app on that device would, resolving through kresd
        // there; the namespace's own resolver answers 127.0.0.66 for a.test.
        let (proxyProcess, line) = try await startInBackground(
            "/usr/sbin/ip",
            [
                "netns", "exec", peers.netns, httpdnsBinary, "proxy",
                "--listen", "127.0.0.1:0", "--resolver", "doh:https://127.0.0.1:8473/dns-query", "--cacert", peers.ca,
                "--only", "*.test", "--allow-port", "8443",
            ]
        )
        defer { proxyProcess.terminate() }
        let afterHost = try #require(line.range(of: "127.0.0.1:"), "\(line)")
        let port = try #require(Int(line[afterHost.upperBound...].prefix { $0.isNumber }), "\(line)")
        // Headless Chromium inside the namespace, with the test CA trusted through HOME's NSS db.
        func runBrowser(_ profile: String, _ extra: [String]) async throws -> CLIResult {
            try await runProcess(
                "/usr/bin/env",
                [
                    "HOME=" + home.path, "/usr/sbin/ip", "netns", "exec", peers.netns, browser,
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--user-data-dir=" + home.appendingPathComponent(profile).path,
                ] + extra + ["--dump-dom", "https://a.test:8443/"]
            )
        }
        let dom = try await runBrowser("proxied", ["--proxy-server=http://127.0.0.1:\(port)"])
        #expect(
            dom.stdout.contains("server=a.test host=a.test sni=a.test"),
            "stdout: \(dom.stdout.prefix(500)) stderr: \(dom.stderr.suffix(800))"
        )
        // Without the proxy the same browser in the same namespace cannot reach a.test.
        let direct = try await runBrowser("direct", [])
        #expect(!direct.stdout.contains("server=a.test"))
    }
}
