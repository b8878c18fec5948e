// The IP-direct engine against nginx (SNI certificates on one IP and port, h2 and HTTP/1.1), with
// names resolved by kresd DoH while the system resolver would give wrong answers.

import Crypto
import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

@Suite(.enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct EngineTests {
    @Test(arguments: [HTTPVersionPolicy.http2Only, .http1Only])
    func eachNameGetsItsOwnCertificateByItsSNI(_ versions: HTTPVersionPolicy) async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine { $0.http.versions = versions }
        defer { engine.shutdown() }
        for name in ["a.test", "b.test"] {
            let response = try await engine.execute(try HTTPEngineRequest(url: peers.url(name, "/")))
            let body = try await text(response)
            #expect(body.contains("server=\(name) host=\(name) sni=\(name)"), "\(body)")
            #expect(body.contains(versions == .http2Only ? "HTTP/2.0" : "HTTP/1.1"))
            #expect(response.version == (versions == .http2Only ? .http2 : .http1))
            let m = response.metrics
            #expect(m.dnsSource?.description.hasPrefix("doh:") == true)
            #expect(m.ip == "127.0.0.1" || m.ip == "::1")
        }
    }

    @Test func addressServingAnotherNamesCertificateIsRejected() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        // c.test resolves to nginx's IP, which has no c.test certificate: it presents its default one
        // (DNS:default.test plus an IP SAN for 127.0.0.1). The IP SAN must not stand in for the name.
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: peers.url("c.test", "/")))
            Issue.record("accepted a certificate that does not name c.test")
        } catch let e as HTTPEngineError {
            #expect(e.code == .certificateNameMismatch)
            #expect(e.description.contains("not valid for c.test"))
            #expect(e.description.contains("127.0.0.1:\(peers.nginxTLS)"))
        }
    }

    @Test func ipLiteralURLSendsNoSNIAndIsCheckedAgainstTheIP() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        let response = try await engine.execute(
            try HTTPEngineRequest(url: "https://127.0.0.1:\(peers.nginxTLS)/whoami")
        )
        let body = try await text(response)
        #expect(body.contains("sni= "), "\(body)")
        #expect(response.metrics.dnsSource == .literal)
    }

    @Test(arguments: [HTTPVersionPolicy.http2Only, .http1Only])
    func fiftyMegabytePostArrivesByteExact(_ versions: HTTPVersionPolicy) async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine { $0.http.versions = versions }
        defer { engine.shutdown() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-50mb-\(UUID()).bin").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        // From the kernel: a Swift loop over 50 MB in a debug build would starve the test's threads.
        let bytes = try #require(try FileHandle(forReadingAtPath: "/dev/urandom")?.read(upToCount: 50 * 1024 * 1024))
        #expect(bytes.count == 50 * 1024 * 1024)
        try bytes.write(to: URL(fileURLWithPath: path))
        let digest = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        let request = try HTTPEngineRequest(method: .POST, url: peers.url("a.test", "/echo"), body: .file(path))
        let response = try await engine.execute(request)
        let echo = try JSONDecoder().decode(Echo.self, from: Data(try await text(response).utf8))
        #expect(echo.length == bytes.count)
        #expect(echo.sha256 == digest)
        #expect(response.metrics.bytesSent == bytes.count)
    }

    @Test func cancellingOneDownloadLeavesTheOtherStreamsOnTheConnectionAlone() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine { $0.http.versions = .http2Only }
        defer { engine.shutdown() }
        let size = try FileManager.default.attributesOfItem(atPath: peers.www + "/big.bin")[.size] as! Int
        let url = peers.url("a.test", "/files/big.bin")
        // Warm up: one connection.
        _ = try await text(try await engine.execute(try HTTPEngineRequest(url: peers.url("a.test", "/whoami"))))
        let cancelled = Task {
            let response = try await engine.execute(try HTTPEngineRequest(url: url))
            var received = 0
            for try await chunk in response.body {
                received += chunk.readableBytes
                if received > 2 << 20 { break }  // stop reading: the stream is reset
            }
            return received
        }
        let others = (0..<3).map { _ in
            Task { () -> (Int, Bool) in
                let response = try await engine.execute(try HTTPEngineRequest(url: url))
                var received = 0
                for try await chunk in response.body { received += chunk.readableBytes }
                return (received, response.metrics.reused)
            }
        }
        let partial = try await cancelled.value
        #expect(partial < size)
        for task in others {
            let (received, reused) = try await task.value
            #expect(received == size)
            #expect(reused)
        }
        #expect(engine.openConnections == 1)
        // The connection still works after the reset.
        #expect(try await engine.execute(try HTTPEngineRequest(url: peers.url("a.test", "/whoami"))).status == .ok)
    }

    @Test func http1KeepAliveConnectionIsReused() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine { $0.http.versions = .http1Only }
        defer { engine.shutdown() }
        let first = try await engine.execute(try HTTPEngineRequest(url: peers.url("a.test", "/whoami")))
        _ = try await text(first)
        #expect(!first.metrics.reused)
        #expect(first.metrics.connect != nil)
        let second = try await engine.execute(try HTTPEngineRequest(url: peers.url("a.test", "/whoami")))
        _ = try await text(second)
        #expect(second.metrics.reused)
        #expect(second.metrics.connect == nil)
        #expect(engine.openConnections == 1)
    }

    @Test func anIdleKeptAliveConnectionClosesAfterTheIdleTimeoutNotBefore() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine {
            $0.http.versions = .http1Only
            $0.idleConnectionTimeout = .milliseconds(400)
        }
        defer { engine.shutdown() }
        // Busy for longer than the idle timeout: the connection is reused throughout (its one idle
        // timer re-arms for the time left instead of closing a connection in use). The 900 ms of
        // requests are the scenario, not a wait.
        let started = ContinuousClock.now
        var requests = 0
        while ContinuousClock.now - started < .milliseconds(900) {
            let response = try await engine.execute(try HTTPEngineRequest(url: peers.url("a.test", "/whoami")))
            _ = try await text(response)
            if requests > 0 { #expect(response.metrics.reused) }
            requests += 1
        }
        #expect(engine.openConnections == 1)
        // Then idle: closed by the idle timer (400 ms); the deadline only bounds a timer that never fires.
        try await eventually("the idle connection is closed") { engine.openConnections == 0 }
    }

    @Test func hundredConcurrentRequestsShareOneHTTP2Connection() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    let r = try await engine.execute(try HTTPEngineRequest(url: peers.url("b.test", "/whoami")))
                    _ = try await text(r)
                    return Int(r.status.code)
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 100)
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(engine.openConnections == 1)
    }

    @Test func anHTTPSHostThatSpeaksOnlyHTTP1GetsAConnectionPerRequestInFlight() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine { $0.http.maxConnectionsPerHost = 8 }
        defer { engine.shutdown() }
        // Eight responses held at their heads (their 64 MiB bodies unread) need eight connections at
        // once. ALPN offers h2 and nginx takes http/1.1 on this port: the first request connects alone
        // (it might have been h2), the other seven open theirs together once the answer is known.
        let url = "https://a.test:\(peers.nginxH1TLS)/files/big.bin"
        let responses = try await withThrowingTaskGroup(of: HTTPEngineResponse.self) { group in
            for _ in 0..<8 { group.addTask { try await engine.execute(try HTTPEngineRequest(url: url)) } }
            return try await group.reduce(into: [HTTPEngineResponse]()) { $0.append($1) }
        }
        #expect(responses.allSatisfy { $0.version == .http1 && $0.status == .ok && !$0.metrics.reused })
        #expect(engine.openConnections == 8)
    }

    @Test func redirectChainChangesPostToGetWhere301And302SaySo() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        let request = try HTTPEngineRequest(
            method: .POST,
            url: peers.url("a.test", "/r/start"),
            body: .bytes(Array("hello".utf8))
        )
        let response = try await engine.send(request, followRedirects: 5)
        let echo = try JSONDecoder().decode(Echo.self, from: Data(try await text(response).utf8))
        #expect(echo.method == "GET")  // 301 turned POST into GET, 302 and 307 kept GET
        #expect(echo.length == 0)
        #expect(echo.uri == "/r/final")
        #expect(response.metrics.redirects == 3)
    }

    @Test(arguments: ["/r/three", "/r/308"])
    func temporaryAndPermanentRedirectsKeepMethodAndBody(_ path: String) async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        let body = Array("keep me".utf8)
        let response = try await engine.send(
            try HTTPEngineRequest(method: .POST, url: peers.url("a.test", path), body: .bytes(body)),
            followRedirects: 5
        )
        let echo = try JSONDecoder().decode(Echo.self, from: Data(try await text(response).utf8))
        #expect(echo.method == "POST")
        #expect(echo.sha256 == SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined())
        #expect(response.metrics.redirects == 1)
    }

    @Test func crossHostRedirectIsResolvedAgainWithTheNewSNI() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        let response = try await engine.send(
            try HTTPEngineRequest(url: peers.url("a.test", "/r/to-b")),
            followRedirects: 5
        )
        let body = try await text(response)
        #expect(body.contains("host=b.test sni=b.test"), "\(body)")
        #expect(response.url.host == "b.test")
        #expect(response.metrics.redirects == 1)
        // Not followed unless asked: the 302 comes back as it is.
        let unfollowed = try await engine.send(try HTTPEngineRequest(url: peers.url("a.test", "/r/to-b")))
        #expect(unfollowed.status == .found)
        #expect(unfollowed.headers.first(name: "location")?.contains("b.test") == true)
    }

    @Test func redirectLoopStopsAtTheHopLimit() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        do {
            _ = try await engine.send(try HTTPEngineRequest(url: peers.url("a.test", "/r/loop")), followRedirects: 4)
            Issue.record("followed a redirect loop forever")
        } catch let e as HTTPEngineError {
            #expect(e.code == .tooManyRedirects)
        }
    }

    @Test func gzipResponseIsDecompressedWhenAsked() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        let original = try Data(contentsOf: URL(fileURLWithPath: peers.www + "/text.txt"))
        var request = try HTTPEngineRequest(url: peers.url("a.test", "/text"))
        request.decompress = true
        let response = try await engine.execute(request)
        #expect(response.headers.first(name: "content-encoding") == "gzip")
        let body = try await response.body.collect(upTo: 10 << 20)
        #expect(Data(body.readableBytesView) == original)
        let plain = try await engine.execute(try HTTPEngineRequest(url: peers.url("a.test", "/text")))
        #expect(plain.headers.first(name: "content-encoding") == nil)
        #expect(try await plain.body.collect(upTo: 10 << 20).readableBytes == original.count)
    }

    @Test func h2cPriorKnowledgeOverPlainHTTP() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine { $0.http.http2PriorKnowledge = true }
        defer { engine.shutdown() }
        let response = try await engine.execute(try HTTPEngineRequest(url: "http://127.0.0.1:\(peers.nginxH2C)/"))
        #expect(response.version == .http2)
        #expect(try await text(response).contains("server=h2c"))
    }

    @Test func requestsCaughtByAServersGOAWAYAreSentAgainOnANewConnection() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine { $0.http.http2PriorKnowledge = true }
        defer { engine.shutdown() }
        // This port's nginx sends GOAWAY after 20 streams (as it does after 1000 by default). With 10 in
        // flight, streams opened after its last one are refused unprocessed, and streams handed out as
        // it closes never get written: each such GET goes again on a new connection, so every request
        // gets its response head. (A body nginx cuts short as it closes is reported, not retried: its
        // head is already the caller's. Counted apart, and rare.)
        let url = "http://127.0.0.1:\(peers.nginxH2C)/whoami"
        let (complete, cutShort) = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for _ in 0..<10 {
                group.addTask {
                    var complete = 0
                    var cutShort = 0
                    for _ in 0..<30 {
                        let response = try await engine.execute(try HTTPEngineRequest(url: url))
                        #expect(response.status == .ok)
                        do {
                            if try await text(response).contains("proto=HTTP/2.0") { complete += 1 }
                        } catch let e as HTTPEngineError where e.code == .protocolError {
                            cutShort += 1
                        }
                    }
                    return (complete, cutShort)
                }
            }
            return try await group.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
        }
        #expect(complete + cutShort == 300)
        #expect(cutShort <= 3, "\(cutShort) bodies cut short")
    }

    @Test func publicKeyPinsAreEnforced() async throws {
        let peers = try Peers.require()
        let pem = try String(contentsOfFile: peers.www + "/../certs/a.test.pem", encoding: .utf8)
        let spki = try NIOSSLCertificateSPKI.digest(pem: pem)
        let good = try peers.appEngine { $0.tls.pins = ["a.test": [spki]] }
        defer { good.shutdown() }
        #expect(try await good.execute(try HTTPEngineRequest(url: peers.url("a.test", "/"))).status == .ok)
        // The CA's key pins the chain it signs, as TrustKit and NSPinnedDomains pin a CA (the leaf can
        // then be renewed with a new key).
        let caPin = try NIOSSLCertificateSPKI.digest(pem: String(contentsOfFile: peers.ca, encoding: .utf8))
        let ca = try peers.appEngine { $0.tls.pins = ["a.test": [caPin]] }
        defer { ca.shutdown() }
        #expect(try await ca.execute(try HTTPEngineRequest(url: peers.url("a.test", "/"))).status == .ok)
        let bad = try peers.appEngine { $0.tls.pins = ["a.test": ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]] }
        defer { bad.shutdown() }
        do {
            _ = try await bad.execute(try HTTPEngineRequest(url: peers.url("a.test", "/")))
            Issue.record("accepted a key that is not pinned")
        } catch let e as HTTPEngineError {
            #expect(e.code == .pinMismatch)
            #expect(e.description.contains("pin"))
        }
    }

    /// The app's say on certificates (ServerTrustEvaluation, what a URLSession delegate answers through):
    /// asked on a name mismatch with the chain, its acceptance honoured, its "our check" keeping the
    /// verdict, and pins never overruled. zzz.test is in no certificate: nginx answers with its default.
    @Test func theAppDecidesOnANameMismatchButNeverOnAPin() async throws {
        let peers = try Peers.require()
        let engine = try peers.appEngine()
        defer { engine.shutdown() }
        let addresses = ResolvedAddresses(ipv4: [IPAddress("127.0.0.1")!], ipv6: [], source: .staticHosts)
        let asked = NIOLockedValueBox<[ServerTrustQuestion]>([])
        let request = try HTTPEngineRequest(url: peers.url("zzz.test", "/whoami"))
        func terms(_ answer: ServerTrustAnswer, partition: UInt64) -> ConnectionProfile.Terms {
            var terms = ConnectionProfile.Terms()
            terms.serverTrust = ServerTrustEvaluation(partition: partition, always: false) { question in
                asked.withLockedValue { $0.append(question) }
                return answer
            }
            return terms
        }
        let accepted = try await engine.execute(request, terms: terms(.accept, partition: 1), addresses: addresses)
        #expect(accepted.status == .ok)
        let question = try #require(asked.withLockedValue { $0.first })
        #expect(question.failure?.code == .certificateNameMismatch && question.host == "zzz.test")
        let leaf = try NIOSSLCertificate(bytes: try #require(question.chain.first), format: .der)
        let pem = try String(contentsOfFile: peers.www + "/../certs/default.test.pem", encoding: .utf8)
        #expect(try leaf == NIOSSLCertificate(bytes: Array(pem.utf8), format: .pem))

        do {
            _ = try await engine.execute(request, terms: terms(.ourCheck, partition: 2), addresses: addresses)
            Issue.record("our check's verdict was not kept")
        } catch let e as HTTPEngineError {
            #expect(e.code == .certificateNameMismatch)
        }
        // Without an evaluation the engine never asks, and never uses the accepted connection.
        do {
            _ = try await engine.execute(
                try HTTPEngineRequest(url: peers.url("zzz.test", "/whoami")),
                addresses: addresses
            )
            Issue.record("a request without the app's acceptance used its connection")
        } catch let e as HTTPEngineError {
            #expect(e.code == .certificateNameMismatch)
        }
        let pinned = try peers.appEngine {
            $0.tls.pins = ["zzz.test": ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]]
        }
        defer { pinned.shutdown() }
        do {
            _ = try await pinned.execute(request, terms: terms(.accept, partition: 3), addresses: addresses)
            Issue.record("an acceptance overruled a pin")
        } catch let e as HTTPEngineError {
            #expect(e.code == .pinMismatch)
        }
    }

    // MARK: The pool's connects

    /// An engine that resolves a.test to 127.0.0.1, so a URL can name any port (the relay's).
    func relayEngine(_ peers: Peers) throws -> HTTPEngine {
        var config = HTTPEngine.Configuration()
        config.tls = HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: peers.ca))
        let addresses = StaticAddressSource(["a.test": [IPAddress("127.0.0.1")!]])
        return try HTTPEngine(configuration: config, addressSource: addresses, logger: testLogger)
    }

    /// One GET within `timeout`: the body, or the engine's error.
    func get(_ engine: HTTPEngine, _ url: String, timeout: Duration) async -> Result<String, HTTPEngineError> {
        do {
            var request = try HTTPEngineRequest(url: url)
            request.timeout = timeout
            return .success(try await text(try await engine.execute(request)))
        } catch let error as HTTPEngineError {
            return .failure(error)
        } catch {
            return .failure(HTTPEngineError(.invalidRequest, "\(error)"))
        }
    }

    /// A phone network resets one handshake: the pool connects again for the requests whose deadlines
    /// allow, instead of failing every request that waited for that first connection (which it did).
    @Test func aResetFirstConnectionIsTriedAgainAndBothConcurrentRequestsSucceed() async throws {
        let peers = try Peers.require()
        let relay = try await FlakyRelay.start(
            to: try SocketAddress(ipAddress: "127.0.0.1", port: peers.nginxTLS),
            faults: [.reset]
        )
        let engine = try relayEngine(peers)
        defer { engine.shutdown() }
        let url = "https://a.test:\(relay.port)/"
        async let first = get(engine, url, timeout: .seconds(5))
        async let second = get(engine, url, timeout: .seconds(5))
        for result in await [first, second] {
            let body = try result.get()
            #expect(body.contains("server=a.test host=a.test sni=a.test"), "\(body)")
        }
        // The reset one, then one h2 connection for both.
        #expect(relay.accepted == 2)
        await relay.close()
    }

    /// A slow connect: the request whose deadline passes first fails alone, with its own timeout; the
    /// other gets the connection when it opens.
    @Test func aSlowConnectFailsOnlyTheRequestWhoseDeadlineIsShort() async throws {
        let peers = try Peers.require()
        let relay = try await FlakyRelay.start(
            to: try SocketAddress(ipAddress: "127.0.0.1", port: peers.nginxTLS),
            faults: [.delay(.milliseconds(1500))]
        )
        let engine = try relayEngine(peers)
        defer { engine.shutdown() }
        let url = "https://a.test:\(relay.port)/"
        async let patient = get(engine, url, timeout: .seconds(20))
        try await eventually("the first connect reached the relay") { relay.accepted == 1 }
        let hurried = await get(engine, url, timeout: .milliseconds(300))
        #expect(throws: HTTPEngineError(.totalTimeout, "")) { try hurried.get() }
        let body = try await patient.get()
        #expect(body.contains("server=a.test"), "\(body)")
        #expect(relay.accepted == 1)
        await relay.close()
    }
}
