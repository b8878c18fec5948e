// `httpdns-bench resolver`: the resolver's figures next to the peer's, from the same run.
//   1. cached lookup latency (p50/p99; the synchronous resolveCachedOrStart, then await resolve) vs
//      getaddrinfo of an /etc/hosts name, and the ratio;
//   2. upstream queries made for N concurrent cold lookups of one name (coalescing; target exactly 1).
// Without --resolver an in-process DNS server on loopback is the upstream, and its own count of the
// queries it received is printed too.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ArgumentParser
import HTTPDNSKit
import Foundation
import HTTPDNSCommandLine
import HTTPDNSCore
import HTTPDNSLookup
import HTTPDNSServer

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "httpdns-bench",
        abstract: "Print our figures next to a peer's from the same run, with the ratio.",
        discussion: """
            The benchmarks of this repository, and the crash-test driver its tests run. Not part of \
            the shipped `httpdns`. scripts/speed-bench.sh runs every row in release.
            """,
        subcommands: [
            ResolverBench.self, URLSessionBench.self, BenchOriginCommand.self, EngineSpeedBench.self,
            HotPathBench.self, SaveLoopCommand.self,
        ],
        defaultSubcommand: ResolverBench.self
    )
}

struct ResolverBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolver",
        abstract: "Cached lookup latency vs getaddrinfo, and upstream queries for concurrent cold lookups."
    )

    @Option(help: "Name resolved for the cached-latency figure (must resolve through --resolver).")
    var name = "bench.test"

    @Option(help: "Name getaddrinfo resolves from /etc/hosts for the peer figure.")
    var hostsName = "localhost"

    @Option(help: "Cached lookups to time.")
    var iterations = 200_000

    @Option(help: "Concurrent cold lookups of one name.")
    var concurrency = 1_000

    @OptionGroup var resolver: ResolverOptions

    func validate() throws {
        guard iterations >= 100, iterations <= 10_000_000 else {
            throw ValidationError("--iterations: give 100 to 10000000")
        }
        guard concurrency >= 1, concurrency <= 100_000 else { throw ValidationError("--concurrency: give 1 to 100000") }
    }

    func run() async throws {
        var options = resolver
        var server: DNSServer?
        if options.resolvers.isEmpty {
            // Answers every name after a short delay, as a real upstream would take a moment.
            let s = try await DNSServer.start { _, _ in
                DNSServer.Answer(addresses: [IPAddress("127.0.0.1")!, IPAddress("::1")!], ttl: 300)
            }
            server = s
            options.resolvers = ["dns:127.0.0.1:\(s.port)"]
            print("upstream: in-process DNS server on 127.0.0.1:\(s.port) (pass --resolver to use another)")
        } else {
            print("upstream: \(options.resolvers.joined(separator: ", "))")
        }

        // 1. Cached lookup latency.
        let warmHTTPDNS = try options.makeHTTPDNS()
        let warm = warmHTTPDNS.resolver
        let first = try await warm.resolve(name, .both)
        print(
            "warm-up: \(name) -> \((first.ipv4 + first.ipv6).map(\.description).joined(separator: " ")) via \(first.source)"
        )
        // Timed in batches of `batch` calls, each batch's mean a sample: two clock reads cost about 40 ns,
        // a fifth of a cached lookup, so timing every call alone would mostly time the clock.
        let batch = 64
        let sync = try samples(iterations / batch, batch) {
            guard case .some = warm.resolveCachedOrStart(name, .both) else {
                throw ValidationError("\(name) left the cache during the run")
            }
        }
        var async = [Int64]()
        async.reserveCapacity(iterations / batch)
        for _ in 0..<iterations / batch {
            let t0 = ContinuousClock.now
            for _ in 0..<batch { _ = try await warm.resolve(name, .both) }
            async.append((ContinuousClock.now - t0).nanoseconds / Int64(batch))
        }
        let peerBatch = 8
        let peer = try samples(max(iterations / 10 / peerBatch, 20), peerBatch) {
            guard systemLookup(hostsName) else {
                throw ValidationError("--hosts-name: getaddrinfo(\(hostsName)) failed; pick a name in /etc/hosts")
            }
        }
        let (o50, o99) = percentiles(sync)
        let (a50, a99) = percentiles(async)
        let (p50, p99) = percentiles(peer)
        print("")
        print("cached lookup (\(iterations) calls, A+AAAA)     p50 \(o50) ns   p99 \(o99) ns   (resolveCachedOrStart)")
        print("  the same, await resolve          p50 \(a50) ns   p99 \(a99) ns")
        print("getaddrinfo(\(hostsName)) (\(peer.count * peerBatch) calls)   p50 \(p50) ns   p99 \(p99) ns")
        print(
            String(
                format: "ratio getaddrinfo/ours: p50 %.1fx  p99 %.1fx   (target >= 50x, ours p50 < 1000 ns)",
                Double(p50) / Double(max(o50, 1)),
                Double(p99) / Double(max(o99, 1))
            )
        )
        print(
            String(
                format: "  await resolve: p50 %.1fx  p99 %.1fx   (ns are means of batches of %d calls)",
                Double(p50) / Double(max(a50, 1)),
                Double(p99) / Double(max(a99, 1)),
                batch
            )
        )
        await warmHTTPDNS.shutdown()

        // 2. Coalescing.
        let coldHTTPDNS = try options.makeHTTPDNS()
        let cold = coldHTTPDNS.resolver
        let coldName = server == nil ? name : "cold-\(UInt32.random(in: 0...UInt32.max)).bench.test"
        let before = server?.queries.udp ?? 0
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<concurrency {
                group.addTask { (try? await cold.resolve(coldName, .ipv4)) != nil }
            }
            var ok = 0
            for await r in group where r { ok += 1 }
            return ok
        }
        let upstream = cold.statistics.upstreamQueries
        print("")
        print(
            "\(concurrency) concurrent cold lookups of \(coldName) (A): \(results) succeeded, \(upstream) upstream quer\(upstream == 1 ? "y" : "ies") sent (target exactly 1)"
        )
        if let server {
            print(
                "  the upstream server received \(server.queries.udp - before) UDP quer\(server.queries.udp - before == 1 ? "y" : "ies")"
            )
            await server.stop()
        }
        await coldHTTPDNS.shutdown()
    }

    /// `count` samples, each the mean time in nanoseconds of `batch` calls of `body`.
    func samples(_ count: Int, _ batch: Int, _ body: () throws -> Void) rethrows -> [Int64] {
        var samples = [Int64]()
        samples.reserveCapacity(count)
        for _ in 0..<count {
            let t0 = ContinuousClock.now
            for _ in 0..<batch { try body() }
            samples.append((ContinuousClock.now - t0).nanoseconds / Int64(batch))
        }
        return samples
    }

    func percentiles(_ samples: [Int64]) -> (Int64, Int64) {
        let sorted = samples.sorted()
        return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }
}

/// One getaddrinfo(3) of `name` for any family and stream sockets, its result freed: the peer of a
/// cached lookup. True when it resolved.
func systemLookup(_ name: String) -> Bool {
    var result: UnsafeMutablePointer<addrinfo>?
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
    #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    #endif
    let rc = getaddrinfo(name, nil, &hints, &result)
    if let result { freeaddrinfo(result) }
    return rc == 0
}
