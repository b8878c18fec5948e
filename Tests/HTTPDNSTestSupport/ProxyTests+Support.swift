// The loopback proxy: real curl and headless Chromium through it, raw CONNECT clients for limits and
// load, an in-process echo server as a tunnel target where every byte must come back.
/// Echoes every byte back.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy
@testable import HTTPDNSLookup
@testable import HTTPDNSTestTools
import NIOCore
import NIOPosix
import Testing

final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.write(data, promise: nil) }
    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

func startEcho() async throws -> any Channel {
    try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.backlog, value: 1024)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler()) }
        }
        .bind(host: "127.0.0.1", port: 0).get()
}

/// A raw proxy client: sends `request` (a CONNECT), returns the status line, then pushes `payload`
/// through the tunnel and returns what comes back (as many bytes as were sent).
func rawTunnel(proxyPort: Int, request: String, payload: [UInt8]) async throws -> (String, [UInt8]) {
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: proxyPort) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
    return try await channel.executeThenClose { inbound, outbound in
        try await outbound.write(ByteBuffer(string: request))
        var iterator = inbound.makeAsyncIterator()
        var head = [UInt8]()
        var rest = [UInt8]()
        while true {
            guard let chunk = try await iterator.next() else { return (String(decoding: head, as: UTF8.self), []) }
            head += chunk.readableBytesView
            if let end = head.indices.first(where: { head[$0...].starts(with: [13, 10, 13, 10]) }) {
                rest = Array(head[(end + 4)...])
                head = Array(head[..<end])
                break
            }
        }
        let status = String(decoding: head, as: UTF8.self).split(separator: "\r\n").first.map(String.init) ?? ""
        guard status.contains(" 200 "), !payload.isEmpty else { return (status, rest) }
        try await outbound.write(ByteBuffer(bytes: payload))
        var echoed = rest
        while echoed.count < payload.count, let chunk = try await iterator.next() { echoed += chunk.readableBytesView }
        return (status, echoed)
    }
}

func startProxy(
    _ resolver: HTTPDNSResolver,
    engine: HTTPEngine,
    _ tweak: (inout HTTPDNSProxy.Configuration) -> Void = { _ in }
) async throws -> HTTPDNSProxy {
    var config = HTTPDNSProxy.Configuration()
    // A client starved by the whole parallel suite on 2 cores was once slower than the default 10 s head
    // deadline (408 instead of the answer under test). Tests of the deadlines set their own in `tweak`.
    config.requestHeadTimeout = .seconds(600)
    config.keepAliveTimeout = .seconds(600)
    tweak(&config)
    return try await HTTPDNSProxy.start(config, resolver: resolver, engine: engine, logger: testLogger)
}

/// curl with `arguments`, through `proxy`, bounded by `maxTime` seconds.
func curl(through proxy: HTTPDNSProxy, maxTime: Int, _ arguments: [String]) async throws -> CLIResult {
    try await runProcess(
        "/usr/bin/curl",
        ["-sS", "--max-time", "\(maxTime)", "-x", "http://127.0.0.1:\(proxy.port)"] + arguments
    )
}
