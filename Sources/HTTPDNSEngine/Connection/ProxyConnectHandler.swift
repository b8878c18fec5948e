// The CONNECT handshake with an HTTP proxy, before TLS: `ProxyConnectReply` reads the proxy's answer
// (a pure parser, tested without sockets), and `ProxyConnectHandler` sits nearest the socket, holds the
// channel's activation back from the handlers behind it (so TLS does not start), sends the CONNECT,
// and on 200 lets the activation through and leaves the pipeline.

import HTTPDNSCore
import NIOCore

/// What a proxy answered to CONNECT, read from the bytes received so far.
enum ProxyConnectReply: Equatable {
    /// The head is not complete yet.
    case needMore
    /// 200: the tunnel is open; `extra` bytes came after the head (from the origin).
    case established(extra: [UInt8])
    /// Any other status: the proxy refused (`407`: it wants credentials).
    case refused(status: Int, reason: String)
    /// Not an HTTP response, or a head over the limit.
    case malformed(String)

    /// The longest response head accepted.
    static let maxHead = 16 * 1024

    static func parse(_ bytes: [UInt8]) -> ProxyConnectReply {
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: [13, 10, 13, 10]) }) else {
            return bytes.count > maxHead ? .malformed("a response head over \(maxHead) bytes") : .needMore
        }
        guard end <= maxHead else { return .malformed("a response head over \(maxHead) bytes") }
        let statusLine =
            bytes[..<end].split(separator: 13, maxSplits: 1).first.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]) else {
            return .malformed("not an HTTP response: \"\(statusLine.prefix(80))\"")
        }
        guard status == 200 else {
            return .refused(status: status, reason: parts.count > 2 ? String(parts[2]) : "")
        }
        return .established(extra: Array(bytes[(end + 4)...]))
    }
}

/// A proxy's refusal of a tunnel, kept as the `underlying` of the engine's error: trying again does not
/// help (`ConnectAttemptFailed.retryMayHelp`).
struct ProxyRefusal: Error, Equatable {
    var status: Int
}

extension HTTPEngineError {
    /// The status a proxy refused the tunnel with (407: it wants credentials), nil for other errors.
    package var proxyRefusalStatus: Int? { (underlying as? ProxyRefusal)?.status }
}

/// Opens a CONNECT tunnel to `target` (`host:port`) through the proxy this channel is connected to.
final class ProxyConnectHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let target: String
    let proxy: HTTPProxy
    let promise: EventLoopPromise<Void>
    private var received: [UInt8] = []
    private var done = false

    init(target: String, proxy: HTTPProxy, promise: EventLoopPromise<Void>) {
        self.target = target
        self.proxy = proxy
        self.promise = promise
    }

    /// The request: the target in authority form, its Host, and the credentials when there are any.
    var request: String {
        var head = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization = proxy.authorization { head += "Proxy-Authorization: \(authorization)\r\n" }
        return head + "\r\n"
    }

    func channelActive(context: ChannelHandlerContext) {
        // Held back from the handlers behind: TLS starts once the tunnel is open.
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return context.fireChannelRead(data) }
        var buffer = unwrapInboundIn(data)
        received += buffer.readBytes(length: buffer.readableBytes) ?? []
        switch ProxyConnectReply.parse(received) {
        case .needMore:
            return
        case .established(let extra):
            done = true
            promise.succeed(())
            context.fireChannelActive()
            if !extra.isEmpty {
                context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: extra)))
            }
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        case .refused(let status, let reason):
            let advice =
                status == 407
                ? " (it wants credentials: give them in the proxy URL, http://USER:PASSWORD@HOST:PORT, from the environment)"
                : ""
            fail(
                context,
                HTTPEngineError(
                    .connectFailed,
                    "proxy \(proxy) refused the tunnel to \(target): \(status) \(reason)\(advice)",
                    underlying: ProxyRefusal(status: status)
                )
            )
        case .malformed(let why):
            fail(context, HTTPEngineError(.protocolError, "proxy \(proxy) answered CONNECT with \(why)"))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done {
            fail(
                context,
                HTTPEngineError(
                    .connectFailed,
                    "proxy \(proxy) closed the connection before opening the tunnel to \(target)"
                )
            )
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !done { fail(context, error) }
        context.fireErrorCaught(error)
    }

    private func fail(_ context: ChannelHandlerContext, _ error: any Error) {
        guard !done else { return }
        done = true
        promise.fail(error)
        context.close(promise: nil)
    }
}
