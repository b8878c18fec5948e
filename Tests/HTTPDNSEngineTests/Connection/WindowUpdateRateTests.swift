// The WINDOW_UPDATE flood bound (hostile round 2): WindowUpdateRate's rule on a moved clock,
// and the connection guard closing an EmbeddedChannel on a flood of tiny connection-level updates while
// what real peers send passes, NIO's split returns (16383 then 1) included.

@testable import HTTPDNSEngine
import NIOCore
import NIOEmbedded
import NIOHTTP2
import Testing

@Suite struct WindowUpdateRateTests {
    @Test func pastTheLimitOnlyATinyAverageIsRefusedUntilTheNextWindow() {
        var rate = WindowUpdateRate(limit: 3, length: .seconds(30), minimumAverage: 1024)
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var allowed: [Bool] = []
        for _ in 0..<3 { allowed.append(rate.record(increment: 1, now: t0)) }
        allowed.append(rate.record(increment: 1, now: t0 + .seconds(29)))
        allowed.append(rate.record(increment: 1, now: t0 + .seconds(30)))
        // Three tiny ones in the window, the fourth refused; a new window starts after 30 s.
        #expect(allowed == [true, true, true, false, true])

        // Split returns as NIO sends them (16383 then 1): many frames, a large average.
        var split = WindowUpdateRate(limit: 3, length: .seconds(30), minimumAverage: 1024)
        let splitAllowed = (0..<100).map { split.record(increment: $0 % 2 == 0 ? 16383 : 1, now: t0) }
        #expect(!splitAllowed.contains(false))
    }

    @Test func tinyConnectionWindowUpdatesPastTheBudgetCloseTheConnection() throws {
        let channel = EmbeddedChannel(handler: HTTP2ConnectionErrorCloser())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        // What a real peer sends, NIO's split returns included: 1000 frames averaging 8 KiB.
        for i in 0..<1000 {
            let increment = i % 2 == 0 ? 16383 : 1
            try channel.writeInbound(
                HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
            )
        }
        #expect(channel.isActive)
        // Then tiny ones: the average falls under 1 KiB after about 8000 more, and the connection closes.
        var sent = 0
        while channel.isActive, sent < 20_000 {
            try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: 1)))
            sent += 1
        }
        #expect(!channel.isActive, "a flood of tiny updates was taken")
        #expect(sent < 10_000, "closed only after \(sent) tiny updates")
    }
}
