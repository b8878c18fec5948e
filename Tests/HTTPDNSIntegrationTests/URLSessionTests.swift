// URLSession (FoundationNetworking on Linux) with HTTPDNSURLProtocol installed, against the real
// peers: nginx (SNI certificates, h2, redirects, body echo, cookies), kresd DoH as the resolver and
// the hijacking dnsmasq as LocalDNS. Each test serves its sessions through an interception of its own;
// the suite runs serially, as it counts the engine's connections.

import Crypto
import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
@testable import HTTPDNSURLSession
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct URLSessionTests {
    /// The interception the test's `install` made (each test runs on a suite value of its own).
    private let installed = NIOLockedValueBox<Interception?>(nil)
    var interception: Interception { installed.withLockedValue { $0! } }

    /// Serves `setup` through an interception of this test's own (`interception`).
    func install(_ setup: HTTPDNSURLProtocol.Setup) {
        installed.withLockedValue { $0 = Interception(setup) }
    }

    /// Installs the protocol with kresd DoH; `intercept` names the hosts it takes.
    func install(
        _ peers: Peers,
        intercept: [String] = ["a.test", "*.a.test", "b.test", "evila.test"],
        _ tweak: (inout HTTPDNSURLProtocol.Setup) -> Void = { _ in }
    ) throws -> (HTTPDNSURLProtocol.Setup, MetricsLog) {
        var engineConfiguration = HTTPEngine.Configuration()
        engineConfiguration.tls = HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: peers.ca))
        var setup = try HTTPDNSURLProtocol.Setup(
            resolver: try peers.resolver(),
            engineConfiguration: engineConfiguration,
            intercept: HostPolicy(only: try intercept.map(HostPattern.init))
        )
        let log = MetricsLog()
        setup.onMetrics = { log.add($0) }
        tweak(&setup)
        install(setup)
        return (setup, log)
    }

    func session(delegate: (any URLSessionDelegate)? = nil) -> URLSession {
        URLSession(
            configuration: interception.enabled(.ephemeral),
            delegate: delegate,
            delegateQueue: nil
        )
    }

    func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

    @Test func bothNamesGetTheirOwnCertificateThroughAsyncData() async throws {
        let peers = try Peers.require()
        let (setup, log) = try install(peers)
        defer { setup.engine.shutdown() }
        let session = session()
        for name in ["a.test", "b.test"] {
            let (data, response) = try await session.data(for: URLRequest(url: URL(string: peers.url(name, "/"))!))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(text(data).contains("server=\(name) host=\(name) sni=\(name) proto=HTTP/2.0"), "\(text(data))")
        }
        let hops = log.all.flatMap(\.hops)
        #expect(hops.count == 2)
        #expect(
            hops.allSatisfy { $0.dnsSource?.description.contains("127.0.0.1:\(peers.doh2Port)") == true || $0.reused }
        )
    }

    @Test func a304KeepsTheCachedResponseFreshForAsLongAsItSays() async throws {
        // /revalidate is stored with max-age=0; its 304 says max-age=3600 (RFC 9111 §4.3.4): the second
        // load revalidates, the third is the cache's answer, as with the system stack.
        let peers = try Peers.require()
        let (setup, log) = try install(peers)
        defer { setup.engine.shutdown() }
        let configuration = interception.enabled(.ephemeral)
        configuration.urlCache = URLCache(memoryCapacity: 16 << 20, diskCapacity: 0, diskPath: nil)
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let url = URL(string: peers.url("a.test", "/revalidate"))!
        var bodies: [Data] = []
        for _ in 0..<3 {
            let (data, response) = try await session.data(for: URLRequest(url: url))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            bodies.append(data)
        }
        let original = try Data(contentsOf: URL(fileURLWithPath: peers.www + "/text.txt"))
        #expect(bodies.allSatisfy { $0 == original })
        // The origin saw the first load (200) and the revalidation (304); the third never left.
        let statuses = log.all.map { $0.hops.map(\.status) }
        #expect(statuses.flatMap { $0 }.count == 2, "\(statuses)")
    }

    @Test func anAppAskingForBrotliGetsABodyItCanRead() async throws {
        // Alamofire's default session sends br first. The engine decodes gzip and deflate, so br is not
        // offered: the body reaches the app decoded, as through the system stack.
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        let session = session()
        defer { session.invalidateAndCancel() }
        func get(_ path: String) async throws -> String {
            var request = URLRequest(url: URL(string: peers.url("a.test", path))!)
            request.setValue("br;q=1.0, gzip;q=0.9, deflate;q=0.8", forHTTPHeaderField: "Accept-Encoding")
            return text(try await session.data(for: request).0)
        }
        #expect(try await get("/accept-encoding") == "accept-encoding=gzip;q=0.9, deflate;q=0.8\n")
        let original = try String(contentsOfFile: peers.www + "/text.txt", encoding: .utf8)
        #expect(try await get("/text") == original)
    }

    @Test func suspendingAndResumingATaskSendsItsPostOnce() async throws {
        // corelibs suspends a task with stopLoading and resumes it with startLoading on the same
        // protocol: the load must go on where it was, not start over and send the POST again.
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        let requests = NIOLockedValueBox(0)
        let arrived = AsyncStream<Void>.makeStream()
        let origin = try await ScriptedServer.start { inbound, outbound in
            var pending = ""
            for try await chunk in inbound {
                pending += String(buffer: chunk)
                // Each POST carries "ping" (4 bytes) after its head.
                while let end = pending.range(of: "\r\n\r\n"), pending[end.upperBound...].count >= 4 {
                    pending = String(pending[end.upperBound...].dropFirst(4))
                    requests.withLockedValue { $0 += 1 }
                    arrived.continuation.yield()
                    try await Task.sleep(for: .milliseconds(300))  // a slow origin, not the test waiting
                    try await outbound.write(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npong"))
                }
            }
        }
        let session = session()
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: URL(string: "http://a.test:\(origin.port)/post")!)
        request.httpMethod = "POST"
        request.httpBody = Data("ping".utf8)
        let done = AsyncStream<(Data?, Int?, (any Error)?)>.makeStream()
        let task = session.dataTask(with: request) { data, response, error in
            done.continuation.yield((data, (response as? HTTPURLResponse)?.statusCode, error))
        }
        task.resume()
        var arrivals = arrived.stream.makeAsyncIterator()
        _ = await arrivals.next()
        task.suspend()
        task.resume()
        var results = done.stream.makeAsyncIterator()
        let (data, status, error) = try #require(await results.next())
        #expect(error == nil && status == 200 && data == Data("pong".utf8), "\(String(describing: error))")
        #expect(requests.withLockedValue { $0 } == 1, "the POST went out again on resume")
        await origin.stop()
    }

    @Test func theResourceTimeoutCoversEveryRedirectHop() async throws {
        // Three hops of 0.6 s each (/1 -> /2 -> /3) under a 1.2 s resource timeout: each hop alone is
        // within it, the task is not. Apple fails the task with -1001 when the timeout ends.
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        let origin = try await ScriptedServer.start { inbound, outbound in
            var pending = ""
            for try await chunk in inbound {
                pending += String(buffer: chunk)
                while let end = pending.range(of: "\r\n\r\n") {
                    let path = pending[..<end.lowerBound].split(separator: " ").dropFirst().first ?? "/3"
                    pending = String(pending[end.upperBound...])
                    try await Task.sleep(for: .milliseconds(600))  // a slow origin, not the test waiting
                    let hop = Int(path.dropFirst()) ?? 3
                    let response =
                        hop >= 3
                        ? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                        : "HTTP/1.1 302 Found\r\nLocation: /\(hop + 1)\r\nContent-Length: 0\r\n\r\n"
                    try await outbound.write(ByteBuffer(string: response))
                }
            }
        }
        let configuration = interception.enabled(.ephemeral)
        configuration.timeoutIntervalForResource = 1.2
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        do {
            let (_, response) = try await session.data(from: URL(string: "http://a.test:\(origin.port)/1")!)
            Issue.record("three hops outlived the resource timeout: \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        } catch let error as URLError {
            #expect(error.code == .timedOut, "\(error)")
        }
        await origin.stop()
    }

    @Test func aHundredthSessionKeepsItsOwnHeadersAndCookies() async throws {
        // Apple's loading system does not tell a URLProtocol its session: there each configuration gets a
        // slot (URLLoadingRulesTests proves the rule); corelibs shows the session. Either way a 100th
        // session reads its own settings, not none and not another's.
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        var sessions: [URLSession] = []
        defer { for session in sessions { session.invalidateAndCancel() } }
        for n in 0..<100 {
            let configuration = URLSessionConfiguration.ephemeral
            interception.enable(on: configuration)
            // Set after enabling, before the session is made: what the session copies is what counts.
            configuration.httpAdditionalHeaders = ["User-Agent": "Session/\(n)"]
            sessions.append(URLSession(configuration: configuration))
        }
        for n in [0, 16, 99] {
            let (data, _) = try await sessions[n].data(from: URL(string: peers.url("a.test", "/ua"))!)
            #expect(text(data).hasPrefix("ua=Session/\(n) "), "\(n): \(text(data))")
        }
        // Cookies go to the session's own storage (an ephemeral one), not to another session's.
        _ = try await sessions[99].data(from: URL(string: peers.url("a.test", "/cookie/set"))!)
        let (mine, _) = try await sessions[99].data(from: URL(string: peers.url("a.test", "/cookie/show"))!)
        let (other, _) = try await sessions[98].data(from: URL(string: peers.url("a.test", "/cookie/show"))!)
        #expect(text(mine).hasPrefix("cookie=") && text(mine) != "cookie=\n", "\(text(mine))")
        if sessions[98].configuration.httpCookieStorage !== sessions[99].configuration.httpCookieStorage {
            #expect(text(other) == "cookie=\n", "\(text(other))")
        }
    }

    enum Upload: String, CaseIterable { case httpBody, stream, uploadTaskFile }

    @Test(arguments: Upload.allCases)
    func postFiftyMegabytesByteExact(_ kind: Upload) async throws {
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        var payload = [UInt8](repeating: 0, count: 50 * 1024 * 1024)
        for i in stride(from: 0, to: payload.count, by: 4096) { payload[i] = UInt8(truncatingIfNeeded: i / 4096 &* 31) }
        let digest = SHA256.hash(data: payload).map { String(format: "%02x", $0) }.joined()
        var request = URLRequest(url: URL(string: peers.url("a.test", "/echo"))!)
        request.httpMethod = "POST"
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-upload-\(UUID())")
        defer { try? FileManager.default.removeItem(at: file) }
        let data: Data
        switch kind {
        case .httpBody:
            request.httpBody = Data(payload)
            (data, _) = try await session().data(for: request)
        case .stream:
            try Data(payload).write(to: file)
            request.httpBodyStream = InputStream(url: file)
            (data, _) = try await session().data(for: request)
        case .uploadTaskFile:
            try Data(payload).write(to: file)
            (data, _) = try await session().upload(for: request, fromFile: file)
        }
        let echo = try JSONDecoder().decode(Echo.self, from: data)
        #expect(echo.method == "POST")
        #expect(echo.length == payload.count)
        #expect(echo.sha256 == digest)
        #expect(echo.sni == "a.test")
    }

    @Test func redirectChainAsksTheDelegateAtEachHopWithTheRightMethod() async throws {
        let peers = try Peers.require()
        let (setup, log) = try install(peers)
        defer { setup.engine.shutdown() }
        let recorder = RedirectRecorder()
        let session = session(delegate: recorder)
        // POST through 301 → 302 → 307: the 301 turns it into a GET without a body, which 302 and 307 keep.
        var post = URLRequest(url: URL(string: peers.url("a.test", "/r/start"))!)
        post.httpMethod = "POST"
        post.httpBody = Data("first body".utf8)
        let (data, response) = try await session.data(for: post)
        let echo = try JSONDecoder().decode(Echo.self, from: data)
        #expect(echo.method == "GET" && echo.length == 0 && echo.uri == "/r/final")
        #expect((response as? HTTPURLResponse)?.url?.path == "/r/final")
        #expect(recorder.hops.map(\.status) == [301, 302, 307])
        #expect(recorder.hops.map(\.method) == ["GET", "GET", "GET"])
        #expect(recorder.hops.allSatisfy { $0.bodyBytes == nil })
        // Cross-host 307 from b.test to a.test: method and body kept, the next hop resolved again with its
        // own SNI and Host.
        var cross = URLRequest(url: URL(string: peers.url("b.test", "/r/to-a-echo"))!)
        cross.httpMethod = "POST"
        cross.httpBody = Data("kept body".utf8)
        let (crossData, _) = try await session.data(for: cross)
        let crossEcho = try JSONDecoder().decode(Echo.self, from: crossData)
        #expect(crossEcho.method == "POST" && crossEcho.length == 9)
        #expect(
            crossEcho.sha256 == SHA256.hash(data: Data("kept body".utf8)).map { String(format: "%02x", $0) }.joined()
        )
        #expect(crossEcho.sni == "a.test" && crossEcho.host?.hasPrefix("a.test") == true)
        let last = try #require(recorder.hops.last)
        #expect(last.status == 307 && last.method == "POST" && last.bodyBytes == 9 && last.to.contains("a.test"))
        #expect(log.all.last?.hops.map(\.status) == [307, 200])
    }

    @Test func aDelegateRefusingARedirectGetsTheRedirectResponse() async throws {
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        let recorder = RedirectRecorder(refuse: true)
        let (_, response) = try await session(delegate: recorder).data(
            for: URLRequest(url: URL(string: peers.url("a.test", "/r/start"))!)
        )
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 301)
        #expect(http.value(forHTTPHeaderField: "Location")?.hasSuffix("/r/two") == true)
        #expect(recorder.hops.count == 1)
    }

    @Test func cookiesAreSentToMatchingDomainsAndPathsOnly() async throws {
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        let session = session()
        func show(_ host: String, _ path: String = "/cookie/show") async throws -> String {
            let url = URL(string: "http://\(host):\(peers.nginxHTTP)\(path)")!
            return text(try await session.data(for: URLRequest(url: url)).0)
        }
        _ = try await show("a.test", "/cookie/set")
        let same = try await show("a.test")
        #expect(same.contains("sid=s1") && same.contains("wide=w1"), "\(same)")
        #expect(!same.contains("scoped=") && !same.contains("foreign="), "\(same)")
        #expect(try await show("a.test", "/cookie/only/x").contains("scoped=p1"))
        let sub = try await show("sub.a.test")
        #expect(sub.contains("wide=w1") && !sub.contains("sid="), "\(sub)")
        #expect(try await show("evila.test") == "cookie=\n")
        #expect(try await show("b.test") == "cookie=\n")  // a.test may not set a cookie for b.test
        // With httpShouldHandleCookies off, nothing is added.
        var bare = URLRequest(url: URL(string: "http://a.test:\(peers.nginxHTTP)/cookie/show")!)
        bare.httpShouldHandleCookies = false
        #expect(text(try await session.data(for: bare).0) == "cookie=\n")
    }

    @Test func cancellingALargeDownloadResetsOnlyItsStream() async throws {
        let peers = try Peers.require()
        let (setup, log) = try install(peers)
        defer { setup.engine.shutdown() }
        let probe = DownloadProbe(cancelAfterFirstChunk: true)
        let session = session(delegate: probe)
        session.dataTask(with: URL(string: peers.url("a.test", "/files/big.bin"))!).resume()
        let error = await probe.completion()
        #expect((error as? URLError)?.code == .cancelled)
        #expect(probe.bytes < 64 * 1024 * 1024)
        // The h2 connection survives the reset stream: the next request reuses it.
        let (data, _) = try await session.data(for: URLRequest(url: URL(string: peers.url("a.test", "/"))!))
        #expect(text(data).contains("server=a.test"))
        #expect(log.all.last?.hops.last?.reused == true)
        #expect(setup.engine.openConnections == 1)
    }

    @Test func twoHundredConcurrentTasksShareMultiplexedConnections() async throws {
        let peers = try Peers.require()
        let (setup, log) = try install(peers)
        defer { setup.engine.shutdown() }
        let session = session()
        let statuses = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for i in 0..<200 {
                let host = i % 2 == 0 ? "a.test" : "b.test"
                group.addTask {
                    let (data, response) = try await session.data(
                        for: URLRequest(url: URL(string: peers.url(host, "/whoami"))!)
                    )
                    let body = String(decoding: data, as: UTF8.self)
                    return ((response as? HTTPURLResponse)?.statusCode ?? 0, body.contains("sni=\(host)"))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.count == 200)
        #expect(statuses.allSatisfy { $0.0 == 200 && $0.1 })
        #expect(log.all.count == 200)
        #expect(setup.engine.openConnections <= 4)
    }

    @Test func hostsOutsideThePolicyIPLiteralsAndMarkedRequestsAreNotIntercepted() async throws {
        let peers = try Peers.require()
        let (setup, log) = try install(peers)
        defer { setup.engine.shutdown() }
        let local = URL(string: "http://localhost:\(peers.nginxHTTP)/")!
        #expect(!interception.protocolClass.canInit(with: URLRequest(url: local)))
        #expect(
            !interception.protocolClass.canInit(
                with: URLRequest(url: URL(string: "http://127.0.0.1:\(peers.nginxHTTP)/")!)
            )
        )
        var marked = URLRequest(url: URL(string: peers.url("a.test", "/"))!)
        #expect(interception.protocolClass.canInit(with: marked))
        HTTPDNSURLProtocol.markHandled(&marked)
        #expect(!interception.protocolClass.canInit(with: marked))
        #expect(!interception.protocolClass.canInit(with: URLRequest(url: URL(string: "ftp://a.test/")!)))
        // The request outside the policy goes through URLSession's own loading (libcurl) and works.
        let (data, _) = try await session().data(for: URLRequest(url: local))
        #expect(text(data).contains("server=http host=localhost"))
        #expect(log.all.isEmpty)
        // A resolver left at the library default selects nothing.
        var config = ResolverConfiguration(providers: [.system])
        config.policy = .none
        let idle = try HTTPDNSURLProtocol.Setup(
            resolver: try HTTPDNSResolver(configuration: config, engine: peers.engine())
        )
        let idleInterception = Interception(idle)
        #expect(!idleInterception.protocolClass.canInit(with: URLRequest(url: URL(string: peers.url("a.test", "/"))!)))
        // An interception that ended takes nothing.
        #expect(interception.protocolClass.canInit(with: URLRequest(url: URL(string: peers.url("a.test", "/"))!)))
        interception.end()
        #expect(!interception.protocolClass.canInit(with: URLRequest(url: URL(string: peers.url("a.test", "/"))!)))
    }

    @Test func listedHTTPHostsAreUpgradedToHTTPSWithHTTP2AndAUserAgent() async throws {
        let peers = try Peers.require()
        let (setup, _) = try install(peers) { $0.upgradeToHTTPS = [try! HostPattern("a.test")] }
        defer { setup.engine.shutdown() }
        // The URL names nginx's TLS port with http://: only an upgrade can make this work.
        let (data, response) = try await session().data(
            for: URLRequest(url: URL(string: "http://a.test:\(peers.nginxTLS)/ua")!)
        )
        // The system's own User-Agent, as URLSession would send it.
        #expect(text(data).hasPrefix("ua=\(SystemRequestDefaults.current.userAgent) "), "\(text(data))")
        #expect(text(data).contains("scheme=https proto=HTTP/2.0"))
        #expect(response.url?.scheme == "https")
    }

    @Test func aChallengeWithoutRealmNeitherHangsNorCrashes() async throws {
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        var request = URLRequest(url: URL(string: peers.url("a.test", "/auth"))!)
        request.timeoutInterval = 10
        let (data, response) = try await session().data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 401 && text(data) == "denied\n")
        #expect(http.value(forHTTPHeaderField: "X-HTTPDNS-WWW-Authenticate") == "Bearer")
    }

    @Test func theRequestTimeoutBoundsASilentServer() async throws {
        let peers = try Peers.require()
        let (setup, _) = try install(peers)
        defer { setup.engine.shutdown() }
        let silent = try await startSilentTCP()
        defer { Task { try? await silent.0.close() } }
        var request = URLRequest(url: URL(string: "https://a.test:\(silent.1)/")!)
        request.timeoutInterval = 1
        await #expect {
            _ = try await session().data(for: request)
        } throws: { ($0 as? URLError)?.code == .timedOut }
    }

    @Test func aServerClosingMidBodyFailsTheTaskWithAURLError() async throws {
        let peers = try Peers.require()
        let (setup, log) = try install(peers)
        defer { setup.engine.shutdown() }
        let liar = try await startRawTCP(answer: "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
        defer { Task { try? await liar.0.close() } }
        let url = URL(string: "http://a.test:\(liar.1)/")!
        await #expect {
            _ = try await session().data(for: URLRequest(url: url))
        } throws: { ($0 as? URLError)?.code == .networkConnectionLost }
        // The same through a delegate, which had already been given the first bytes.
        let probe = DownloadProbe(cancelAfterFirstChunk: false)
        session(delegate: probe).dataTask(with: url).resume()
        let error = await probe.completion()
        #expect((error as? URLError)?.code == .networkConnectionLost)
        #expect(log.all.count == 2 && log.all.allSatisfy { $0.error != nil })
    }

    @Test func legacyHelpersGiveCurlAndAsyncHTTPClientTheAddresses() async throws {
        let peers = try Peers.require()
        let resolver = try peers.resolver()
        let entries = try await resolver.curlResolveEntries([(host: "a.test", port: peers.nginxTLS)])
        #expect(entries.count == 1 && entries[0].hasPrefix("a.test:\(peers.nginxTLS):"))
        let curl = try await runProcess(
            "/usr/bin/curl",
            ["-sS", "--max-time", "10", "--cacert", peers.ca, "--resolve", entries[0], peers.url("a.test", "/")]
        )
        #expect(curl.stdout.contains("server=a.test host=a.test sni=a.test"), "\(curl.stderr)")
        #expect(try await resolver.dnsOverride(for: ["b.test"]) == ["b.test": "127.0.0.1"])
        let rewrite = try await resolver.ipDirectURL(for: URL(string: "http://a.test:\(peers.nginxHTTP)/whoami")!)
        #expect(rewrite.url.absoluteString == "http://127.0.0.1:\(peers.nginxHTTP)/whoami")
        let player = try await runProcess(
            "/usr/bin/curl",
            ["-sS", "--max-time", "10", "-H", "Host: \(rewrite.headers["Host"]!)", rewrite.url.absoluteString]
        )
        #expect(player.stdout.contains("host=a.test"))
        await #expect {
            _ = try await resolver.ipDirectURL(for: URL(string: "https://a.test/")!)
        } throws: { ($0 as? ResolverError)?.code == .notRewritable }
    }
}
