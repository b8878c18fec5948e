// The content decoder both HTTP versions use: gzip and deflate bodies decoded however they are split,
// bounded output buffers, and every way a compressed body can be wrong reported, never delivered short.

import CompressNIO
@testable import HTTPDNSEngine
import NIOCore
import NIOHTTP1
import Testing

@Suite struct ContentDecoderTests {
    let allocator = ByteBufferAllocator()

    func compressed(_ text: String, _ algorithm: CompressionAlgorithm) throws -> ByteBuffer {
        var plain = ByteBuffer(string: text)
        return try plain.compress(with: algorithm)
    }

    /// Feeds `body` in chunks of `size` bytes through a decoder for `coding`; what came out, joined.
    func decoded(_ body: ByteBuffer, coding: String, chunks size: Int) throws -> (body: String, buffers: [Int]) {
        let decoder = try #require(try ContentDecoder(contentEncoding: coding))
        var out = ByteBuffer()
        var sizes: [Int] = []
        var rest = body
        while rest.readableBytes > 0 {
            let chunk = rest.readSlice(length: min(size, rest.readableBytes))!
            try decoder.decode(chunk, allocator: allocator) { buffer in
                sizes.append(buffer.readableBytes)
                out.writeImmutableBuffer(buffer)
            }
        }
        try decoder.finish(allocator: allocator)
        return (String(buffer: out), sizes)
    }

    @Test(arguments: ["gzip", "x-gzip", "GZip", "deflate"])
    func aBodyIsDecodedHoweverItIsSplit(coding: String) throws {
        let text = String(repeating: "hello, compressed world. ", count: 400)
        let body = try compressed(text, coding.lowercased() == "deflate" ? .zlib() : .gzip())
        for size in [1, 7, 512, body.readableBytes] {
            #expect(try decoded(body, coding: coding, chunks: size).body == text)
        }
    }

    @Test func aChunkThatInflatesFarComesOutInBoundedBuffers() throws {
        let text = String(repeating: "0", count: 1_000_000)  // about a thousand to one
        let body = try compressed(text, .gzip())
        let result = try decoded(body, coding: "gzip", chunks: body.readableBytes)
        #expect(result.body == text)
        #expect(result.buffers.count > 1)
        #expect(result.buffers.allSatisfy { $0 > 0 && $0 <= ContentDecoder.chunkLimit })
    }

    @Test func aBodyCutShortIsAnErrorAtItsEnd() throws {
        let body = try compressed(String(repeating: "abc", count: 1000), .gzip())
        for cut in [1, 10, body.readableBytes - 1] {
            let decoder = try #require(try ContentDecoder(contentEncoding: "gzip"))
            try decoder.decode(body.getSlice(at: body.readerIndex, length: cut)!, allocator: allocator) { _ in }
            #expect(throws: ContentDecodingError(reason: .truncated)) { try decoder.finish(allocator: allocator) }
        }
    }

    /// A HEAD, 204 or 304 response names its coding and has no body: nothing is cut short.
    @Test func anEmptyBodyIsWhole() throws {
        let decoder = try #require(try ContentDecoder(contentEncoding: "gzip"))
        try decoder.decode(ByteBuffer(), allocator: allocator) { _ in Issue.record("nothing to emit") }
        try decoder.finish(allocator: allocator)
    }

    /// Bytes after the compressed stream (junk, or a second gzip member) are an error, as they are to
    /// curl, in the chunk that carries them or a later one; so are bytes that are not the coding at all.
    @Test func bytesAfterTheStreamAndBytesThatAreNotTheCodingAreErrors() throws {
        var body = try compressed("hello", .gzip())
        body.writeString("trailing")
        for size in [3, body.readableBytes] {
            #expect(throws: ContentDecodingError(reason: .trailingData)) {
                _ = try decoded(body, coding: "gzip", chunks: size)
            }
        }
        let plain = try #require(try ContentDecoder(contentEncoding: "deflate"))
        #expect(throws: ContentDecodingError(reason: .corrupt)) {
            try plain.decode(ByteBuffer(string: "not compressed at all"), allocator: allocator) { _ in }
        }
    }

    @Test func identityAndCodingsItDoesNotDecodePassThrough() throws {
        for coding in ["identity", "br", "zstd", "gzip, br", ""] {
            #expect(try ContentDecoder(contentEncoding: coding) == nil)
        }
        let decoding = ResponseDecoding()
        var parts: [HTTPClientResponsePart] = []
        let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-encoding": "br"])
        for part in [HTTPClientResponsePart.head(head), .body(ByteBuffer(string: "raw")), .end(nil)] {
            try decoding.decode(part, allocator: allocator) { parts.append($0) }
        }
        #expect(parts == [.head(head), .body(ByteBuffer(string: "raw")), .end(nil)])
    }

    /// An informational head names no coding for the body; the final head after it does.
    @Test func theFinalHeadMakesTheDecoderAndTheEndTakesItAway() throws {
        let decoding = ResponseDecoding()
        var body = ByteBuffer()
        let early = HTTPResponseHead(
            version: .http1_1,
            status: .init(statusCode: 103),
            headers: ["content-encoding": "gzip"]
        )
        try decoding.decode(.head(early), allocator: allocator) { _ in }
        #expect(decoding.decoder == nil)
        let final = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["content-encoding": "gzip"])
        try decoding.decode(.head(final), allocator: allocator) { _ in }
        #expect(decoding.decoder != nil)
        try decoding.decode(.body(try compressed("hello", .gzip())), allocator: allocator) { part in
            if case .body(let chunk) = part { body.writeImmutableBuffer(chunk) }
        }
        try decoding.decode(.end(nil), allocator: allocator) { _ in }
        #expect(String(buffer: body) == "hello")
        #expect(decoding.decoder == nil)
    }
}
