// The body of a forwarded http:// request, from the client connection to the engine as it arrives.
// The client is read only as fast as the engine sends: NIO's async sequence producer holds at most
// `highWatermark` chunks (each at most one read of the socket), tells the handler to stop reading past
// that, and asks for more once the engine has taken them. So a connection holds a few chunks whatever
// the body's size, where it used to hold the whole body (up to 16 MiB each, 1,024 connections).
//
// `ForwardedBody` lives on the client connection's event loop (ProxyHandler owns it); the engine reads
// the other end, `Reader`, from its task. Whether the client is read is ProxyHandler's to say, since a
// request queued behind the one being answered holds reading too: this only tells it when the engine
// wants more, or has stopped reading.

import NIOConcurrencyHelpers
import NIOCore

final class ForwardedBody {
    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, Demand
    >

    /// Tells the handler, on its loop, when the engine wants more (the handler stopped reading the
    /// client when told `.stopProducing`) and when it stopped reading.
    struct Demand: NIOAsyncSequenceProducerDelegate {
        let loop: any EventLoop
        let wanted: @Sendable () -> Void
        let stopped: @Sendable () -> Void

        func produceMore() {
            loop.execute { wanted() }
        }

        func didTerminate() {
            // The engine stopped reading (the request failed or was answered early): the client is read
            // again, so the rest of the body is drained and the connection's end seen.
            loop.execute { stopped() }
        }
    }

    /// The engine's end: one reader, one `next()` at a time (the engine's send loop).
    final class Reader: @unchecked Sendable {
        // @unchecked: the iterator is only used by the engine's send loop, which awaits each `next()`
        // before the next; nothing else touches it.
        private var iterator: Producer.AsyncIterator

        init(_ sequence: Producer) { iterator = sequence.makeAsyncIterator() }

        func next() async throws -> ByteBuffer? { try await iterator.next() }
    }

    let reader: Reader
    private let source: Producer.Source
    private(set) var ended = false

    /// On `loop`: `wanted` is called each time the engine asks for more after a pause, `stopped` once it
    /// stops reading.
    init(
        on loop: any EventLoop,
        wanted: @escaping @Sendable () -> Void,
        stopped: @escaping @Sendable () -> Void
    ) {
        let made = Producer.makeSequence(
            backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
            finishOnDeinit: true,
            delegate: Demand(loop: loop, wanted: wanted, stopped: stopped)
        )
        source = made.source
        reader = Reader(made.sequence)
    }

    /// A part arrived; false when the engine has enough waiting and the client should not be read.
    func received(_ chunk: ByteBuffer) -> Bool {
        switch source.yield(chunk) {
        case .produceMore: return true
        case .stopProducing, .dropped: return false
        }
    }

    /// The body is complete.
    func end() {
        ended = true
        source.finish()
    }

    /// The body will not be complete: the engine's read fails with `error`.
    func fail(_ error: any Error) {
        ended = true
        source.finish(error)
    }
}

/// Why a forwarded body was given up, as the engine's upload sees it.
struct ForwardedBodyFailure: Error, CustomStringConvertible {
    var description: String
}
