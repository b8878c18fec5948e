// A request body (bytes, a file, a stream) and how a file is read in chunks.

import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A request body: bytes in memory, a file streamed from disk, or any async sequence of buffers.
/// Bytes and files can be sent again (redirects that keep the body, retries); a stream only if its
/// factory can make it again.
public struct HTTPRequestBody: Sendable {
    enum Storage: Sendable {
        case bytes(ByteBuffer)
        case file(String)
        case stream(@Sendable () -> AsyncThrowingStream<ByteBuffer, any Error>)
    }

    let storage: Storage
    /// Bytes in the body when known (sent as content-length); nil for a stream of unknown length (sent
    /// chunked on HTTP/1.1, as DATA frames until the stream's end on HTTP/2).
    public let length: Int?

    /// A body held in memory (sent with its length; can be sent again on a redirect).
    ///
    /// - Parameter bytes: The body's bytes, copied.
    /// - Returns: The body.
    public static func bytes(_ bytes: some Collection<UInt8>) -> HTTPRequestBody {
        HTTPRequestBody(storage: .bytes(ByteBuffer(bytes: bytes)), length: bytes.count)
    }

    static func bytes(_ buffer: ByteBuffer) -> HTTPRequestBody {
        HTTPRequestBody(storage: .bytes(buffer), length: buffer.readableBytes)
    }

    /// Streams the file at `path`, read in 64 KiB chunks as the connection can take them (an upload
    /// never holds the whole file in memory; it can be sent again on a redirect or a retry).
    ///
    /// - Parameter path: The file to send.
    /// - Returns: The body, its length the file's size.
    /// - Throws: `HTTPEngineError` with code `.invalidRequest` when the file cannot be read.
    public static func file(_ path: String) throws -> HTTPRequestBody {
        // The size from the end's offset, not the file's attributes: no file timestamp is ever read
        // (Sources/HTTPDNSPrivacy/PrivacyInfo.xcprivacy).
        guard let handle = FileHandle(forReadingAtPath: path), let end = try? handle.seekToEnd() else {
            throw HTTPEngineError(.invalidRequest, "cannot read \(path): no such file or not readable")
        }
        try? handle.close()
        return HTTPRequestBody(storage: .file(path), length: Int(end))
    }

    /// A body produced by `make`, which is called once per send. Use `AsyncThrowingStream(unfolding:)`
    /// for a producer that is only asked for the next chunk when the connection can take it.
    ///
    /// - Parameters:
    ///   - length: The body's length in bytes when known (sent as content-length); nil sends it chunked
    ///     (HTTP/1.1) or as DATA frames until END_STREAM (HTTP/2).
    ///   - make: Makes the body's chunks; called once per send.
    /// - Returns: The body; it can be sent again only because `make` can make it again.
    public static func stream(
        length: Int?,
        _ make: @escaping @Sendable () -> AsyncThrowingStream<ByteBuffer, any Error>
    ) -> HTTPRequestBody {
        HTTPRequestBody(storage: .stream(make), length: length)
    }

    /// The body's chunks, in order, as an async sequence.
    func chunks() -> AsyncThrowingStream<ByteBuffer, any Error> {
        switch storage {
        case .bytes(let buffer):
            let remaining = NIOLockedValueBox(buffer)
            return AsyncThrowingStream(unfolding: {
                remaining.withLockedValue { rest in
                    guard rest.readableBytes > 0 else { return nil }
                    return rest.readSlice(length: min(rest.readableBytes, 1 << 16))
                }
            })
        case .file(let path):
            let reader = FileChunkReader(path: path)
            return AsyncThrowingStream(unfolding: { try await reader.next() })
        case .stream(let make):
            return make()
        }
    }
}

/// Reads a file in 64 KiB chunks on NIO's blocking-I/O pool, so no concurrency thread blocks on disk.
final class FileChunkReader: Sendable {
    let path: String
    let handle = NIOLockedValueBox<FileHandle?>(nil)

    init(path: String) { self.path = path }

    func next() async throws -> ByteBuffer? {
        let path = self.path
        let handle = self.handle
        return try await NIOThreadPool.singleton.runIfActive {
            try handle.withLockedValue { h -> ByteBuffer? in
                if h == nil {
                    guard let opened = FileHandle(forReadingAtPath: path) else {
                        throw HTTPEngineError(.invalidRequest, "cannot open \(path) for reading")
                    }
                    h = opened
                }
                guard let data = try h!.read(upToCount: 1 << 16), !data.isEmpty else {
                    try? h?.close()
                    return nil
                }
                return ByteBuffer(bytes: data)
            }
        }
    }
}
