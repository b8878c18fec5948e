// An origin that moved while the app held its old address (ConnectFailover.swift), end to end: our
// service on one loopback address, the old address refusing (a bound TCP socket that never listens) or
// silent (a listener whose backlog is full: the kernel drops the SYN), a classic DNS server whose answer
// the test moves, and a LocalDNS for the fallback. Every bound is one a starved machine cannot miss: the
// connect timeout is far longer than the test, so only failing over lets the request through.

@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSServer
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP socket bound to `host:port` (0: any port) that refuses (`listening: false`: the kernel answers
/// a SYN with a reset) or stays silent (`listening: true` with a full backlog: SYNs are dropped).
/// Close its descriptors with `release`.
struct DeadAddress {
    var host: String
    var port: Int
    var descriptors: [Int32]

    init(host: String, port: Int = 0, silent: Bool) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            throw DeadAddressError(reason: "bind \(host):\(port): errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.host = host
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.descriptors = [fd]
        guard silent else { return }
        // Backlog 0 holds one connection; two clients that are never accepted fill it for sure.
        listen(fd, 0)
        for _ in 0..<2 {
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            descriptors.append(client)
        }
    }

    func release() { descriptors.forEach { _ = close($0) } }
}

struct DeadAddressError: Error {
    var reason: String
}

@Suite struct MovedOriginTests {
    /// The old address (dead as `silent` says) and the origin's new one on the same port, with a
    /// resolver whose HTTPDNS first answers the old one, and an engine that would wait 10 min to connect.
    struct World {
        var dead: DeadAddress
        var origin: HTTPDNSService
        var dns: DNSServer
        var local: DNSServer?
        var answer: NIOLockedValueBox<[IPAddress]>
        var clock: ManualClock
        var resolver: HTTPDNSResolver
        var engine: HTTPEngine
        var url: HTTPURL

        func stop() async {
            engine.shutdown()
            dead.release()
            await dns.stop()
            await local?.stop()
            await origin.stop()
        }
    }

    func world(
        oldHost: String,
        silent: Bool,
        localAnswer: String? = nil,
        _ tweak: @escaping (inout ResolverConfiguration) -> Void = { _ in }
    ) async throws -> World {
        // The dead address takes a port first; the origin listens on the same port on another address.
        let (dead, origin) = try await onOnePort(
            attempts: 5,
            { port in try DeadAddress(host: oldHost, port: port, silent: silent) },
            port: { $0.port },
            { port in try await startService { $0.listen = [("127.0.0.2", port)] } },
            release: { $0.release() }
        )
        let answer = NIOLockedValueBox([IPAddress(oldHost)!])
        let dns = try await DNSServer.start { _, family in
            DNSServer.Answer(addresses: family == .a ? answer.withLockedValue { $0 } : [], ttl: 10)
        }
        var local: DNSServer?
        if let localAnswer { local = try await startDNS([localAnswer]) }
        let clock = ManualClock()
        let resolver = makeResolver([try do53(dns)], local: try local.map(do53), clock: clock) {
            $0.cache.serveExpired = .seconds(3600)
            tweak(&$0)
        }
        var config = HTTPEngine.Configuration()
        config.timeouts.connect = .seconds(600)
        let engine = try HTTPEngine(configuration: config, addressSource: resolver, path: resolver.path)
        let url = try HTTPURL("http://moved.test:\(dead.port)/healthz")
        return World(
            dead: dead,
            origin: origin,
            dns: dns,
            local: local,
            answer: answer,
            clock: clock,
            resolver: resolver,
            engine: engine,
            url: url
        )
    }

    /// The app's request, with a total bound it only meets by failing over.
    func get(_ w: World) async throws -> HTTPEngineResponse {
        var request = HTTPEngineRequest(url: w.url)
        request.timeout = .seconds(120)
        let response = try await w.engine.execute(request)
        _ = try await response.body.collect(upTo: 1 << 16)
        return response
    }

    @Test(arguments: [false, true])
    func aCachedAddressThatRefusesIsAskedAgainAndForgotten(stale: Bool) async throws {
        let w = try await world(oldHost: "127.0.0.3", silent: false)
        _ = try await w.resolver.resolve("moved.test", .ipv4)
        if stale { w.clock.advance(.seconds(11)) }
        w.answer.withLockedValue { $0 = [IPAddress("127.0.0.2")!] }

        let response = try await get(w)
        #expect(response.status == .ok)
        #expect(response.metrics.ip == "127.0.0.2")
        // A stale answer starts its refresh when it is served: on a machine slowed down enough (a
        // sanitizer's 5-15x), that refresh brings the new address before the connect starts, and the
        // connect goes there at once with nothing to ask again.
        guard !(stale && response.metrics.reasks.isEmpty) else {
            #expect(w.resolver.cached("moved.test", .ipv4)?.ipv4 == [IPAddress("127.0.0.2")!])
            return await w.stop()
        }
        // The trace says what was asked again, after which failure, and who answered.
        #expect(response.metrics.reasks.map(\.kind) == [.pastCache])
        // Asked once the old address refused, or, on a machine too busy to see the refusal within the
        // attempt delay, at that delay: either way, nothing but the old address had failed.
        let failedBefore = Set(response.metrics.reasks.first?.failed ?? ["none"])
        #expect(failedBefore.isSubset(of: ["127.0.0.3"]))
        #expect(response.metrics.reasks.first?.source.map { "\($0)" } == "dns:127.0.0.1:\(w.dns.port)")
        // The dead address is no longer served; the new one is cached.
        #expect(w.resolver.cached("moved.test", .ipv4)?.ipv4 == [IPAddress("127.0.0.2")!])
        await w.stop()
    }

    @Test(arguments: [false, true])
    func aSilentCachedAddressStartsALookupAndTheNewAddressWinsTheRace(stale: Bool) async throws {
        let w = try await world(oldHost: "127.0.0.4", silent: true)
        _ = try await w.resolver.resolve("moved.test", .ipv4)
        if stale { w.clock.advance(.seconds(11)) }
        w.answer.withLockedValue { $0 = [IPAddress("127.0.0.2")!] }

        // Without failing over this waits for the 10-minute connect timeout and fails at 2 minutes.
        let response = try await get(w)
        #expect(response.status == .ok)
        #expect(response.metrics.ip == "127.0.0.2")
        // The stale answer's own refresh may come first on a slowed machine (see above).
        guard !(stale && response.metrics.reasks.isEmpty) else { return await w.stop() }
        // Asked by the attempt delay, while the old address had not answered.
        #expect(response.metrics.reasks.map(\.kind) == [.pastCache])
        #expect(response.metrics.reasks.first?.failed == [])
        await w.stop()
    }

    @Test func whenHTTPDNSStillGivesTheDeadAddressLocalDNSAnswers() async throws {
        let w = try await world(oldHost: "127.0.0.5", silent: false, localAnswer: "127.0.0.2")
        let response = try await get(w)
        #expect(response.status == .ok)
        #expect(response.metrics.ip == "127.0.0.2")
        #expect(response.metrics.dnsSource.map { "\($0)" }?.hasPrefix("fallback") == true)
        #expect(response.metrics.reasks.map(\.kind) == [.fallback])
        await w.stop()
    }

    @Test func aStrictNameNeverFallsBack() async throws {
        let w = try await world(oldHost: "127.0.0.6", silent: false, localAnswer: "127.0.0.2") {
            $0.policy = try! HostPolicy(only: ["*"], strict: ["*"])
        }
        await #expect(throws: HTTPEngineError.self) { _ = try await get(w) }
        await w.stop()
    }
}
