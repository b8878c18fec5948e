// Our side of the speed comparison with the C peers; scripts/speed-bench.sh runs the peers
// (wrk, h2load, kresd) against the same servers in the same run and prints the table.
//   httpdns-bench engine   the engine's requests/s and CPU per request against one URL: HTTP/1.1
//                          keep-alive with N connections, or HTTP/2 with N streams on one connection.
//   httpdns-bench hot      N iterations of one hot path and nothing else, for
//                          `valgrind --tool=callgrind` to count instructions per operation (the script
//                          runs two counts and takes the difference, so start-up cancels out).
// The last line of `engine` is machine-readable: `RESULT rate=REQ_PER_S cpu_us=CPU_US_PER_REQUEST`.

import ArgumentParser
import HTTPDNSCommandLine
import HTTPDNSOTLP
import HTTPDNSKit
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSServer
import Logging
import NIOCore
import Tracing

/// What `bench engine` and `bench hot` need to reach the test origin.
struct OriginOptions: ParsableArguments {
    @Option(help: "URL to GET, e.g. https://a.test:8443/whoami.")
    var url: String

    @Option(name: .customLong("connect-to"), help: ArgumentHelp("IP the URL's host is at.", valueName: "IP"))
    var connectTo = "127.0.0.1"

    @Option(help: ArgumentHelp("PEM file of extra trusted CA certificates.", valueName: "FILE"))
    var cacert: String?

    @Flag(help: "HTTP/2 (streams on one connection) instead of HTTP/1.1 keep-alive.")
    var h2 = false

    func makeEngine(connections: Int) throws -> (HTTPEngine, HTTPURL) {
        try benchEngine(url: url, connectTo: connectTo, cacert: cacert, h2: h2, connections: connections)
    }
}

/// An engine that reaches `url`'s host at `connectTo`, speaking only HTTP/2 (one connection) or only
/// HTTP/1.1 (`connections` of them).
func benchEngine(url: String, connectTo: String, cacert: String?, h2: Bool, connections: Int) throws
    -> (HTTPEngine, HTTPURL)
{
    let target = try HTTPURL(url)
    guard let ip = IPAddress(connectTo) else { throw ValidationError("--connect-to: give an IP address") }
    var configuration = HTTPEngine.Configuration()
    configuration.http.versions = h2 ? .http2Only : .http1Only
    configuration.http.maxConnectionsPerHost = h2 ? 1 : connections
    // Spans only when --otlp-endpoint bootstrapped a tracer, as an app's `HTTPDNS` picks it up.
    configuration.tracing = EngineTracing(InstrumentationSystem.tracer, propagatesContext: true)
    if let cacert {
        configuration.tls = HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: cacert))
    }
    let engine = try HTTPEngine(
        configuration: configuration,
        addressSource: StaticAddressSource([target.host: [ip]])
    )
    return (engine, target)
}

/// Runs `body` `requests / inFlight` times on each of `inFlight` concurrent workers: the calls made,
/// and the seconds they took. `loops[i]`, when given, is the event loop worker `i` runs on (through
/// `EventLoopTaskExecutor`, where the system has task executors); otherwise the default pool.
func runConcurrently(
    requests: Int,
    inFlight: Int,
    loops: [any EventLoop]? = nil,
    _ body: @escaping @Sendable () async throws -> Void
) async throws -> (calls: Int, seconds: Double) {
    let perWorker = requests / inFlight
    let t0 = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { group in
        for worker in 0..<inFlight {
            let work: @Sendable () async throws -> Void = { for _ in 0..<perWorker { try await body() } }
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let loops {
                group.addTask(executorPreference: EventLoopTaskExecutor(loops[worker]), operation: work)
            } else {
                group.addTask(operation: work)
            }
        }
        try await group.waitForAll()
    }
    return (perWorker * inFlight, (ContinuousClock.now - t0).seconds)
}

/// One GET, its body read to the end; fails on anything but 200.
func benchGET(_ engine: HTTPEngine, _ url: HTTPURL) async throws {
    let response = try await engine.execute(HTTPEngineRequest(url: url))
    for try await _ in response.body {}
    guard response.status == .ok else { throw ValidationError("HTTP \(response.status.code) from \(url)") }
}

struct EngineSpeedBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "The engine's requests/s and CPU per request against one URL (compare: wrk, h2load)."
    )

    @OptionGroup var origin: OriginOptions

    @Option(help: "Requests in flight: HTTP/1.1 connections, or HTTP/2 streams on one connection.")
    var concurrency = 1

    @Option(help: "Requests to time (after 100 to warm up).")
    var requests = 20_000

    @Option(
        help: """
            Where the calling tasks run: loop (on the engine's event loops, through \
            EventLoopTaskExecutor: no thread hop per request) or pool (Swift's default pool).
            """
    )
    var caller = "loop"

    /// With --otlp-endpoint, the cost of tracing on: every request a span, exported.
    @OptionGroup var tracing: TracingOptions

    func validate() throws {
        guard (1...1_000).contains(concurrency) else { throw ValidationError("--concurrency: give 1 to 1000") }
        guard (100...10_000_000).contains(requests) else {
            throw ValidationError("--requests: give 100 to 10000000")
        }
        guard ["loop", "pool"].contains(caller) else { throw ValidationError("--caller: loop or pool") }
    }

    func run() async throws {
        try await tracing.exporting(logger: Logger(label: "httpdns.otlp")) { try await measure() }
    }

    private func measure() async throws {
        let (engine, target) = try origin.makeEngine(connections: concurrency)
        defer { engine.shutdown() }
        // HTTP/2: every stream is on one connection, so every caller on its loop; HTTP/1.1: the loops
        // in turn, each caller's connection opened on its own loop (during the warm-up).
        let shared = engine.nextEventLoop()
        let loops: [any EventLoop]? =
            caller == "pool" ? nil : (0..<concurrency).map { _ in origin.h2 ? shared : engine.nextEventLoop() }
        _ = try await runConcurrently(requests: max(100, concurrency), inFlight: concurrency, loops: loops) {
            try await benchGET(engine, target)
        }
        let cpu0 = processCPUSeconds()
        let (calls, seconds) = try await runConcurrently(
            requests: requests,
            inFlight: concurrency,
            loops: loops
        ) {
            try await benchGET(engine, target)
        }
        let cpu = processCPUSeconds() - cpu0
        let rate = Double(calls) / seconds
        let cpuPerRequest = cpu / Double(calls) * 1e6
        print(
            String(
                format: "%@ %@, %d in flight, callers on the %@: %.0f req/s, %.1f us CPU per request",
                origin.h2 ? "h2" : "http/1.1",
                origin.url,
                concurrency,
                caller == "loop" ? "engine's loops" : "concurrency pool",
                rate,
                cpuPerRequest
            )
        )
        print(String(format: "RESULT rate=%.1f cpu_us=%.2f", rate, cpuPerRequest))
    }
}

struct HotPathBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hot",
        abstract: "Run one hot path N times and nothing else, for callgrind's instruction counts.",
        discussion: """
            lookup: a cached A+AAAA lookup, await resolve (an in-process DNS server answers the first). \
            lookup-sync: the same through resolveCachedOrStart, no await. getaddrinfo: the \
            C library's lookup of an /etc/hosts name (the peer of lookup). h1: one GET on a kept-alive \
            HTTP/1.1 connection (--url). h2: one GET at a time on an HTTP/2 connection (--url). Count twice \
            with different --iterations and divide the difference, so start-up cancels out \
            (scripts/speed-bench.sh does).
            """
    )

    static let ops = ["lookup", "lookup-sync", "getaddrinfo", "h1", "h2"]

    @Option(help: "lookup, lookup-sync, getaddrinfo, h1 or h2.")
    var op: String

    @Option(help: "Times to run it.")
    var iterations = 1_000

    @Option(help: "h1, h2: URL to GET.")
    var url: String?

    @Option(
        name: .customLong("connect-to"),
        help: ArgumentHelp("h1, h2: IP the URL's host is at.", valueName: "IP")
    )
    var connectTo = "127.0.0.1"

    @Option(help: ArgumentHelp("h1, h2: PEM file of extra trusted CA certificates.", valueName: "FILE"))
    var cacert: String?

    @Option(name: .customLong("hosts-name"), help: "getaddrinfo: a name in /etc/hosts.")
    var hostsName = "localhost"

    /// With --otlp-endpoint, the cost of tracing on: every lookup or request a span, exported.
    @OptionGroup var tracing: TracingOptions

    func validate() throws {
        guard Self.ops.contains(op) else {
            throw ValidationError("--op: lookup, lookup-sync, getaddrinfo, h1 or h2")
        }
        guard (1...10_000_000).contains(iterations) else {
            throw ValidationError("--iterations: give 1 to 10000000")
        }
        if op.hasPrefix("h"), url == nil { throw ValidationError("--op \(op) needs --url") }
    }

    func run() async throws {
        try await tracing.exporting(logger: Logger(label: "httpdns.otlp")) { try await runOp() }
    }

    private func runOp() async throws {
        switch op {
        case "lookup", "lookup-sync":
            let server = try await DNSServer.start { _, _ in
                DNSServer.Answer(addresses: [IPAddress("127.0.0.1")!, IPAddress("::1")!], ttl: 3600)
            }
            var options = try ResolverOptions.parse(["--resolver", "dns:127.0.0.1:\(server.port)", "--no-fallback"])
            options.localDNS = "system"
            let httpdns = try options.makeHTTPDNS()
            // The resolver is read once: reading `httpdns.resolver` is a retain and a release, and the
            // resolver's refcount lives in a side table (the network monitor holds it weakly), which
            // costs about 170 instructions a read, more than a tenth of the lookup measured here.
            let resolver = httpdns.resolver
            _ = try await resolver.resolve("bench.test", .both)
            if op == "lookup" {
                for _ in 0..<iterations { _ = try await resolver.resolve("bench.test", .both) }
            } else {
                for _ in 0..<iterations {
                    guard case .some = resolver.resolveCachedOrStart("bench.test", .both) else {
                        throw ValidationError("bench.test left the cache during the run")
                    }
                }
            }
            await httpdns.shutdown()
            await server.stop()
        case "getaddrinfo":
            for _ in 0..<iterations where !systemLookup(hostsName) {
                throw ValidationError("--hosts-name: getaddrinfo(\(hostsName)) failed; pick a name in /etc/hosts")
            }
        default:
            let (engine, target) = try benchEngine(
                url: url!,
                connectTo: connectTo,
                cacert: cacert,
                h2: op == "h2",
                connections: 1
            )
            defer { engine.shutdown() }
            for _ in 0..<iterations { try await benchGET(engine, target) }
        }
        print("\(op): \(iterations) iterations")
    }
}
