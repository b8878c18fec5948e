// `httpdns-bench urlsession`: URLSession with HTTPDNSURLProtocol against its peers, in one run.
//   1. A streamed upload (httpBodyStream from a file, default 256 MiB) through the protocol vs
//      `curl --data-binary @file`, to the same origin: speed, byte-exactness (the origin hashes what
//      it receives), and the peak RSS growth of this process during ours.
//   2. Small GETs, one in flight, through the protocol vs plain URLSession (libcurl) to the same origin.
// The origin is a NIO HTTP/1.1 server on loopback, in a process of its own (`httpdns-bench origin`, so
// it shares no event loop with the clients measured), that streams what it receives into SHA-256;
// names resolve through an in-process DNS server, so nothing needs installing but curl.

import ArgumentParser
import HTTPDNSCommandLine
import Crypto
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSServer
import HTTPDNSURLSession
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct URLSessionBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "urlsession",
        abstract: "Streamed upload vs curl (speed, RSS) and small GETs vs plain URLSession, through HTTPDNSURLProtocol."
    )

    @Option(name: .customLong("upload-mib"), help: "Upload size in MiB.")
    var uploadMiB = 256

    @Option(help: "Small GETs per round.")
    var requests = 2_000

    @Option(help: "Requests in flight for the second small-GET figure.")
    var concurrency = 16

    @Option(help: "Alternating rounds per figure (the median is printed).")
    var rounds = 3

    func validate() throws {
        guard (1...4096).contains(uploadMiB) else { throw ValidationError("--upload-mib: give 1 to 4096") }
        guard (10...1_000_000).contains(requests) else { throw ValidationError("--requests: give 10 to 1000000") }
        guard (1...21).contains(rounds) else { throw ValidationError("--rounds: give 1 to 21") }
        guard (1...1000).contains(concurrency) else { throw ValidationError("--concurrency: give 1 to 1000") }
    }

    func run() async throws {
        let origin = try await OriginProcess.start()
        defer { origin.stop() }
        let dns = try await DNSServer.start { _, _ in DNSServer.Answer(addresses: [IPAddress("127.0.0.1")!], ttl: 3600)
        }
        var config = ResolverConfiguration(providers: [.dns(IPAddress("127.0.0.1")!, port: dns.port)])
        config.policy = .all
        config.fallbackToLocalDNS = false
        let resolver = try HTTPDNSResolver(configuration: config, engine: try HTTPEngine())
        let setup = try HTTPDNSURLProtocol.Setup(resolver: resolver)
        let interception = Interception(setup)
        let ours = URLSession(configuration: interception.enabled(.ephemeral))
        let plain = URLSession(configuration: .ephemeral)
        print(
            "origin: in-process HTTP/1.1 on 127.0.0.1:\(origin.port); ours: http://origin.test:\(origin.port) via HTTPDNSURLProtocol (names from an in-process DNS server)"
        )

        // 1. Streamed upload.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-bench-\(UUID()).bin")
        defer { try? FileManager.default.removeItem(at: file) }
        let size = uploadMiB << 20
        let digest = try writeTestFile(file, bytes: size)
        print("")
        print("upload: \(uploadMiB) MiB file, sha256 \(digest.prefix(16))...")
        var oursSeconds: [Double] = []
        var curlSeconds: [Double] = []
        var peakGrowth = 0
        var exact = true
        for _ in 0..<rounds {
            var request = URLRequest(url: URL(string: "http://origin.test:\(origin.port)/upload")!)
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(url: file)
            request.setValue("\(size)", forHTTPHeaderField: "Content-Length")
            request.timeoutInterval = 600
            let rssBefore = Memory.resetPeak()
            let t0 = ContinuousClock.now
            let (data, _) = try await ours.data(for: request)
            oursSeconds.append((ContinuousClock.now - t0).seconds)
            peakGrowth = max(peakGrowth, Memory.peak() - rssBefore)
            exact = exact && String(decoding: data, as: UTF8.self) == "\(size) \(digest)"

            let t1 = ContinuousClock.now
            let curl = try await runCurl([
                // No "Expect: 100-continue" (curl would wait a second for it; the origin does not send it).
                "-sS", "--data-binary", "@\(file.path)", "-H", "Content-Type: application/octet-stream", "-H",
                "Expect:",
                "http://127.0.0.1:\(origin.port)/upload",
            ])
            curlSeconds.append((ContinuousClock.now - t1).seconds)
            exact = exact && curl == "\(size) \(digest)"
        }
        let mib = Double(uploadMiB)
        let oursRate = mib / median(oursSeconds)
        let curlRate = mib / median(curlSeconds)
        print(
            String(
                format: "  ours (httpBodyStream)        %7.1f MiB/s   peak RSS growth %.1f MiB",
                oursRate,
                Double(peakGrowth) / 1_048_576
            )
        )
        print(String(format: "  curl --data-binary @file     %7.1f MiB/s", curlRate))
        print(
            String(
                format:
                    "  ratio ours/curl %.2fx (target >= 0.8x); byte-exact: %@ (target yes); RSS growth target <= 32 MiB",
                oursRate / curlRate,
                exact ? "yes" : "NO"
            )
        )

        // 2. Small GETs.
        let oursURL = URL(string: "http://origin.test:\(origin.port)/small")!
        let plainURL = URL(string: "http://127.0.0.1:\(origin.port)/small")!
        _ = try await ours.data(from: oursURL)
        _ = try await plain.data(from: plainURL)
        let engine = setup.engine
        let request = try HTTPEngineRequest(url: oursURL.absoluteString)
        for inFlight in [1, concurrency] {
            var oursRates: [Double] = []
            var plainRates: [Double] = []
            var engineRates: [Double] = []
            var oursCPU: [Double] = []
            var plainCPU: [Double] = []
            for _ in 0..<rounds {
                var c0 = processCPUSeconds()
                oursRates.append(
                    try await getsPerSecond(inFlight: inFlight) { try await ours.data(from: oursURL).0.count }
                )
                oursCPU.append((processCPUSeconds() - c0) / Double(requests) * 1e6)
                c0 = processCPUSeconds()
                plainRates.append(
                    try await getsPerSecond(inFlight: inFlight) { try await plain.data(from: plainURL).0.count }
                )
                plainCPU.append((processCPUSeconds() - c0) / Double(requests) * 1e6)
                engineRates.append(
                    try await getsPerSecond(inFlight: inFlight) {
                        try await engine.execute(request).body.collect(upTo: 1024).readableBytes
                    }
                )
            }
            print("")
            print("small GETs, \(inFlight) in flight, \(requests) per round, median of \(rounds):")
            print(
                String(
                    format: "  ours (HTTPDNSURLProtocol)    %8.0f req/s   %4.0f us CPU per request",
                    median(oursRates),
                    median(oursCPU)
                )
            )
            print(
                String(
                    format: "  plain URLSession (libcurl)   %8.0f req/s   %4.0f us CPU per request",
                    median(plainRates),
                    median(plainCPU)
                )
            )
            print(String(format: "  ratio ours/plain %.2fx (target >= 1.0x)", median(oursRates) / median(plainRates)))
            print(String(format: "  (the engine alone, no URLSession: %.0f req/s)", median(engineRates)))
        }

        interception.end()
        setup.engine.shutdown()
        await resolver.shutdown()
        await dns.stop()
    }

    /// Requests per second for `get` (one request, answering the body's size) run `requests` times,
    /// `inFlight` at a time. The origin answers "ok\n": any other size is an error.
    func getsPerSecond(inFlight: Int, _ get: @escaping @Sendable () async throws -> Int) async throws -> Double {
        let (calls, seconds) = try await runConcurrently(requests: requests, inFlight: inFlight) {
            guard try await get() == 3 else { throw ValidationError("unexpected answer from the origin") }
        }
        return Double(calls) / seconds
    }

    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    /// Writes `bytes` of varied content in 1 MiB pieces (never all in memory); returns its SHA-256.
    func writeTestFile(_ url: URL, bytes: Int) throws -> String {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw ValidationError("cannot write \(url.path)")
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        var piece = [UInt8](repeating: 0, count: 1 << 20)
        for i in 0..<(bytes >> 20) {
            for j in stride(from: 0, to: piece.count, by: 512) {
                piece[j] = UInt8(truncatingIfNeeded: i &* 7 &+ j / 512)
            }
            hasher.update(data: piece)
            try handle.write(contentsOf: piece)
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    func runCurl(_ arguments: [String]) async throws -> String {
        try await NIOThreadPool.singleton.runIfActive {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            process.arguments = arguments
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self)
        }
    }
}

/// `httpdns-bench origin`, started by the benchmark as a child process.
struct OriginProcess {
    let process: Process
    let port: Int

    static func start() async throws -> OriginProcess {
        let process = Process()
        process.executableURL = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["origin"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        // The first line is the port; read it off the concurrency pool.
        let line = try await NIOThreadPool.singleton.runIfActive { () -> String in
            var bytes: [UInt8] = []
            while let byte = try out.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let port = Int(line) else {
            process.terminate()
            throw ValidationError("the origin process did not start (said \"\(line)\")")
        }
        return OriginProcess(process: process, port: port)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// The origin on its own: prints its port, serves until SIGINT/SIGTERM.
struct BenchOriginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "origin",
        abstract: "The benchmark's origin server (started by `httpdns-bench urlsession`).",
        shouldDisplay: false
    )

    func run() async throws {
        let origin = try await BenchOrigin.start()
        FileHandle.standardOutput.write(Data("\(origin.port)\n".utf8))
        var logger = Logger(label: "httpdns.bench-origin")
        logger.logLevel = .warning
        try await runUntilSignalled(logger: logger) { try? await origin.stop() }
    }
}

/// CPU time of this process (every thread), in seconds.
func processCPUSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// Resident memory of this process, from /proc (Linux).
enum Memory {
    /// Resets the peak (VmHWM) to the current RSS and returns the current RSS in bytes.
    static func resetPeak() -> Int {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        return field("VmRSS")
    }

    static func peak() -> Int { field("VmHWM") }

    static func field(_ name: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            let kb = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
            return kb * 1024
        }
        return 0
    }
}

/// The benchmark's origin: answers GET /small with "ok\n", and POST /upload with "LENGTH SHA256" of
/// the body it streamed through SHA-256 (nothing is kept).
final class BenchOrigin: Sendable {
    let channel: any Channel
    var port: Int { channel.localAddress!.port! }

    private init(channel: any Channel) { self.channel = channel }

    static func start() async throws -> BenchOrigin {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return BenchOrigin(channel: channel)
    }

    func stop() async throws { try await channel.close() }

    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        var hasher = SHA256()
        var length = 0
        var keepAlive = true

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                hasher = SHA256()
                length = 0
                keepAlive = head.isKeepAlive
            case .body(let buffer):
                length += buffer.readableBytes
                buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            case .end:
                let text =
                    length == 0 ? "ok\n" : "\(length) \(hasher.finalize().map { String(format: "%02x", $0) }.joined())"
                var headers = HTTPHeaders([("content-length", "\(text.utf8.count)"), ("content-type", "text/plain")])
                if !keepAlive { headers.add(name: "connection", value: "close") }
                context.write(
                    wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                    promise: nil
                )
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
                let closing = keepAlive ? nil : context.channel
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in closing?.close(promise: nil) }
            }
        }
    }
}
