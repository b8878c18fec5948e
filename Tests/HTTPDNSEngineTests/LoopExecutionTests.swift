// Running on the event loop: the task executor that keeps a caller's task on an engine loop,
// and the HTTP/2 connection's flush coalescing. No sockets: EmbeddedChannel and a one-thread group.

@testable import HTTPDNSEngine
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@Suite struct LoopExecutionTests {
    /// A server on `group` that accepts and never answers (a request waits, its connection stays open
    /// for the check), its port, and an engine on the same group.
    func silentServerAndEngine(_ group: MultiThreadedEventLoopGroup) async throws -> (any Channel, Int, HTTPEngine) {
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        return (server, try #require(server.localAddress?.port), try HTTPEngine(eventLoopGroup: group))
    }

    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
    @Test func aTaskPreferringTheLoopExecutorRunsAndResumesOnThatLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loop = group.next()
        let other = group.next()
        let executor = EventLoopTaskExecutor(loop)
        let onLoop = try await Task(executorPreference: executor) { () -> [Bool] in
            var seen = [loop.inEventLoop]
            // A future completed on another loop: the task is resumed on its own one.
            _ = try await other.submit { 1 }.get()
            seen.append(loop.inEventLoop)
            await Task.yield()
            seen.append(loop.inEventLoop)
            return seen
        }.value
        #expect(onLoop == [true, true, true])
        let elsewhere = await Task { loop.inEventLoop }.value
        #expect(elsewhere == false)
        try await group.shutdownGracefully()
    }

    /// The pool opens connections from its own task; the one a caller on an engine loop asked for must
    /// still live on that caller's loop, or every exchange on it costs a thread hop (a measured
    /// that regression: loop callers fell to the default pool's rate).
    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
    @Test func aConnectionIsMadeOnTheLoopOfTheCallerThatNeededIt() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 3)
        let (server, port, engine) = try await silentServerAndEngine(group)
        let loops = [group.next(), group.next(), group.next()]
        for caller in loops {
            let request = Task(executorPreference: EventLoopTaskExecutor(caller)) {
                try await engine.execute(try HTTPEngineRequest(url: "http://127.0.0.1:\(port)/"))
            }
            func made() -> (any Channel)? {
                engine.pool.state.withLockedValue { $0.connections.values.first?.channel }
            }
            try await eventually("the connection was made") { made() != nil }
            let channel = try #require(made())
            #expect(try await channel.eventLoop.submit { caller.inEventLoop }.get())
            request.cancel()
            _ = await request.result
            channel.close(promise: nil)
            try await eventually("the connection left the pool") { engine.openConnections == 0 }
        }
        engine.shutdown()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// A caller on Swift's default pool runs its exchange on the connection's loop (two thread crossings
    /// instead of one per step), except when the request body streams from the app's own sequence,
    /// which may block and so never runs on an event loop.
    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
    @Test func anExchangeFromThePoolRunsOnItsConnectionsLoopUnlessTheAppStreamsTheBody() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let (server, port, engine) = try await silentServerAndEngine(group)
        let waiting = Task { try await engine.execute(try HTTPEngineRequest(url: "http://127.0.0.1:\(port)/")) }
        func leased() -> Connection? { engine.pool.state.withLockedValue { $0.connections.values.first } }
        try await eventually("the connection was made") { leased() != nil }
        let connection = try #require(leased())
        let onLoop = { @Sendable in connection.channel.eventLoop.inEventLoop }
        #expect(try await Task { try await engine.onLoop(of: connection, unless: nil) { onLoop() } }.value)
        #expect(
            try await Task { try await engine.onLoop(of: connection, unless: .bytes([1, 2, 3])) { onLoop() } }.value
        )
        let appStream = HTTPRequestBody.stream(length: nil) { AsyncThrowingStream { $0.finish() } }
        let streamed = try await Task { try await engine.onLoop(of: connection, unless: appStream) { onLoop() } }.value
        #expect(streamed == false)
        waiting.cancel()
        _ = await waiting.result
        engine.shutdown()
        try await server.close()
        try await group.shutdownGracefully()
    }

    @Test func flushesAskedForInOneLoopTurnReachTheConnectionAsOne() throws {
        let counter = FlushCounter()
        let channel = EmbeddedChannel(handlers: [counter, FlushCoalescer()])
        defer { _ = try? channel.finish() }
        channel.write(ByteBuffer(string: "a"), promise: nil)
        channel.flush()
        channel.write(ByteBuffer(string: "b"), promise: nil)
        channel.flush()
        #expect(counter.flushes == 0)  // not yet: the coalesced flush is a task on the loop
        (channel.eventLoop as! EmbeddedEventLoop).run()
        #expect(counter.flushes == 1)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "a"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "b"))
        // The next turn's flush is carried out again.
        channel.flush()
        (channel.eventLoop as! EmbeddedEventLoop).run()
        #expect(counter.flushes == 2)
    }
}

/// Counts the flushes that pass towards the socket.
final class FlushCounter: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = NIOAny
    var flushes = 0

    func flush(context: ChannelHandlerContext) {
        flushes += 1
        context.flush()
    }
}
