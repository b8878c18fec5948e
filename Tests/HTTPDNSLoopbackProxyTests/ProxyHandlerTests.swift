// The proxy's connection handler on an EmbeddedChannel, with the proxy's real pipeline (head limiter,
// HTTP decoder and encoder): the exact bytes a client gets, time moved by hand. CONNECT goes to a
// connector stub whose result the test decides, and the tunnel's target is another EmbeddedChannel.

@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy
@testable import HTTPDNSTestSupport
import HTTPDNSCore
import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

private struct Refused: Error, CustomStringConvertible {
    var description: String { "connection refused" }
}

/// One client connection: its channel, and the tunnels the proxy recorded.
private struct Connection {
    let channel: EmbeddedChannel
    let recorded: NIOLockedValueBox<[HTTPDNSProxy.TunnelMetrics]>
    let configuration: HTTPDNSProxy.Configuration

    /// The proxy's own port, as the PAC file names it.
    static let proxyPort = 8899

    init(
        _ tweak: (inout HTTPDNSProxy.Configuration) -> Void = { _ in },
        connector: ProxyHandler.Connector? = nil
    ) throws {
        var configuration = HTTPDNSProxy.Configuration()
        tweak(&configuration)
        let recorded = NIOLockedValueBox<[HTTPDNSProxy.TunnelMetrics]>([])
        let pacConfiguration = configuration
        let shared = ProxyShared(
            configuration: configuration,
            resolver: makeResolver([]),
            engine: try HTTPEngine(),
            logger: testLogger,
            record: { m in recorded.withLockedValue { $0.append(m) } },
            pac: { HTTPDNSProxy.pacFile(pacConfiguration, port: $0) }
        )
        let channel = EmbeddedChannel()
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(HeadLimiter(maxBytes: configuration.maxHeaderBytes))
        try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)))
        try sync.addHandler(HTTPResponseEncoder())
        try sync.addHandler(ProxyHandler(shared: shared, connector: connector))
        channel.localAddress = try SocketAddress(ipAddress: "127.0.0.1", port: Self.proxyPort)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50000)).wait()
        self.channel = channel
        self.recorded = recorded
        self.configuration = configuration
    }

    func send(_ text: String) throws { try channel.writeInbound(ByteBuffer(string: text)) }

    /// Everything the proxy wrote to the client since the last call.
    func written() throws -> String { try drain(channel) }
}

private func drain(_ channel: EmbeddedChannel) throws -> String {
    var text = ""
    while let part = try channel.readOutbound(as: IOData.self) {
        guard case .byteBuffer(let buffer) = part else {
            Issue.record("a file region was written")
            continue
        }
        text += String(buffer: buffer)
    }
    return text
}

/// A text reply as the proxy's encoder writes it.
private func textReply(_ status: String, _ body: String, close: Bool = true) -> String {
    "HTTP/1.1 \(status)\r\ncontent-type: text/plain\r\ncontent-length: \(body.utf8.count)\r\n"
        + (close ? "connection: close\r\n" : "") + "\r\n" + body
}

@Suite struct ProxyHandlerTests {
    @Test func aHeadThatNeverEndsGets408WhenTheTimerFiresAndIsClosed() throws {
        let c = try Connection { $0.requestHeadTimeout = .seconds(10) }
        try c.send("CONNECT 127.0.0.1:")
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(try c.written() == "")
        #expect(c.channel.isActive)
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try c.written() == "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        #expect(!c.channel.isActive)
    }

    @Test func anOversizedHeadGets431AndIsClosed() throws {
        let c = try Connection()
        try c.send("CONNECT a.test:443 HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 20_000) + "\r\n\r\n")
        #expect(
            try c.written()
                == "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        #expect(!c.channel.isActive)
    }

    @Test func anOversizedHeadSentInPiecesGets431() throws {
        let c = try Connection { $0.maxHeaderBytes = 64 }
        try c.send("GET http://a.test/ HTTP/1.1\r\n")
        try c.send("X-Pad: " + String(repeating: "b", count: 40) + "\r\n")
        #expect(try c.written().hasPrefix("HTTP/1.1 431 "))
        #expect(!c.channel.isActive)
    }

    @Test func aConnectToADisallowedPortGets403AndIsRecorded() throws {
        let c = try Connection()
        try c.send("CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.written() == textReply("403 Forbidden", "CONNECT to port 22 is not allowed (allowed: 80, 443)\n"))
        #expect(!c.channel.isActive)
        let recorded = c.recorded.withLockedValue { $0 }
        #expect(recorded.map(\.error) == ["port not allowed"])
        #expect(recorded.first?.host == "127.0.0.1")
        #expect(recorded.first?.port == 22)
    }

    @Test func anAbsoluteFormRequestToADisallowedPortGets403() throws {
        let c = try Connection()
        try c.send("GET http://127.0.0.1:8080/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(
            try c.written() == textReply("403 Forbidden", "forwarding to port 8080 is not allowed (allowed: 80, 443)\n")
        )
        #expect(!c.channel.isActive)
    }

    /// A connection (head timeout 10 s, keep-alive timeout 60 s) whose first request, the PAC file, was
    /// answered: it waits for a next one.
    private func keptAliveConnection() throws -> Connection {
        let c = try Connection {
            $0.requestHeadTimeout = .seconds(10)
            $0.keepAliveTimeout = .seconds(60)
        }
        try c.send("GET /proxy.pac HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try c.written()
        return c
    }

    @Test func theHeadTimerDoesNotFireAfterTheHeadAndTheKeepAliveTimerCloses() throws {
        let c = try keptAliveConnection()
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(try c.written() == "")
        #expect(c.channel.isActive)
        // No byte of a next request for the keep-alive timeout: closed without a reply.
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try c.written() == "")
        #expect(!c.channel.isActive)
    }

    @Test func aNextHeadIsTimedFromItsFirstByte() throws {
        let c = try keptAliveConnection()
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(50))
        try c.send("GET /proxy.pac HTTP/1.1\r\n")
        // The keep-alive timer stopped with the first byte; the head timer runs from there.
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        try c.send("Host: x\r\n")
        #expect(c.channel.isActive)
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try c.written().hasPrefix("HTTP/1.1 408"))
        #expect(!c.channel.isActive)
    }

    @Test func thePACFileIsServedAndTheConnectionKeptAlive() throws {
        let c = try Connection { $0.pacHosts = [try! HostPattern("*.example.com")] }
        try c.send("GET /proxy.pac HTTP/1.1\r\nHost: x\r\n\r\n")
        let pac = HTTPDNSProxy.pacFile(c.configuration, port: Connection.proxyPort)
        #expect(pac.contains("dnsDomainIs(host, \".example.com\")"))
        #expect(
            try c.written()
                == "HTTP/1.1 200 OK\r\ncontent-type: application/x-ns-proxy-autoconfig\r\ncontent-length: \(pac.utf8.count)\r\n\r\n\(pac)"
        )
        #expect(c.channel.isActive)
        // A second request on the same connection, which asks to close it.
        try c.send("GET /proxy.pac HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(try c.written().hasSuffix("connection: close\r\n\r\n\(pac)"))
        #expect(!c.channel.isActive)
    }

    @Test func aRequestThatIsNoProxyRequestGets400() throws {
        let c = try Connection()
        try c.send("GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(
            try c.written()
                == textReply(
                    "400 Bad Request",
                    "this is a proxy: send CONNECT host:port or an absolute http:// URL (or GET /proxy.pac)\n"
                )
        )
        #expect(!c.channel.isActive)
    }

    @Test func garbageGets400NamingTheParserError() throws {
        let c = try Connection()
        // The decoder's error also comes back out of the pipeline; the reply is what matters.
        _ = try? c.send("\u{01}\u{02} nonsense\r\n\r\n")
        let reply = try c.written()
        #expect(reply.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(reply)")
        #expect(reply.contains("\r\n\r\nmalformed request: "), "\(reply)")
        #expect(!c.channel.isActive)
    }

    @Test func missingCredentialsGet407() throws {
        let c = try Connection { $0.credentials = ("u", "p") }
        try c.send("CONNECT a.test:443 HTTP/1.1\r\n\r\n")
        let body = "proxy authentication required\n"
        #expect(
            try c.written()
                == "HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic realm=\"httpdns\"\r\ncontent-type: text/plain\r\ncontent-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n\(body)"
        )
    }

    @Test func aHalfCloseBeforeAWholeHeadCloses() throws {
        let c = try Connection()
        try c.send("CONNECT a.te")
        c.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(try c.written() == "")
        #expect(!c.channel.isActive)
    }

    // MARK: CONNECT

    @Test func aFailedConnectGets502AndIsRecorded() throws {
        let c = try Connection(connector: { _, _, loop in loop.makeFailedFuture(Refused()) })
        try c.send("CONNECT a.test:443 HTTP/1.1\r\n\r\n")
        #expect(
            try c.written() == textReply("502 Bad Gateway", "could not connect to a.test:443: connection refused\n")
        )
        #expect(!c.channel.isActive)
        #expect(c.recorded.withLockedValue { $0.map(\.error) } == ["connection refused"])
    }

    @Test func aConnectedTargetIsGluedAndGetsTheBytesSentBeforeThe200() throws {
        let target = NIOLockedValueBox<(host: String, port: Int)?>(nil)
        let pending = NIOLockedValueBox<EventLoopPromise<any Channel>?>(nil)
        let c = try Connection(connector: { host, port, loop in
            target.withLockedValue { $0 = (host, port) }
            let promise = loop.makePromise(of: (any Channel).self)
            pending.withLockedValue { $0 = promise }
            return promise.futureResult
        })
        try c.send("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\nEARLY")
        #expect(target.withLockedValue { $0?.host } == "a.test")
        #expect(target.withLockedValue { $0?.port } == 443)
        #expect(try c.written() == "")
        // The head timer was stopped by the head: connecting may take longer than it.
        c.channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(try c.written() == "")

        let upstream = EmbeddedChannel(loop: c.channel.embeddedEventLoop)
        upstream.remoteAddress = try SocketAddress(ipAddress: "192.0.2.7", port: 443)
        try upstream.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: 443)).wait()
        pending.withLockedValue { $0 }?.succeed(upstream)
        // The embedded loop runs the callbacks NIO queued meanwhile (the flush once the decoder has left).
        c.channel.embeddedEventLoop.run()

        #expect(try c.written() == "HTTP/1.1 200 Connection Established\r\n\r\n")
        #expect(try drain(upstream) == "EARLY")
        // The HTTP handlers have left: what follows is bytes, both ways.
        #expect(throws: (any Error).self) { try c.channel.pipeline.syncOperations.handler(type: ProxyHandler.self) }
        try c.send("hello")
        #expect(try drain(upstream) == "hello")
        try upstream.writeInbound(ByteBuffer(string: "world"))
        #expect(try c.written() == "world")

        // Closing one side closes the other, and the tunnel is recorded with its bytes.
        try c.channel.close().wait()
        c.channel.embeddedEventLoop.run()
        #expect(!upstream.isActive)
        let recorded = c.recorded.withLockedValue { $0 }
        #expect(recorded.count == 1)
        #expect(recorded.first?.host == "a.test")
        #expect(recorded.first?.address == "192.0.2.7:443")
        #expect(recorded.first?.bytesUp == 10)
        #expect(recorded.first?.bytesDown == 5)
        #expect(recorded.first?.error == nil)
    }

    @Test func aTargetThatConnectsAfterTheClientLeftIsClosed() throws {
        let pending = NIOLockedValueBox<EventLoopPromise<any Channel>?>(nil)
        let c = try Connection(connector: { _, _, loop in
            let promise = loop.makePromise(of: (any Channel).self)
            pending.withLockedValue { $0 = promise }
            return promise.futureResult
        })
        try c.send("CONNECT a.test:443 HTTP/1.1\r\n\r\n")
        try c.channel.close().wait()
        let upstream = EmbeddedChannel(loop: c.channel.embeddedEventLoop)
        try upstream.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: 443)).wait()
        pending.withLockedValue { $0 }?.succeed(upstream)
        #expect(!upstream.isActive)
        #expect(try drain(upstream) == "")
    }
}
