// The loopback proxy: real curl and headless Chromium through it, raw CONNECT clients for limits and
// load, an in-process echo server as a tunnel target where every byte must come back.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSProxy
import HTTPDNSResolver
import NIOCore
import NIOPosix
import Testing

/// Echoes every byte back.
final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.write(data, promise: nil) }
    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

func startEcho() async throws -> any Channel {
    try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.backlog, value: 1024)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler()) }
        }
        .bind(host: "127.0.0.1", port: 0).get()
}

/// A raw proxy client: sends `request` (a CONNECT), returns the status line, then pushes `payload`
/// through the tunnel and returns what comes back (as many bytes as were sent).
func rawTunnel(proxyPort: Int, request: String, payload: [UInt8]) async throws -> (String, [UInt8]) {
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: proxyPort) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
    return try await channel.executeThenClose { inbound, outbound in
        try await outbound.write(ByteBuffer(string: request))
        var iterator = inbound.makeAsyncIterator()
        var head = [UInt8]()
        var rest = [UInt8]()
        while true {
            guard let chunk = try await iterator.next() else { return (String(decoding: head, as: UTF8.self), []) }
            head += chunk.readableBytesView
            if let end = head.indices.first(where: { head[$0...].starts(with: [13, 10, 13, 10]) }) {
                rest = Array(head[(end + 4)...])
                head = Array(head[..<end])
                break
            }
        }
        let status = String(decoding: head, as: UTF8.self).split(separator: "\r\n").first.map(String.init) ?? ""
        guard status.contains(" 200 "), !payload.isEmpty else { return (status, rest) }
        try await outbound.write(ByteBuffer(bytes: payload))
        var echoed = rest
        while echoed.count < payload.count, let chunk = try await iterator.next() { echoed += chunk.readableBytesView }
        return (status, echoed)
    }
}

func startProxy(
    _ resolver: HTTPDNSResolver,
    engine: HTTPEngine,
    _ tweak: (inout HTTPDNSProxy.Configuration) -> Void = { _ in }
) async throws -> HTTPDNSProxy {
    var config = HTTPDNSProxy.Configuration()
    tweak(&config)
    return try await HTTPDNSProxy.start(config, resolver: resolver, engine: engine, logger: testLogger)
}

@Suite struct ProxyLimitTests {
    func plainProxy(_ tweak: (inout HTTPDNSProxy.Configuration) -> Void = { _ in }) async throws -> (
        HTTPDNSProxy, any Channel
    ) {
        let echo = try await startEcho()
        let resolver = makeResolver([])
        let proxy = try await startProxy(resolver, engine: try HTTPEngine()) {
            $0.allowedPorts.insert(echo.localAddress!.port!)
            tweak(&$0)
        }
        return (proxy, echo)
    }

    @Test func fiveHundredConcurrentTunnelsKeepEveryByte() async throws {
        let (proxy, echo) = try await plainProxy()
        defer {
            Task {
                await proxy.stop(); try? await echo.close()
            }
        }
        let target = "127.0.0.1:\(echo.localAddress!.port!)"
        let intact = try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<500 {
                group.addTask {
                    var payload = [UInt8](repeating: 0, count: 16 * 1024)
                    for j in payload.indices { payload[j] = UInt8(truncatingIfNeeded: i &* 31 &+ j &* 7) }
                    let (status, echoed) = try await rawTunnel(
                        proxyPort: proxy.port,
                        request: "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n\r\n",
                        payload: payload
                    )
                    return status.hasPrefix("HTTP/1.1 200") && echoed == payload
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(intact == 500)
    }

    @Test func connectToADisallowedPortIsRefused() async throws {
        let (proxy, echo) = try await plainProxy()
        defer {
            Task {
                await proxy.stop(); try? await echo.close()
            }
        }
        let (status, _) = try await rawTunnel(
            proxyPort: proxy.port,
            request: "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n",
            payload: []
        )
        #expect(status.hasPrefix("HTTP/1.1 403"))
        #expect(proxy.recentTunnels.last?.error == "port not allowed")
    }

    @Test func malformedAndOversizedRequestsAreRejectedWhileATunnelKeepsFlowing() async throws {
        let (proxy, echo) = try await plainProxy()
        defer {
            Task {
                await proxy.stop(); try? await echo.close()
            }
        }
        let target = "127.0.0.1:\(echo.localAddress!.port!)"
        // A tunnel that stays open across the bad requests.
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: proxy.port) { ch in
                ch.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: ch)
                }
            }
        try await channel.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            try await outbound.write(ByteBuffer(string: "CONNECT \(target) HTTP/1.1\r\n\r\n"))
            let established = try #require(try await iterator.next())
            #expect(String(buffer: established).hasPrefix("HTTP/1.1 200"))

            let garbage = try await rawTunnel(
                proxyPort: proxy.port,
                request: "\u{01}\u{02} nonsense\r\n\r\n",
                payload: []
            )
            #expect(garbage.0.hasPrefix("HTTP/1.1 400"))
            let huge = "CONNECT \(target) HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 20_000) + "\r\n\r\n"
            let oversized = try await rawTunnel(proxyPort: proxy.port, request: huge, payload: [])
            #expect(oversized.0.hasPrefix("HTTP/1.1 431"))
            let notAProxyRequest = try await rawTunnel(
                proxyPort: proxy.port,
                request: "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n",
                payload: []
            )
            #expect(notAProxyRequest.0.hasPrefix("HTTP/1.1 400"))

            try await outbound.write(ByteBuffer(string: "still flowing"))
            var echoed = ""
            while echoed.count < 13, let chunk = try await iterator.next() { echoed += String(buffer: chunk) }
            #expect(echoed == "still flowing")
        }
    }

    @Test func slowClientIsTimedOutWhileOthersAreServed() async throws {
        let (proxy, echo) = try await plainProxy { $0.requestHeadTimeout = .seconds(1) }
        defer {
            Task {
                await proxy.stop(); try? await echo.close()
            }
        }
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: proxy.port) { ch in
                ch.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: ch)
                }
            }
        let reply = try await channel.executeThenClose { inbound, outbound in
            try? await outbound.write(ByteBuffer(string: "CONNECT 127.0.0.1:"))  // a head that never ends
            var text = ""
            for try await chunk in inbound { text += String(buffer: chunk) }
            return text
        }
        #expect(reply.hasPrefix("HTTP/1.1 408"))
        // Others are served meanwhile and after.
        let target = "127.0.0.1:\(echo.localAddress!.port!)"
        #expect(
            try await rawTunnel(proxyPort: proxy.port, request: "CONNECT \(target) HTTP/1.1\r\n\r\n", payload: [9]).1
                == [9]
        )
    }

    @Test func pacFileListsTheHosts() async throws {
        let (proxy, echo) = try await plainProxy {
            $0.pacHosts = [try! HostPattern("*.example.com"), try! HostPattern("a.test")]
        }
        defer {
            Task {
                await proxy.stop(); try? await echo.close()
            }
        }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let response = try await engine.execute(try HTTPRequest(url: "http://127.0.0.1:\(proxy.port)/proxy.pac"))
        #expect(response.headers.first(name: "content-type") == "application/x-ns-proxy-autoconfig")
        let pac = String(buffer: try await response.body.collect(upTo: 4096))
        #expect(pac.contains("dnsDomainIs(host, \".example.com\")"))
        #expect(pac.contains("host == \"a.test\""))
        #expect(pac.contains("PROXY 127.0.0.1:\(proxy.port)"))
    }

    @Test func offLoopbackNeedsCredentialsAndChecksThem() async throws {
        let resolver = makeResolver([])
        await #expect(throws: ProxyConfigurationError.self) {
            _ = try await startProxy(resolver, engine: try HTTPEngine()) { $0.host = "0.0.0.0" }
        }
        let (proxy, echo) = try await plainProxy { $0.credentials = ("u", "p") }
        defer {
            Task {
                await proxy.stop(); try? await echo.close()
            }
        }
        let target = "127.0.0.1:\(echo.localAddress!.port!)"
        let denied = try await rawTunnel(
            proxyPort: proxy.port,
            request: "CONNECT \(target) HTTP/1.1\r\n\r\n",
            payload: []
        )
        #expect(denied.0.hasPrefix("HTTP/1.1 407"))
        let auth = Data("u:p".utf8).base64EncodedString()
        let allowed = try await rawTunnel(
            proxyPort: proxy.port,
            request: "CONNECT \(target) HTTP/1.1\r\nProxy-Authorization: Basic \(auth)\r\n\r\n",
            payload: [1, 2, 3]
        )
        #expect(allowed.1 == [1, 2, 3])
    }
}

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
        let deadline = ContinuousClock.now + .seconds(3)
        while proxy.recentTunnels.isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let tunnel = try #require(proxy.recentTunnels.last)
        #expect(tunnel.host == "a.test")
        #expect(tunnel.address?.hasPrefix("127.0.0.1:") == true || tunnel.address?.hasPrefix("::1:") == true)
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
        let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        let browser = try #require(chromium, "chromium is not installed (scripts/test.sh installs it)")
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
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let (proxyProcess, line) = try await startInBackground(
            "/usr/sbin/ip",
            [
                "netns", "exec", peers.netns, root.appendingPathComponent(".build/debug/httpdns").path, "proxy",
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

/// curl with `arguments`, through `proxy`, bounded by `maxTime` seconds.
func curl(through proxy: HTTPDNSProxy, maxTime: Int, _ arguments: [String]) async throws -> CLIResult {
    try await runProcess(
        "/usr/bin/curl",
        ["-sS", "--max-time", "\(maxTime)", "-x", "http://127.0.0.1:\(proxy.port)"] + arguments
    )
}
