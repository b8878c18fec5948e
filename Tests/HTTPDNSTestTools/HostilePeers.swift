// Hostile peers written for the tests: a TCP server that runs a script per connection (a raw-frame
// HTTP/2 origin, a server that answers garbage), a raw client, HTTP/2 frame building, and the memory of
// a process read from /proc. Nothing here is mocked: the code under attack is the real binary or the
// real handler, on loopback.

import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

typealias RawInbound = NIOAsyncChannelInboundStream<ByteBuffer>
typealias RawOutbound = NIOAsyncChannelOutboundWriter<ByteBuffer>

/// A loopback TCP server that runs `script` for every connection it accepts.
final class ScriptedServer: Sendable {
    let port: Int
    private let channel: any Channel
    private let task: Task<Void, Never>

    private init(port: Int, channel: any Channel, task: Task<Void, Never>) {
        self.port = port
        self.channel = channel
        self.task = task
    }

    static func start(
        _ script: @escaping @Sendable (RawInbound, RawOutbound) async throws -> Void
    ) async throws -> ScriptedServer {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(isOutboundHalfClosureEnabled: true)  // finish() sends FIN
                    )
                }
            }
        let port = server.channel.localAddress!.port!
        let channel = server.channel
        let task = Task {
            _ = try? await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        group.addTask {
                            try? await connection.executeThenClose { inbound, outbound in
                                try await script(inbound, outbound)
                            }
                        }
                    }
                }
            }
        }
        return ScriptedServer(port: port, channel: channel, task: task)
    }

    func stop() async {
        try? await channel.close()
        task.cancel()
    }
}

/// Connects to 127.0.0.1:`port` and runs `body` with the connection's streams.
func withRawConnection<T: Sendable>(
    port: Int,
    _ body: (RawInbound, RawOutbound) async throws -> T
) async throws -> T {
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .channelOption(.allowRemoteHalfClosure, value: true)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                    wrappingChannelSynchronously: channel,
                    configuration: .init(isOutboundHalfClosureEnabled: true)  // finish() sends FIN
                )
            }
        }
    return try await channel.executeThenClose { inbound, outbound in try await body(inbound, outbound) }
}

/// Connects to 127.0.0.1:`port`, sends `first` once connected, then `later`, one piece every `interval`
/// (with `repeatingLast`, the last piece again and again), and returns every byte the server sent until
/// it closed the connection. Every send is made from the connection's event loop, not from the test's
/// task: on a starved machine the concurrency pool may not run a test for many seconds (20 s was seen
/// with every suite at once and two busy loops), which would let a server's timer fire before a byte the
/// test meant to send at once.
func scriptedExchange(
    port: Int,
    first: [UInt8],
    later: [[UInt8]] = [],
    every interval: TimeAmount = .seconds(1),
    repeatingLast: Bool = false
) async throws -> [UInt8] {
    let done = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: [UInt8].self)
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(
                    ScriptedClient(
                        first: first,
                        later: later,
                        interval: interval,
                        repeatingLast: repeatingLast,
                        done: done
                    )
                )
            }
        }
        .connect(host: "127.0.0.1", port: port).get()
    defer { channel.close(promise: nil) }
    return try await done.futureResult.get()
}

/// The handler behind `scriptedExchange`: lives on its connection's event loop.
private final class ScriptedClient: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let first: [UInt8]
    private var later: [[UInt8]]
    private let interval: TimeAmount
    private let repeatingLast: Bool
    private let done: EventLoopPromise<[UInt8]>
    private var received: [UInt8] = []
    private var timer: RepeatedTask?

    init(first: [UInt8], later: [[UInt8]], interval: TimeAmount, repeatingLast: Bool, done: EventLoopPromise<[UInt8]>) {
        self.first = first
        self.later = later
        self.interval = interval
        self.repeatingLast = repeatingLast
        self.done = done
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: first)), promise: nil)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { task in
            let (me, context) = bound.value
            guard let piece = me.later.first else {
                task.cancel()
                return
            }
            if me.later.count > 1 || !me.repeatingLast { me.later.removeFirst() }
            context.writeAndFlush(me.wrapOutboundOut(ByteBuffer(bytes: piece)), promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += unwrapInboundIn(data).readableBytesView
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        done.succeed(received)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A server that closes while we still send resets the connection: an end all the same.
        context.close(promise: nil)
    }
}

/// `body`'s result, or a failed test (and a thrown error) when it takes longer than `limit`: the bound of
/// a test whose failure is a hang. Generous on purpose, like `eventually`'s.
func withHangGuard<T: Sendable>(
    _ what: String,
    within limit: Duration = .seconds(120),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        let first = try await group.next()!
        return try #require(first, "\(what): still going after \(limit)", sourceLocation: sourceLocation)
    }
}

/// Reads until `count` bytes have arrived (or the stream ends) and returns them.
func readBytes(_ iterator: inout RawInbound.AsyncIterator, atLeast count: Int) async throws -> [UInt8] {
    var bytes: [UInt8] = []
    while bytes.count < count, let chunk = try await iterator.next() { bytes += chunk.readableBytesView }
    return bytes
}

/// Reads to the end of the stream (the peer closed, half-closed or reset the connection), at most
/// `limit` bytes.
func readToEnd(_ inbound: RawInbound, limit: Int = 1 << 20) async throws -> [UInt8] {
    var bytes: [UInt8] = []
    do {
        for try await chunk in inbound {
            bytes += chunk.readableBytesView
            if bytes.count > limit { break }
        }
    } catch let error as IOError where error.errnoCode == ECONNRESET {
        // A server that closes while we still send resets the connection: an end all the same.
    }
    return bytes
}

/// HTTP/2 frames by hand (RFC 9113 §4.1), including the ones a well-behaved peer never sends.
enum H2 {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
            + payload
    }

    static func settings(_ pairs: [(UInt16, UInt32)] = []) -> [UInt8] {
        frame(type: 4, pairs.flatMap { id, v in u16(id) + u32(v) })
    }
    static let settingsAck = frame(type: 4, flags: 1)
    static func ping(_ n: UInt8) -> [UInt8] { frame(type: 6, [UInt8](repeating: n, count: 8)) }
    static func windowUpdate(stream: UInt32 = 0, _ increment: UInt32) -> [UInt8] {
        frame(type: 8, stream: stream, u32(increment))
    }
    static func data(stream: UInt32, _ bytes: [UInt8], end: Bool = false) -> [UInt8] {
        frame(type: 0, flags: end ? 1 : 0, stream: stream, bytes)
    }
    /// HEADERS with `:status 200` (HPACK static index 8), END_HEADERS unless `endHeaders` is false.
    static func responseHeaders(stream: UInt32, endHeaders: Bool = true, endStream: Bool = false) -> [UInt8] {
        frame(type: 1, flags: (endHeaders ? 4 : 0) | (endStream ? 1 : 0), stream: stream, [0x88])
    }
    static func continuation(stream: UInt32, _ payload: [UInt8] = []) -> [UInt8] {
        frame(type: 9, stream: stream, payload)
    }
    /// A request HEADERS frame for GET / (static indexes :method GET, :path /, :scheme http) and an
    /// :authority literal.
    static func requestHeaders(stream: UInt32, endStream: Bool = true) -> [UInt8] {
        frame(type: 1, flags: 4 | (endStream ? 1 : 0), stream: stream, [0x82, 0x84, 0x86, 0x41, 0x01, 0x78])
    }
    /// A request HEADERS frame for POST `path` (:method POST and :scheme http by static index, :path and
    /// content-type application/dns-message as literals with indexed names), END_HEADERS, the body to
    /// follow in DATA frames.
    static func postHeaders(stream: UInt32, path: String) -> [UInt8] {
        let type = Array("application/dns-message".utf8)
        let block: [UInt8] =
            [0x83, 0x86, 0x44] + stringLength(path.utf8.count) + Array(path.utf8) + [
                0x41, 0x01, 0x78, 0x5F, UInt8(type.count),
            ]
            + type
        return frame(type: 1, flags: 4, stream: stream, block)
    }
    /// A request HEADERS frame for GET `path` (:method GET and :scheme http by static index, :path as a
    /// literal with an indexed name, :authority x), END_HEADERS and END_STREAM.
    static func getHeaders(stream: UInt32, path: String) -> [UInt8] {
        frame(
            type: 1,
            flags: 5,
            stream: stream,
            [0x82, 0x86, 0x44] + stringLength(path.utf8.count) + Array(path.utf8) + [0x41, 0x01, 0x78]
        )
    }
    /// An HPACK string's length, not Huffman-coded: a 7-bit prefix, then 7 bits a byte (RFC 7541 §5.1).
    static func stringLength(_ count: Int) -> [UInt8] {
        guard count >= 127 else { return [UInt8(count)] }
        var bytes: [UInt8] = [127]
        var rest = count - 127
        while rest >= 128 {
            bytes.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        return bytes + [UInt8(rest)]
    }
    /// PUSH_PROMISE for stream 2 on `stream`, with a GET / request block.
    static func pushPromise(stream: UInt32) -> [UInt8] {
        frame(type: 5, flags: 4, stream: stream, u32(2) + [0x82, 0x84, 0x86, 0x41, 0x01, 0x78])
    }

    /// One frame as read: its type, flags, stream and payload.
    struct Frame: Equatable {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]
    }

    /// The whole frames in `bytes` (a server's, so no preface), in order; a partial last frame is left out.
    static func frames(in bytes: [UInt8]) -> [Frame] {
        var frames: [Frame] = []
        var at = 0
        while at + 9 <= bytes.count {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            guard at + 9 + length <= bytes.count else { break }
            let stream = bytes[at + 5..<at + 9].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
            frames.append(
                Frame(
                    type: bytes[at + 3],
                    flags: bytes[at + 4],
                    stream: stream,
                    payload: Array(bytes[at + 9..<at + 9 + length])
                )
            )
            at += 9 + length
        }
        return frames
    }

    static func u16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    static func u32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }
}

/// Whether the floods run: thousands of connections or hundreds of megabytes against a real `httpdns`,
/// which keep both cores busy for seconds. scripts/test.sh (and CI) runs them, in the hostile pass that
/// follows the other suites; a plain `swift test`, where every suite runs at once, skips them, because
/// they would starve the timeouts of the tests beside them. `HTTPDNS_FLOODS=1` runs them anyway.
let floodsRun: Bool = {
    let env = ProcessInfo.processInfo.environment
    return env["HTTPDNS_FLOODS"] == "1" || env["HTTPDNS_PEERS"] == "1" || env["CI"] == "true"
}()

extension Trait where Self == ConditionTrait {
    /// A flood test: it runs where `floodsRun` says.
    static var flood: Self { .enabled(if: floodsRun, "a flood: scripts/test.sh runs it, or set HTTPDNS_FLOODS=1") }
}

/// Resident memory of a process in bytes (VmRSS from /proc), nil where there is no /proc.
func residentBytes(pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return nil }
    let kib = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    return kib.map { $0 * 1024 }
}

/// Whether process `pid` has started a SwiftNIO event-loop thread (Linux names them `NIO-ELT-…`, or
/// `NIO-SGLTN-…` for the singleton group): it is past its runtime's start and running its own code.
func hasEventLoopThread(pid: Int32) -> Bool {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return tasks.contains { task in
        ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? "").hasPrefix("NIO-")
    }
}

/// The `httpdns` binary every CLI test runs: `HTTPDNS_BINARY` when set (a sanitizer build's, so the
/// processes the tests start are checked too), else the plain debug build's.
let httpdnsBinary: String =
    ProcessInfo.processInfo.environment["HTTPDNS_BINARY"]
    ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent(".build/debug/httpdns").path

/// The `httpdns-bench` binary beside `httpdns`: the benchmarks and the crash-test driver (`save-loop`).
let httpdnsBenchBinary: String =
    URL(fileURLWithPath: httpdnsBinary).deletingLastPathComponent().appendingPathComponent("httpdns-bench").path

/// A CLI run with the time it took.
func timedCLI(_ arguments: [String]) async throws -> (CLIResult, Duration) {
    let started = ContinuousClock.now
    let r = try await runCLI(arguments)
    return (r, ContinuousClock.now - started)
}
