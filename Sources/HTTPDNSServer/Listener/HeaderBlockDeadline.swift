// A request's header block must arrive whole within requestTimeout, as the rest of the request must.
//
// NIOHTTP2Handler passes a HEADERS frame on only once its CONTINUATION frames have all arrived, so
// HTTP2RequestHandler cannot see a header block that is still arriving: a client sending HEADERS and
// then one CONTINUATION every few seconds (up to HTTP2Limits.maxSequentialContinuationFrames) held a
// stream open past requestTimeout without the server knowing. This handler sits before NIOHTTP2Handler
// and follows the frame boundaries in the bytes (`HeaderBlockScanner`, pure): a header block open for
// longer than requestTimeout closes the connection. (Not a stream reset: a header block cut off leaves
// the connection's HPACK state unknown, RFC 9113 §4.3.)
//
// A block is open from the header of its HEADERS frame to the last byte of the payload of the frame that
// ends it (END_HEADERS, on the HEADERS frame itself or on the last CONTINUATION): NIOHTTP2Handler waits
// for that payload too, and a block once counted closed at that frame's 9-byte header let a client
// trickle the payload a byte at a time until the idle timeout.

import NIOCore

/// Follows HTTP/2 frame boundaries in a client's bytes (connection preface first) and tells when a
/// header block opens (at the header of a HEADERS frame) and when it closes (once the whole payload of
/// the frame with END_HEADERS, that HEADERS frame or the last CONTINUATION, has been read). Reads the
/// 9-byte frame headers; payloads are counted and skipped. Pure.
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
    /// The current frame ends the open header block: it closes with the frame's last payload byte.
    private var endsBlock = false
    /// A header block is open.
    private(set) var inHeaderBlock = false

    /// Reads `bytes`; the changes to `inHeaderBlock` they made, in order: opened and closed alternate, so
    /// the last one says whether a block is open after these bytes and whether it opened among them.
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
                if payloadLeft == 0 { closeIfEnded(&changes) }
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
                endsBlock = false
                // A HEADERS frame opens a block, even one that ends it (its payload may still trickle); a
                // CONTINUATION goes on the open one (outside a block it is NIOHTTP2Handler's protocol error).
                if type == Self.headers || (type == Self.continuation && inHeaderBlock) {
                    if !inHeaderBlock {
                        inHeaderBlock = true
                        changes.append(.opened)
                    }
                    endsBlock = flags & Self.endHeaders != 0
                    if payloadLeft == 0 { closeIfEnded(&changes) }
                }
            }
        }
        return changes
    }

    /// The current frame's payload has all been read: the block closes if this frame ends it.
    private mutating func closeIfEnded(_ changes: inout [Change]) {
        guard endsBlock, inHeaderBlock else { return }
        endsBlock = false
        inHeaderBlock = false
        changes.append(.closed)
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
        // Only the last change matters: opened and closed alternate, so a last `.opened` is a block that
        // opened in this read (timed from now; one open before it closed here), a last `.closed` leaves none
        // open. A request's whole HEADERS frame in one read (the usual case) opens and closes: no timer.
        switch scanner.scan(unwrapInboundIn(data).readableBytesView).last {
        case .opened:
            timer?.cancel()
            let channel = context.channel
            timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        case .closed:
            timer?.cancel()
            timer = nil
        case nil:
            break
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }
}
