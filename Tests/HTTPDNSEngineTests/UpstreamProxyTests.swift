// The engine behind an HTTP proxy, without sockets: the proxy's answer to CONNECT, proxy URLs and curl's
// variables, and the handler that holds TLS back until the tunnel is open (EmbeddedChannel). The same
// against tinyproxy is in HTTPDNSIntegrationTests (UpstreamProxyTests).

import HTTPDNSCore
import NIOCore
import NIOEmbedded
import Testing

@testable import HTTPDNSEngine

@Suite struct UpstreamProxyTests {
    @Test func theProxysAnswerIsReadWhenItsHeadIsComplete() {
        #expect(ProxyConnectReply.parse(Array("HTTP/1.1 200 Connection".utf8)) == .needMore)
        #expect(
            ProxyConnectReply.parse(Array("HTTP/1.1 200 Connection established\r\n\r\n\u{16}\u{03}".utf8))
                == .established(extra: [0x16, 0x03])
        )
        #expect(
            ProxyConnectReply.parse(Array("HTTP/1.0 407 Proxy Authentication Required\r\nX: y\r\n\r\n".utf8))
                == .refused(status: 407, reason: "Proxy Authentication Required")
        )
        guard case .malformed = ProxyConnectReply.parse(Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)) else {
            Issue.record("a non-HTTP answer is malformed")
            return
        }
        guard case .malformed = ProxyConnectReply.parse([UInt8](repeating: 0x41, count: 20_000)) else {
            Issue.record("a head without end past 16 KiB is malformed")
            return
        }
    }

    @Test func proxyURLsAreReadAsCurlReadsThem() throws {
        let full = try HTTPProxy(url: "http://alice:s%40crt@proxy.corp:3128")
        #expect(full.host == "proxy.corp" && full.port == 3128)
        #expect(full.user == "alice" && full.password == "s@crt")
        #expect(full.description == "http://proxy.corp:3128")
        #expect(!String(reflecting: full).contains("s@crt") && !"\(dumped(full))".contains("s@crt"))
        let bare = try HTTPProxy(url: "proxy.corp")
        #expect(bare.port == 1080 && bare.user == nil)
        #expect(try HTTPProxy(url: "[::1]:8080").host == "::1")
        for refused in ["https://proxy.corp:443", "socks5://proxy.corp:1080", "http://:8080"] {
            #expect(throws: HTTPDNSConfigurationError.self) { try HTTPProxy(url: refused) }
        }
        do {
            _ = try HTTPProxy(url: "socks5://bob:hunter2@proxy.corp")
        } catch {
            #expect(!"\(error)".contains("hunter2"), "\(error)")
        }
    }

    @Test func curlsVariablesChooseAProxyPerScheme() throws {
        let settings = try #require(
            try HTTPProxySettings.environment([
                "HTTPS_PROXY": "http://secure:3128", "HTTP_PROXY": "http://cgi-set:80", "all_proxy": "http://all:8080",
                "no_proxy": " internal.example , .corp.example,10.0.0.1,[::1]",
            ])
        )
        #expect(settings.proxy(scheme: "https", host: "api.example.com")?.host == "secure")
        // HTTP_PROXY (upper case) is what a CGI request can set: never read; all_proxy stands in.
        #expect(settings.proxy(scheme: "http", host: "api.example.com")?.host == "all")
        for direct in ["internal.example", "a.internal.example", "corp.example", "x.corp.example", "10.0.0.1", "::1"] {
            #expect(settings.proxy(scheme: "https", host: direct) == nil, "\(direct)")
        }
        #expect(settings.proxy(scheme: "https", host: "notinternal.example") != nil)
        #expect(try HTTPProxySettings.environment(["no_proxy": "*"]) == nil)
        let everything = HTTPProxySettings(all: HTTPProxy(host: "p", port: 1), noProxy: ["*"])
        #expect(everything.proxy(scheme: "https", host: "anything.example") == nil)
    }

    @Test func theTunnelOpensBeforeTLSSeesTheChannel() throws {
        let channel = EmbeddedChannel()
        let promise = channel.eventLoop.makePromise(of: Void.self)
        var proxy = HTTPProxy(host: "127.0.0.1", port: 3128)
        proxy.user = "u"
        proxy.password = "p"
        let recorder = ActivationRecorder()
        try channel.pipeline.syncOperations.addHandler(
            ProxyConnectHandler(target: "93.184.216.34:443", proxy: proxy, promise: promise)
        )
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        let sent = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(
            String(buffer: sent)
                == "CONNECT 93.184.216.34:443 HTTP/1.1\r\nHost: 93.184.216.34:443\r\nProxy-Authorization: Basic dTpw\r\n\r\n"
        )
        #expect(!recorder.active, "TLS must not start before the tunnel is open")
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n"))
        #expect(!recorder.active)
        try channel.writeInbound(ByteBuffer(string: "\r\nfirst bytes"))
        #expect(recorder.active)
        #expect(recorder.read == "first bytes")
        #expect(throws: Never.self) { try promise.futureResult.wait() }
        #expect(throws: (any Error).self) {
            try channel.pipeline.syncOperations.handler(type: ProxyConnectHandler.self)
        }
        _ = try channel.finish()
    }

    @Test func aRefusalFailsTheTunnelAndSaysWhatToDo() throws {
        let channel = EmbeddedChannel()
        let promise = channel.eventLoop.makePromise(of: Void.self)
        try channel.pipeline.syncOperations.addHandler(
            ProxyConnectHandler(target: "a.test:443", proxy: HTTPProxy(host: "127.0.0.1", port: 3128), promise: promise)
        )
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        _ = try channel.readOutbound(as: ByteBuffer.self)
        _ = try? channel.writeInbound(ByteBuffer(string: "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"))
        #expect {
            try promise.futureResult.wait()
        } throws: { error in
            guard let error = error as? HTTPEngineError else { return false }
            return error.code == .connectFailed && error.message.contains("407")
                && error.message.contains("http://USER:PASSWORD@HOST:PORT")
                && !ConnectAttemptFailed.retryMayHelp(error)
        }
        #expect(!channel.isActive)
    }
}

/// Notes what reaches the handlers behind the proxy handler.
final class ActivationRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var active = false
    var read = ""

    func channelActive(context: ChannelHandlerContext) { active = true }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        read += String(buffer: unwrapInboundIn(data))
    }
}

private func dumped(_ value: some Any) -> String {
    var out = ""
    dump(value, to: &out)
    return out
}
