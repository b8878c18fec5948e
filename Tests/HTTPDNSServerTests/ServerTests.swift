// The HTTPDNS server: every format, answered to our own resolver (every provider kind), to real DoH
// clients (curl --doh-url, dig +https), forwarding to a real upstream (kresd), and hostile input.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

@Suite struct ServerFormatTests {
    @Test(arguments: ["doh", "doh-post", "doh-json", "dnspod", "json"])
    func everyProviderKindResolvesAgainstOurServer(_ kind: String) async throws {
        let service = try await startService()
        defer { Task { await service.stop() } }
        let path = [
            "doh": "/dns-query", "doh-post": "/dns-query", "doh-json": "/dns-query", "dnspod": "/d", "json": "/resolve",
        ][kind]!
        var config = ResolverConfiguration(providers: [
            try ResolverSpec(parsing: "\(kind):http://127.0.0.1:\(service.ports[0])\(path)")
        ])
        config.policy = .all
        config.fallbackToLocalDNS = false
        // Not a test of timeouts: a bound a starved 2-core machine cannot miss.
        config.timeout = .seconds(60)
        let resolver = try HTTPDNSResolver(configuration: config, engine: try HTTPEngine(), logger: testLogger)
        let r = try await resolver.resolve("a.example.com")
        #expect(r.ipv4 == [IPAddress("198.51.0.1")!])
        #expect(r.ipv6 == [IPAddress("2606:4700::1")!])
        #expect(r.ttl == 90)
        // NODATA for the missing family, NXDOMAIN for unknown names.
        let v4only = try await resolver.resolve("v4.example.com")
        #expect(v4only.ipv6.isEmpty)
        do {
            _ = try await resolver.resolve("unknown.example.com")
            Issue.record("an unknown name resolved")
        } catch let e as ResolverError {
            #expect(e.code == .noAddress)
        }
    }

    @Test func dnspodBatchAndDualStackLines() async throws {
        let service = try await startService()
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        let (s1, single) = try await rawGet(engine, base + "/d?dn=a.example.com&ttl=1")
        #expect(s1 == 200)
        #expect(single == "198.51.0.1,90")
        let (_, dual) = try await rawGet(engine, base + "/d?dn=a.example.com&type=addrs&ttl=1&ip=203.0.113.9")
        #expect(dual == "198.51.0.1,90-2606:4700::1,90")
        let (_, batch) = try await rawGet(engine, base + "/d?dn=a.example.com,nope.example.com,v4.example.com")
        #expect(batch == "a.example.com.:198.51.0.1\nnope.example.com.:0\nv4.example.com.:198.51.0.2")
        let (_, health) = try await rawGet(engine, base + "/healthz")
        #expect(health == "ok\n")
    }

    @Test func h2cPriorKnowledgeIsServedOnPlainListeners() async throws {
        let service = try await startService()
        defer { Task { await service.stop() } }
        var config = HTTPEngine.Configuration()
        config.http.http2PriorKnowledge = true
        let engine = try HTTPEngine(configuration: config)
        defer { engine.shutdown() }
        let response = try await engine.execute(
            try HTTPEngineRequest(url: "http://127.0.0.1:\(service.ports[0])/resolve?host=a.example.com&query=4,6")
        )
        #expect(response.version == .http2)
        let body = String(buffer: try await response.body.collect(upTo: 1 << 16))
        #expect(body.contains("\"ips\":[\"198.51.0.1\"]"))
    }

    @Test(arguments: [
        ("/d", "missing dn"),
        ("/d?dn=a..b", "dn:"),
        ("/d?dn=" + (0..<51).map { "n\($0).example.com" }.joined(separator: ","), "at most 50"),
        ("/d?dn=a.example.com&type=mx", "type=mx"),
        ("/resolve?host=", "missing host"),
        ("/resolve?host=a.example.com&query=5", "query=5"),
        ("/dns-query?dns=***", "base64url"),
        ("/dns-query?dns=AAAB", "malformed DNS message"),
        ("/dns-query", "missing dns="),
        ("/dns-query?name=a.example.com&type=TXT", "type=TXT"),
    ])
    func malformedRequestsGet400WithAReasonAndTheServerLivesOn(_ path: String, _ reason: String) async throws {
        let service = try await startService()
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        let (status, body) = try await rawGet(engine, base + path)
        #expect(status == 400)
        #expect(body.contains(reason), "\(body)")
        #expect(body.split(separator: "\n").count == 1)
        #expect(try await rawGet(engine, base + "/healthz").0 == 200)
    }

    @Test func hostileBodiesAndMethods() async throws {
        let service = try await startService { $0.limits.maxRequestBytes = 4096 }
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        #expect(
            try await rawGet(
                engine,
                base + "/dns-query",
                method: .POST,
                headers: ["content-type": "application/dns-message"],
                body: [1, 2, 3]
            ).0 == 400
        )
        #expect(
            try await rawGet(
                engine,
                base + "/dns-query",
                method: .POST,
                body: try DNSMessage.query(name: "a.example.com", type: .a)
            ).0 == 400
        )
        #expect(
            try await rawGet(
                engine,
                base + "/dns-query",
                method: .POST,
                headers: ["content-type": "application/dns-message"],
                body: [UInt8](repeating: 0, count: 10_000)
            ).0 == 413
        )
        #expect(try await rawGet(engine, base + "/d?dn=a.example.com", method: .DELETE).0 == 405)
        #expect(try await rawGet(engine, base + "/nowhere").0 == 404)
        // A wire query whose pointer loops: 400, and the server still answers.
        var looped = try DNSMessage.query(name: "a.example.com", type: .a, edns: false)
        looped.replaceSubrange(12..<(looped.count - 4), with: [0xC0, 12])
        #expect(try await rawGet(engine, base + "/dns-query?dns=" + base64url(looped)).0 == 400)
        let (ok, _) = try await rawGet(
            engine,
            base + "/dns-query?dns=" + base64url(try DNSMessage.query(name: "a.example.com", type: .a))
        )
        #expect(ok == 200)
    }

    @Test func hostsFileIsReloadedWhenItChanges() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-hosts-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "198.51.0.10 live.example.com\n".write(toFile: path, atomically: true, encoding: .utf8)
        // No polling: the test reloads by hand, so nothing races it.
        let service = try await startService {
            $0.hostsFile = path
            $0.hostsReloadInterval = nil
        }
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let url = "http://127.0.0.1:\(service.ports[0])/d?dn=live.example.com"
        #expect(try await rawGet(engine, url).1 == "198.51.0.10")
        #expect(try service.reloadHosts() == false, "reloaded a file that had not changed")
        // (Each file below differs from the one before in size, so the reload sees the change even when
        // the modification time does not move.)
        try "198.51.0.11 live.example.com   # moved\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try service.reloadHosts())
        #expect(try await rawGet(engine, url).1 == "198.51.0.11")
        // A broken file is refused with its parse error and keeps the previous table; it is not read
        // again until it changes.
        try "not-an-ip live.example.com\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: HostsFile.ParseError.self) { try service.reloadHosts() }
        #expect(try service.reloadHosts() == false)
        #expect(try await rawGet(engine, url).1 == "198.51.0.11")
    }

    @Test func hostsFileIsPolledForChanges() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-hosts-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "198.51.0.20 polled.example.com\n".write(toFile: path, atomically: true, encoding: .utf8)
        let log = LogRecorder()
        let service = try await startService(logger: log.logger(level: .info)) {
            $0.hostsFile = path
            $0.hostsReloadInterval = .milliseconds(20)
        }
        defer { Task { await service.stop() } }
        try "198.51.0.21 polled.example.com   # moved\n".write(toFile: path, atomically: true, encoding: .utf8)
        // The poll runs on its own: wait for the signal it gives rather than for a fixed time.
        try await eventually("the poll reloads the changed hosts file") { log.logged("hosts file reloaded") }
        #expect(try service.reloadHosts() == false, "the poll left the change unread")
    }

    @Test func connectionsBeyondTheLimitAreClosed() async throws {
        let service = try await startService { $0.limits.maxConnections = 2 }
        defer { Task { await service.stop() } }
        var channels: [any Channel] = []
        for _ in 0..<3 {
            channels.append(
                try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(
                    host: "127.0.0.1",
                    port: service.ports[0]
                ).get()
            )
        }
        // One is closed by the server at once. Which one is not fixed: connections are admitted on
        // their own event loops, so the third to connect is not always the third admitted.
        let firstClosed = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Int.self)
        for (i, c) in channels.enumerated() { c.closeFuture.whenComplete { _ in firstClosed.succeed(i) } }
        let closed = try await firstClosed.futureResult.get()
        #expect(channels.indices.filter { $0 != closed }.allSatisfy { channels[$0].isActive })
        for c in channels { try? await c.close() }
    }
}

/// Hostile round 4: an upstream whose A answer is broken while AAAA is NODATA. The lookup failed; the
/// client is told so (SERVFAIL), never that the name does not exist (NXDOMAIN, which it would cache).
@Suite struct FailedLookupAnswerTests {
    @Test func aBrokenAAnswerWithNodataAAAAIsServfailNotNXDOMAIN() async throws {
        let upstream = try await startUDPPeer { BrokenADNSHandler() }
        defer { upstream.close(promise: nil) }
        let service = try await startService {
            $0.upstream = .dns(IPAddress("127.0.0.1")!, port: upstream.localAddress!.port!)
        }
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        for type in [DNSRecordType.a, .aaaa] {
            let (message, _) = try await dohPost(engine, port: service.ports[0], "broken.example.com", type)
            // Never "no such name"; the A question is SERVFAIL. (serve looks both families up for any
            // question, so AAAA, NODATA upstream, may be SERVFAIL too: never NXDOMAIN.)
            #expect(message.rcode != .nameError, "\(type): \(message.rcode)")
            if type == .a { #expect(message.rcode == .serverFailure, "\(message.rcode)") }
        }
    }
}

/// Hostile round 4: an upstream TTL of 2^31−1 went out unclamped on the first answer after a cache miss
/// (and clamped to the cache's bound on every later one). Every answer now carries the cache's TTL.
@Suite struct UpstreamTTLTests {
    @Test func theFirstAnswerCarriesTheClampedTTLAsLaterOnesDo() async throws {
        let upstream = try await startDNS(["198.51.0.77"], ttl: 2_147_483_647)
        defer { Task { await upstream.stop() } }
        let service = try await startService { $0.upstream = .dns(IPAddress("127.0.0.1")!, port: upstream.port) }
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        for round in 1...2 {
            let (message, headers) = try await dohPost(engine, port: service.ports[0], "long.example.com", .a)
            let cacheControl = headers.first(name: "cache-control") ?? ""
            let ttl = try #require(message.addresses(for: .a).ttl, "round \(round)")
            // The cache's default maxTTL is 3600 s.
            #expect(ttl <= 3600 && ttl > 3000, "round \(round): TTL \(ttl)")
            let maxAge = Int(cacheControl.split(separator: "=").last ?? "") ?? -1
            #expect(maxAge <= 3600 && maxAge > 3000, "round \(round): \(cacheControl)")
        }
    }
}
