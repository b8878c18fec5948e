// A response body's content coding undone as its chunks arrive, for both HTTP versions: gzip and
// deflate through the system's zlib (CompressNIO's inflate stream), with no channel of its own. An
// HTTP/1.1 exchange and an HTTP/2 stream each hold one `ResponseDecoding` and pass every response part
// through it. It took the place of NIOExtras' decompressor (a channel handler, which on an HTTP/2 stream
// ran in an EmbeddedChannel of its own): NIOExtras and its zlib shim no longer go into an iOS app.
//
// What it guarantees: the head goes on unchanged (URLSession reports the server's Content-Encoding), a
// body that ends before its compressed stream does is an error (never a short body delivered as whole),
// so are bytes after the stream's end (as to curl), and no output buffer grows past `chunkLimit` however
// far one chunk inflates.

import CompressNIO
import NIOCore
import NIOHTTP1

/// Why a compressed response body could not be decoded.
struct ContentDecodingError: Error, Hashable, CustomStringConvertible {
    enum Reason: Hashable { case corrupt, truncated, trailingData, failed }
    let reason: Reason

    var description: String {
        switch reason {
        case .corrupt: "the response body is not valid for its Content-Encoding"
        case .truncated: "the response body ended before its compressed stream did"
        case .trailingData: "the response body goes on after its compressed stream ended"
        case .failed: "the response body's decompressor failed (zlib could not start or ran out of memory)"
        }
    }
}

/// One compressed body's inflate stream.
final class ContentDecoder {
    /// The most one output buffer holds: a chunk that inflates further comes out as several.
    static let chunkLimit = 64 * 1024

    private let zlib: ZlibDecompressor
    /// Whether any body byte came: an empty body (HEAD, 204, 304) is whole whatever its coding.
    private var started = false

    /// A decoder for `contentEncoding` (a Content-Encoding field value), nil for a coding it does not
    /// decode (identity, or one the request did not offer: passed through as it came).
    init?(contentEncoding: String) throws {
        guard let algorithm = Self.algorithm(for: contentEncoding) else { return nil }
        do { zlib = try ZlibDecompressor(algorithm: algorithm) } catch { throw ContentDecodingError(reason: .failed) }
    }

    /// The zlib format of a content coding the engine decodes (any case, blanks ignored); nil for any
    /// other. The one list of decoded codings: `ContentCodings` offers what this answers for.
    static func algorithm(for coding: some StringProtocol) -> ZlibAlgorithm? {
        switch coding.lowercased().filter({ $0 != " " && $0 != "\t" }) {
        case "gzip", "x-gzip": .gzip
        case "deflate": .zlib  // RFC 9110 §8.4.1.2: the zlib format
        default: nil
        }
    }

    /// Inflates `chunk`, handing each output buffer (never empty) to `emit`.
    func decode(_ chunk: ByteBuffer, allocator: ByteBufferAllocator, emit: (ByteBuffer) -> Void) throws {
        guard chunk.readableBytes > 0 else { return }  // an empty DATA frame, say
        var input = chunk
        started = true
        var output = allocator.buffer(capacity: min(max(input.readableBytes * 4, 4096), Self.chunkLimit))
        while true {
            do {
                try zlib.inflate(from: &input, to: &output)
            } catch let error as CompressNIOError where error == .bufferOverflow {
                emit(output)  // full: the rest goes into the next buffer
                output = allocator.buffer(capacity: Self.chunkLimit)
                continue
            } catch let error as CompressNIOError where error == .inputBufferOverflow {
                break  // every byte taken; the stream goes on in the next chunk
            } catch let error as CompressNIOError where error == .corruptData {
                throw ContentDecodingError(reason: .corrupt)
            } catch {
                throw ContentDecodingError(reason: .failed)
            }
            // All of the input taken, or the stream ended with bytes after it. Those are an error, as
            // they are to curl: dropped, a second gzip member would be a short body delivered as whole.
            guard input.readableBytes == 0 else { throw ContentDecodingError(reason: .trailingData) }
            break
        }
        if output.readableBytes > 0 { emit(output) }
    }

    /// The body has ended: an error unless its compressed stream had ended too, or no body came.
    func finish(allocator: ByteBufferAllocator) throws {
        guard started else { return }
        // One byte offered to the stream: an ended stream leaves it untouched (zlib answers "stream
        // end" without reading), one that expects more takes it or fails.
        var probe = allocator.buffer(capacity: 1)
        probe.writeInteger(UInt8(0))
        var output = allocator.buffer(capacity: 64)
        do {
            try zlib.inflate(from: &probe, to: &output)
        } catch {
            throw ContentDecodingError(reason: .truncated)
        }
        guard probe.readableBytes == 1, output.readableBytes == 0 else {
            throw ContentDecodingError(reason: .truncated)
        }
    }
}

/// The decoding of one exchange's response: a decoder made by a final head that names a coding the
/// engine decodes, fed the body, finished by the end. A class: what `deliver` runs may end the exchange,
/// and with it this decoding, while a part is still being decoded.
final class ResponseDecoding {
    private(set) var decoder: ContentDecoder?

    /// Passes `part` on through `deliver`, decoded: a body part as zero or more decoded parts.
    func decode(
        _ part: HTTPClientResponsePart,
        allocator: ByteBufferAllocator,
        deliver: (HTTPClientResponsePart) -> Void
    ) throws {
        switch part {
        case .head(let head):
            if head.status.code >= 200, let coding = head.headers.first(name: "content-encoding") {
                decoder = try ContentDecoder(contentEncoding: coding)
            }
            deliver(part)
        case .body(let chunk):
            guard let decoder else { return deliver(part) }
            try decoder.decode(chunk, allocator: allocator) { deliver(.body($0)) }
        case .end:
            let finished = decoder
            decoder = nil
            try finished?.finish(allocator: allocator)
            deliver(part)
        }
    }

    /// The exchange is over: its decoder goes.
    func reset() { decoder = nil }
}
