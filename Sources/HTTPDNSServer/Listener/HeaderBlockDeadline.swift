// A request's header block must arrive whole within requestTimeout, as the rest of the request must.
//
// NIOHTTP2Handler passes a HEADERS frame on only once its CONTINUATION frames have all arrived, so
// HTTP2RequestHandler cannot see a header block that is still arriving: a client sending HEADERS and
// then one CONTINUATION every few seconds (up to HTTP2Limits.maxSequentialContinuationFrames) held a
// stream open past requestTimeout without the server knowing. This handler sits before NIOHTTP2Handler
// and follows the frame boundaries in the bytes (`HeaderBlockScanner`, pure): a header block open for
// longer than requestTimeout closes the connection. (Not a stream reset: a header block cut off leaves
// the connection's HPACK state unknown, RFC 9113 §4.3.)

import NIOCore

/// Follows HTTP/2 frame boundaries in a client's bytes (connection preface first) and tells when a
/// header block opens (HEADERS without END_HEADERS) and when it closes (CONTINUATION with END_HEADERS).
/// Reads only the 9-byte frame headers; payloads are skipped. Pure.
struct HeaderBlockScanner {
    /// What a chunk of bytes changed.
    enum Change: Equatable {
        case opened
        case closed
    }

    private static let headers: UInt8 = 0x1
    private static let continuation: UInt8 = 0x9
    private static let endHeaders: UInt8 = 0x4

    /// Bytes of the connection preface still to skip.
    private var prefaceLeft = 24
    /// A frame header read in part (fewer than 9 bytes).
    private var partial: [UInt8] = []
    /// Payload bytes of the current frame still to skip.
    private var payloadLeft = 0
    /// A header block is open.
    private(set) var inHeaderBlock = false

    /// Reads `bytes`; the changes to `inHeaderBlock` they made, in order (at most a few per chunk).
    mutating func scan(_ bytes: ByteBufferView) -> [Change] {
        var changes: [Change] = []
        var at = bytes.startIndex
        while at < bytes.endIndex {
            if prefaceLeft > 0 {
                let skip = min(prefaceLeft, bytes.endIndex - at)
                prefaceLeft -= skip
                at += skip
            } else if payloadLeft > 0 {
                let skip = min(payloadLeft, bytes.endIndex - at)
                payloadLeft -= skip
                at += skip
            } else {
                let type: UInt8
                let flags: UInt8
                if partial.isEmpty, bytes.endIndex - at >= 9 {
                    // The whole frame header is here (the usual case): read in place.
                    payloadLeft = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
                    (type, flags) = (bytes[at + 3], bytes[at + 4])
                    at += 9
                } else {
                    partial.append(bytes[at])
                    at += 1
                    guard partial.count == 9 else { continue }
                    payloadLeft = Int(partial[0]) << 16 | Int(partial[1]) << 8 | Int(partial[2])
                    (type, flags) = (partial[3], partial[4])
                    partial.removeAll(keepingCapacity: true)
                }
                let ends = flags & Self.endHeaders != 0
                if type == Self.headers, !ends, !inHeaderBlock {
                    inHeaderBlock = true
                    changes.append(.opened)
                } else if type == Self.continuation, ends, inHeaderBlock {
                    inHeaderBlock = false
                    changes.append(.closed)
                }
            }
        }
        return changes
    }
}

/// Before NIOHTTP2Handler on a server connection: closes the connection when a header block has been
/// arriving for longer than `timeout`. Passes every byte on unchanged.
final class HeaderBlockDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount
    private var scanner = HeaderBlockScanner()
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        for change in scanner.scan(unwrapInboundIn(data).readableBytesView) {
            switch change {
            case .opened:
                let channel = context.channel
                timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
            case .closed:
                timer?.cancel()
                timer = nil
            }
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }
}
