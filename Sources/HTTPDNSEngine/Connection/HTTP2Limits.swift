// HTTP/2 limits shared by our client (the engine) and our servers (HTTPListener).
//
// NIOHTTP2Handler answers a connection error (a frame it cannot parse, a flow-control violation, an
// HPACK bomb, a CONTINUATION / PING / SETTINGS flood past its limits) with GOAWAY and an errorCaught,
// but leaves the channel open: whatever the peer sends next is appended to the frame decoder's buffer,
// never parsed and never freed. One hostile client drove a server to 3 GB in seconds that way, and a
// hostile origin left our client waiting for its total timeout. `HTTP2ConnectionErrorCloser` sits after
// the HTTP/2 handler on the connection channel and closes the connection on any error that reaches it.
// NIO reports stream errors (RST_STREAM already sent) the same way and with the same error types, so
// they cannot be told apart there; a peer that breaks the protocol on one stream loses the connection,
// as in Hummingbird's HTTP2ServerConnectionManager. Our own cancellations never get here: a cancelled
// exchange resets its stream only (RST_STREAM, HTTP2ClientStreams.swift).

import NIOCore
import NIOHTTP2

package enum HTTP2Limits {
    /// Streams a peer may open at once on one of our connections (SETTINGS_MAX_CONCURRENT_STREAMS).
    static let maxConcurrentStreams = 100
    /// Bytes of decoded header fields in one HEADERS block (SETTINGS_MAX_HEADER_LIST_SIZE).
    static let maxHeaderListSize = 16 * 1024
    /// CONTINUATION frames after one HEADERS frame before the connection is closed.
    static let maxSequentialContinuationFrames = 5
    /// PING, SETTINGS, PRIORITY and other control frames a peer may send per 30 s.
    static let maxControlFramesPer30s = 200
    /// Connection-level WINDOW_UPDATEs past `maxControlFramesPer30s` in 30 s whose increments average
    /// below this close the connection (NIO does not count WINDOW_UPDATE at all). A real peer may split
    /// a return (NIO sends 16383 then 1, 16382 then 2, ...), but what it returns adds up to what was
    /// sent, so its average stays in the kilobytes; a flood of tiny ones averages a few bytes. Large
    /// ones run the window into its 2^31-1 ceiling within 2 M frames, a flow-control error that closes
    /// the connection.
    static let smallWindowIncrement = 1024

    /// The connection configuration for one side. The client refuses server push
    /// (SETTINGS_ENABLE_PUSH = 0), so a PUSH_PROMISE is a connection error (RFC 9113 §8.4).
    package static func connectionConfiguration(client: Bool) -> NIOHTTP2Handler.ConnectionConfiguration {
        var c = NIOHTTP2Handler.ConnectionConfiguration()
        c.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: maxHeaderListSize),
        ]
        if client { c.initialSettings.append(HTTP2Setting(parameter: .enablePush, value: 0)) }
        c.maximumSequentialContinuationFrames = maxSequentialContinuationFrames
        c.controlFrameRateLimit.maximumCount = maxControlFramesPer30s
        c.controlFrameRateLimit.windowLength = .seconds(30)
        return c
    }
}

/// Closes an HTTP/2 connection when NIO reports a connection-level error (see the top of this file), or
/// when the peer floods tiny connection-level WINDOW_UPDATEs (`HTTP2Limits.smallWindowIncrement`).
/// Goes right after the `NIOHTTP2Handler` on the connection channel, where frames on stream 0 arrive.
package final class HTTP2ConnectionErrorCloser: ChannelInboundHandler {
    package typealias InboundIn = HTTP2Frame

    private var windowUpdates = WindowUpdateRate(
        limit: HTTP2Limits.maxControlFramesPer30s,
        length: .seconds(30),
        minimumAverage: HTTP2Limits.smallWindowIncrement
    )

    package init() {}

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.streamID == .rootStream, case .windowUpdate(let increment) = frame.payload,
            !windowUpdates.record(increment: increment, now: .now())
        {
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The GOAWAY NIO wrote is flushed before the close; nothing the peer sends after it is read.
        context.close(promise: nil)
    }
}

/// Connection-level WINDOW_UPDATEs counted in fixed windows of `length`: more than `limit` in one
/// window is allowed only while their increments average at least `minimumAverage` bytes.
struct WindowUpdateRate: Sendable {
    let limit: Int
    let length: TimeAmount
    let minimumAverage: Int
    private var start: NIODeadline?
    private var count = 0
    private var total = 0

    init(limit: Int, length: TimeAmount, minimumAverage: Int) {
        self.limit = limit
        self.length = length
        self.minimumAverage = minimumAverage
    }

    /// Records one update; false when the peer is flooding (past the limit, with a tiny average).
    mutating func record(increment: Int, now: NIODeadline) -> Bool {
        if let start, now - start < length {
            count += 1
            total += increment
        } else {
            start = now
            count = 1
            total = increment
        }
        return count <= limit || total >= count * minimumAverage
    }
}
