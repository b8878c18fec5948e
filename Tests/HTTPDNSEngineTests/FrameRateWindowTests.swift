// The WINDOW_UPDATE flood bound (issue 29, hostile round 2): FrameRateWindow's rule on a moved clock,
// and the connection guard closing an EmbeddedChannel on a flood of tiny connection-level updates while
// large ones (what real peers send) pass.

@testable import HTTPDNSEngine
import NIOCore
import NIOEmbedded
import NIOHTTP2
import Testing

@Suite struct FrameRateWindowTests {
    @Test func allowsTheLimitPerWindowThenRefusesUntilTheNextWindow() {
        var window = FrameRateWindow(limit: 3, length: .seconds(30))
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var allowed: [Bool] = []
        for _ in 0..<3 { allowed.append(window.record(now: t0)) }
        allowed.append(window.record(now: t0 + .seconds(29)))
        allowed.append(window.record(now: t0 + .seconds(30)))
        // Three in the window, the fourth refused; a new window starts after 30 s.
        #expect(allowed == [true, true, true, false, true])
    }

    @Test func tinyConnectionWindowUpdatesPastTheBudgetCloseTheConnection() throws {
        let channel = EmbeddedChannel(handler: HTTP2ConnectionErrorCloser())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        // Large increments, as real peers send: never counted.
        for _ in 0..<1000 {
            try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: 32768)))
        }
        #expect(channel.isActive)
        for _ in 0..<HTTP2Limits.maxControlFramesPer30s {
            try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: 1)))
        }
        #expect(channel.isActive)
        try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: 1)))
        #expect(!channel.isActive, "the 201st tiny update in 30 s closes the connection")
    }
}
