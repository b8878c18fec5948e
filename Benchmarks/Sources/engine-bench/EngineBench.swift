// Our engine and AsyncHTTPClient against the same nginx, in one run, with the ratio:
//   h1     HTTP/1.1 keep-alive small GETs, req/s
//   h2     HTTP/2 with 100 concurrent streams, req/s
//   h1-alpn    an HTTPS host that speaks only HTTP/1.1 (ALPN offers h2 and http/1.1, the server takes
//              http/1.1), 8 in flight, each round from cold: new clients, so opening the 8 connections
//              is part of what is measured (--url: the peers' h1-only port)
//   qps    a DNS server's queries/s: --url (ours) against --peer-url (e.g. kresd DoH), both asked by our
//          engine over h2 with 100 streams, alternating rounds, median
//   tunnels    short CONNECT tunnels per second through a proxy (--proxy PORT) to --url's host:port,
//              against plain TCP connects per second to the same target
//   blackhole  time to success when the first address drops SYNs (run inside the test namespace:
//              ip netns exec NS engine-bench blackhole ...). AHC's dnsOverride maps a host to one
//              address, so it can only be pointed at the dead one.
// Both clients get the same trust root and connect to the same IP for the same hostname: ours through
// the public front door (`HTTPDNS`, `addressOverrides`), AHC through `dnsOverride`.

import ArgumentParser
import AsyncHTTPClient
import Foundation
import HTTPDNSKit
import NIOCore
import NIOPosix
import NIOSSL

@main
struct EngineBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine-bench",
        abstract: "swift-httpdns's engine vs AsyncHTTPClient (dnsOverride), same server, same run."
    )

    @Argument(help: "h1, h2, h1-alpn, qps, tunnels or blackhole")
    var scenario: String

    @Option(help: "https URL on the test nginx, e.g. https://a.test:8443/whoami")
    var url: String

    @Option(help: "tunnels: the proxy's port on 127.0.0.1.")
    var proxy: Int?

    @Option(help: "qps: the peer server's URL, asked the same way.")
    var peerURL: String?

    @Option(help: "IP the URL's host is served at (the dead one first for blackhole).")
    var ip: [String] = ["127.0.0.1"]

    @Option(help: "PEM CA that signed the server's certificate.")
    var cacert: String

    @Option(help: "Requests per client (h1, h2).")
    var requests = 20_000

    @Option(help: "Requests in flight (h1: connections; h2: streams on one connection).")
    var concurrency: Int?

    func run() async throws {
        let target = try Target(url)
        let ips = ip.compactMap { IPAddress($0) }
        guard ips.count == ip.count, !ips.isEmpty else { throw ValidationError("--ip: give IP addresses") }

        // Ours: the app's front door, with the URL's host pinned to --ip and no resolver asked.
        // (A URL with an IP literal for a host needs no override.)
        var ours = HTTPDNS.Configuration(resolvers: [])
        if IPAddress(target.host) == nil { ours.addressOverrides[target.host] = ips }
        ours.tls.trustedCertificateFiles = [cacert]
        ours.network.watchesChanges = false
        func makeOurs() throws -> HTTPDNS { try HTTPDNS(ours) }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(cacert)]
        var theirs = HTTPClient.Configuration(tlsConfiguration: tls)
        theirs.dnsOverride = [target.host: ips[0].description]

        switch scenario {
        case "h1", "h2", "h1-alpn":
            let cold = scenario == "h1-alpn"
            let inFlight = concurrency ?? (scenario == "h1" ? 1 : cold ? 8 : 100)
            ours.http.versions = cold ? .automatic : scenario == "h1" ? .http1Only : .http2Only
            ours.http.maxConnectionsPerHost = inFlight
            theirs.httpVersion = scenario == "h1" ? .http1Only : .automatic
            theirs.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = inFlight
            var httpdns = try makeOurs()
            var client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: theirs)
            let rounds = 5
            print(
                "\(scenario): \(requests) GETs of \(url) per client, \(inFlight) in flight, \(rounds) alternating rounds, median"
                    + (cold ? ", each round with new clients (connections opened inside the round)" : "")
            )
            func oursGET(_ httpdns: HTTPDNS) -> @Sendable () async throws -> Void {
                {
                    let response = try await httpdns.engine.send(HTTPEngineRequest(url: target.url))
                    for try await _ in response.body {}
                    guard response.status == .ok else { throw ValidationError("ours: HTTP \(response.status.code)") }
                }
            }
            let url = self.url
            func theirsGET(_ client: HTTPClient) -> @Sendable () async throws -> Void {
                {
                    let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
                    for try await _ in response.body {}
                    guard response.status == .ok else { throw ValidationError("AHC: HTTP \(response.status.code)") }
                }
            }
            var oursRates: [Double] = []
            var theirsRates: [Double] = []
            let per = requests / rounds
            // Alternate so that drift on a shared machine hits both alike.
            for round in 0..<rounds {
                if cold {
                    await httpdns.shutdown()
                    try await client.shutdown()
                    httpdns = try makeOurs()
                    client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: theirs)
                }
                let a = oursGET(httpdns)
                let b = theirsGET(client)
                if round % 2 == 0 {
                    oursRates.append(try await measure(requests: per, inFlight: inFlight, warmUp: !cold, a))
                    theirsRates.append(try await measure(requests: per, inFlight: inFlight, warmUp: !cold, b))
                } else {
                    theirsRates.append(try await measure(requests: per, inFlight: inFlight, warmUp: !cold, b))
                    oursRates.append(try await measure(requests: per, inFlight: inFlight, warmUp: !cold, a))
                }
            }
            let oursRate = oursRates.sorted()[rounds / 2]
            let theirsRate = theirsRates.sorted()[rounds / 2]
            await httpdns.shutdown()
            try await client.shutdown()
            print(String(format: "  swift-httpdns    %9.0f req/s", oursRate))
            print(String(format: "  AsyncHTTPClient  %9.0f req/s", theirsRate))
            print(
                String(
                    format: "  ratio ours/AHC   %9.2fx (target %@)",
                    oursRate / theirsRate,
                    scenario == "h1" ? ">= 1.1x" : cold ? "unchanged or better" : ">= 1.0x"
                )
            )
        case "qps":
            guard let peerURL else { throw ValidationError("--peer-url: give the peer's URL") }
            let peer = try Target(peerURL)
            if IPAddress(peer.host) == nil { ours.addressOverrides[peer.host] = ips }
            let httpdns = try makeOurs()
            let inFlight = concurrency ?? 100
            let rounds = 5
            func asker(_ u: Target) -> @Sendable () async throws -> Void {
                {
                    let response = try await httpdns.engine.send(HTTPEngineRequest(url: u.url))
                    for try await _ in response.body {}
                    guard response.status == .ok else {
                        throw ValidationError("\(u.host): HTTP \(response.status.code)")
                    }
                }
            }
            var a: [Double] = []
            var b: [Double] = []
            for round in 0..<rounds {
                if round % 2 == 0 {
                    a.append(try await measure(requests: requests / rounds, inFlight: inFlight, asker(target)))
                    b.append(try await measure(requests: requests / rounds, inFlight: inFlight, asker(peer)))
                } else {
                    b.append(try await measure(requests: requests / rounds, inFlight: inFlight, asker(peer)))
                    a.append(try await measure(requests: requests / rounds, inFlight: inFlight, asker(target)))
                }
            }
            await httpdns.shutdown()
            let oursRate = a.sorted()[rounds / 2]
            let peerRate = b.sorted()[rounds / 2]
            print("qps: \(requests) queries each, \(inFlight) in flight, \(rounds) alternating rounds, median")
            print(String(format: "  ours  %9.0f q/s  %@", oursRate, url))
            print(String(format: "  peer  %9.0f q/s  %@", peerRate, peerURL))
            print(String(format: "  ratio ours/peer %6.2fx", oursRate / peerRate))
        case "tunnels":
            guard let proxy else { throw ValidationError("--proxy: give the proxy's port") }
            let inFlight = concurrency ?? 8
            let authority = "\(target.host):\(target.port)"
            let viaProxy: @Sendable () async throws -> Void = {
                let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connect(host: "127.0.0.1", port: proxy) { ch in
                        ch.eventLoop.makeCompletedFuture {
                            try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: ch)
                        }
                    }
                try await channel.executeThenClose { inbound, outbound in
                    try await outbound.write(
                        ByteBuffer(string: "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n")
                    )
                    var it = inbound.makeAsyncIterator()
                    guard let reply = try await it.next(), String(buffer: reply).hasPrefix("HTTP/1.1 200") else {
                        throw ValidationError("the proxy refused the tunnel")
                    }
                }
            }
            let direct: @Sendable () async throws -> Void = {
                let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connect(host: ips[0].description, port: target.port).get()
                try await channel.close()
            }
            var a: [Double] = []
            var b: [Double] = []
            for _ in 0..<3 {
                a.append(try await measure(requests: requests / 3, inFlight: inFlight, viaProxy))
                b.append(try await measure(requests: requests / 3, inFlight: inFlight, direct))
            }
            let tunnels = a.sorted()[1]
            let connects = b.sorted()[1]
            print("tunnels: \(requests) short tunnels to \(authority), \(inFlight) at a time, median of 3 rounds")
            print(
                String(format: "  through the proxy  %8.0f tunnels/s (CONNECT, resolve, connect, 200, close)", tunnels)
            )
            print(String(format: "  direct TCP         %8.0f connects/s to the same target", connects))
            print(String(format: "  ratio              %8.2fx", tunnels / connects))
        case "blackhole":
            guard ips.count >= 2 else {
                throw ValidationError("--ip: give the blackholed address first, then a live one")
            }
            let httpdns = try makeOurs()
            let t0 = ContinuousClock.now
            let response = try await httpdns.engine.send(HTTPEngineRequest(url: target.url))
            for try await _ in response.body {}
            let oursTime = ContinuousClock.now - t0
            await httpdns.shutdown()
            theirs.timeout.connect = .seconds(10)
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: theirs)
            let t1 = ContinuousClock.now
            var theirsOutcome = "succeeded"
            do {
                let r = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(15))
                for try await _ in r.body {}
            } catch {
                theirsOutcome = "failed (\(error))"
            }
            let theirsTime = ContinuousClock.now - t1
            try await client.shutdown()
            print("blackhole: \(url) at \(ip.joined(separator: ", ")) (the first drops SYNs)")
            print(
                String(
                    format: "  swift-httpdns    %8.0f ms to success (happy eyeballs over both addresses)",
                    oursTime.inMilliseconds
                )
            )
            print(
                String(
                    format: "  AsyncHTTPClient  %8.0f ms, %@ (dnsOverride gives it only %@)",
                    theirsTime.inMilliseconds,
                    theirsOutcome,
                    ips[0].description
                )
            )
            print(String(format: "  ratio AHC/ours   %8.1fx", theirsTime.inMilliseconds / oursTime.inMilliseconds))
        default:
            throw ValidationError("scenario: h1, h2, h1-alpn, qps, tunnels or blackhole")
        }
    }

    /// Requests per second for `requests` calls of `body`, `inFlight` at a time, after a warm-up (unless
    /// the cold start is what is measured).
    func measure(
        requests: Int,
        inFlight: Int,
        warmUp: Bool = true,
        _ body: @escaping @Sendable () async throws -> Void
    ) async throws -> Double {
        if warmUp { for _ in 0..<min(inFlight, 100) { try await body() } }
        let counter = Counter(total: requests)
        let t0 = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<inFlight {
                group.addTask {
                    while counter.take() { try await body() }
                }
            }
            try await group.waitForAll()
        }
        return Double(requests) / (ContinuousClock.now - t0).inSeconds
    }
}

/// An https URL given on the command line, its host and port.
struct Target {
    let url: String
    let host: String
    let port: Int

    init(_ text: String) throws {
        guard let parsed = URLComponents(string: text), parsed.scheme == "https" || parsed.scheme == "http",
            let host = parsed.host, !host.isEmpty
        else { throw ValidationError("\(text): give an http or https URL with a host") }
        url = text
        self.host = host
        port = parsed.port ?? (parsed.scheme == "https" ? 443 : 80)
    }
}

/// Hands out request slots to the workers.
final class Counter: @unchecked Sendable {
    // Guarded by `lock`.
    private var left: Int
    private let lock = NSLock()
    init(total: Int) { left = total }
    func take() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard left > 0 else { return false }
        left -= 1
        return true
    }
}

extension Duration {
    var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
    var inMilliseconds: Double { inSeconds * 1000 }
}
