// A response as the engine gives it: the head at once, the body as it arrives.

import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A response: status and headers as soon as they arrive, the body as it arrives.
public struct HTTPEngineResponse: Sendable {
    /// The response status.
    public var status: HTTPResponseStatus
    /// The response headers.
    public var headers: HTTPHeaders
    package var version: HTTPVersionUsed
    /// The URL this response answers (after redirects, the last one).
    package var url: HTTPURL
    /// The body, delivered as the server sends it; reading it slowly slows the server down (TCP or h2
    /// flow control). Iterate it once. Dropping it unread cancels the rest of the transfer.
    public var body: HTTPResponseBody
    let recorder: MetricsRecorder
    /// Metrics so far; complete (total time, bytes) once the body has been read to the end.
    public var metrics: RequestMetrics { recorder.snapshot }
}

/// The response body as an async sequence of buffers, with back-pressure.
public struct HTTPResponseBody: AsyncSequence, Sendable {
    /// Each chunk of the body as it arrives.
    public typealias Element = ByteBuffer
    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, BodyDelegate
    >
    let producer: Producer?
    let recorder: MetricsRecorder?

    static let empty = HTTPResponseBody(producer: nil, recorder: nil)

    /// Reads the body chunk by chunk; reading drives back-pressure.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var inner: Producer.AsyncIterator?
        let recorder: MetricsRecorder?

        /// The next chunk of the body.
        ///
        /// - Returns: The next chunk, or nil at the end of the body.
        /// - Throws: `HTTPEngineError` when the body is cut short.
        public mutating func next() async throws -> ByteBuffer? {
            guard let it = inner else { return nil }
            do {
                let chunk = try await it.next()
                inner = it
                if let chunk {
                    recorder?.update { $0.bytesReceived += chunk.readableBytes }
                } else {
                    recorder?.finish()
                    inner = nil
                }
                return chunk
            } catch {
                recorder?.finish(error: error)
                inner = nil
                throw error
            }
        }
    }

    /// The body can be read once.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(inner: producer?.makeAsyncIterator(), recorder: recorder)
    }

    /// Reads the whole body.
    ///
    /// - Parameter maxBytes: The most bytes the body may have.
    /// - Returns: The body's bytes.
    /// - Throws: `HTTPEngineError` with code `.responseTooLarge` past `maxBytes`, or as ``AsyncIterator/next()``
    ///   when the body is cut short.
    public func collect(upTo maxBytes: Int) async throws -> ByteBuffer {
        var out = ByteBuffer()
        for try await var chunk in self {
            guard out.readableBytes + chunk.readableBytes <= maxBytes else {
                throw HTTPEngineError(.responseTooLarge, "response body larger than \(maxBytes) bytes")
            }
            out.writeBuffer(&chunk)
        }
        return out
    }
}
