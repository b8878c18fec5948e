// The decisions of one request/response exchange, apart from what carries it: an HTTP/1.1
// connection (ExchangeHandler) or an HTTP/2 stream (ClientStream). Each feeds it every event and
// carries out the action it returns; nothing here touches a channel, a promise or a
// clock, so every transition is tested without sockets (shaped after AsyncHTTPClient's
// HTTPRequestStateMachine, much smaller: the engine writes the request itself).
//
// Life of an exchange: waitingForHead → receivingBody → finished. Informational heads (1xx but 101)
// are skipped. Any failure, timeout or cancellation goes straight to finished; after that every event
// is a no-op, so a late cancel or timer cannot complete anything twice.
//
// Back-pressure: when the body's consumer falls behind (the producer answers `stopProducing`), reads
// are held back, so the kernel buffer fills (HTTP/1.1, TCP flow control) or the stream's window stays
// closed (HTTP/2, only this stream pauses). At most one read is held; `produceMore` releases it.
//
// Idle timeout: one check is scheduled when the handler is added and re-arms itself for the time
// left since the last activity (a read, a write, the consumer asking for more), so a busy transfer
// costs no timer churn. While the consumer is behind, the server is not the one being slow: the check
// re-arms for a whole period instead of failing.

import NIOCore
import NIOHTTP1

struct ExchangeStateMachine {
    enum State: Equatable {
        case waitingForHead
        case receivingBody
        case finished
    }

    /// What to do with the channel once the response is complete.
    enum Cleanup: Equatable {
        /// Take the exchange's handlers out so the HTTP/1.1 connection can carry the next request.
        case removeHandlers
        /// The HTTP/1.1 connection cannot be reused (`Connection: close`, or the server answered before
        /// the request was fully sent): close it.
        case close
        /// An HTTP/2 stream: it closes by itself, and the connection is the pool's business.
        case leaveAsIs
    }

    enum Action: Equatable {
        case nothing
        /// Let the read through to the channel.
        case read
        /// Run `idleCheckFired` after this delay.
        case scheduleIdleCheck(in: TimeAmount)
        /// The final response head has arrived: hand it to the caller.
        case succeedHead(HTTPResponseHead)
        /// Give the body part to the producer and report its answer with `bodyPartYielded`.
        case yieldBodyPart
        /// The response is complete. Clean the channel up, then report `reusable` (the connection
        /// goes back to the pool before the consumer can see the end: its next request must find
        /// it), then finish the body.
        case finish(reusable: Bool, cleanup: Cleanup)
        /// The exchange failed: fail the head (when `failHead`, i.e. it has not been handed out), the
        /// body and the end, and close the channel when `close` (the connection for HTTP/1.1, the
        /// stream with RST_STREAM for HTTP/2).
        case fail(HTTPEngineError, failHead: Bool, close: Bool)
    }

    private(set) var state = State.waitingForHead
    /// False while the body's consumer is behind: reads are held back and the idle check stands down.
    private var demand = true
    /// A read that arrived while there was no demand, to be let through on `produceMore`.
    private var pendingRead = false
    private var requestComplete = false
    private var keepAlive = true
    private var lastActivity = NIODeadline.uptimeNanoseconds(0)
    let idleTimeout: TimeAmount
    /// For error messages.
    let host: String
    let onStream: Bool

    /// - Parameter onStream: the exchange runs on an HTTP/2 stream rather than an HTTP/1.1 connection.
    init(idleTimeout: TimeAmount, host: String, onStream: Bool) {
        self.idleTimeout = idleTimeout
        self.host = host
        self.onStream = onStream
    }

    // MARK: Lifecycle

    mutating func handlerAdded(now: NIODeadline) -> Action {
        guard state != .finished else { return .nothing }
        lastActivity = now
        return .scheduleIdleCheck(in: idleTimeout)
    }

    /// The handler left the pipeline: an exchange still running is abandoned.
    mutating func handlerRemoved() -> Action {
        fail(HTTPEngineError(.protocolError, "exchange abandoned"), close: true)
    }

    mutating func channelInactive() -> Action {
        // Already closed: nothing to close.
        fail(
            HTTPEngineError(.protocolError, "\(host) closed the connection before the response was complete"),
            close: false
        )
    }

    // MARK: Request (written by the engine, seen on its way out)

    /// A part of the request is being written. A long upload is activity, not an idle server.
    mutating func requestHeadWritten(now: NIODeadline) {
        lastActivity = now
    }

    mutating func requestBodyPartWritten(now: NIODeadline) {
        lastActivity = now
    }

    mutating func requestEndWritten(now: NIODeadline) {
        lastActivity = now
        requestComplete = true
    }

    /// Writing the request failed (the connection was closed under it, for one).
    mutating func requestWriteFailed(_ error: any Error) -> Action {
        fail(
            Self.engineError(error, or: "could not send the request to \(host): \(error)"),
            close: true
        )
    }

    // MARK: Response

    mutating func responseHeadReceived(_ head: HTTPResponseHead, now: NIODeadline) -> Action {
        switch state {
        case .waitingForHead:
            lastActivity = now
            // 100 Continue, 103 Early Hints…: the final head is still to come. 101 is final.
            if head.status.code >= 100, head.status.code < 200, head.status != .switchingProtocols {
                return .nothing
            }
            state = .receivingBody
            keepAlive = head.isKeepAlive
            return .succeedHead(head)
        case .receivingBody:
            return fail(HTTPEngineError(.protocolError, "\(host) sent a second response head"), close: true)
        case .finished:
            return .nothing
        }
    }

    mutating func responseBodyPartReceived(now: NIODeadline) -> Action {
        switch state {
        case .receivingBody:
            lastActivity = now
            return .yieldBodyPart
        case .waitingForHead:
            return fail(HTTPEngineError(.protocolError, "\(host) sent a body before a response head"), close: true)
        case .finished:
            return .nothing
        }
    }

    /// What the producer answered to the body part from `.yieldBodyPart`.
    mutating func bodyPartYielded(_ result: HTTPResponseBody.Producer.Source.YieldResult) -> Action {
        guard state == .receivingBody else { return .nothing }
        switch result {
        case .produceMore:
            // Demand only comes back through `produceMore`, which the producer calls after every
            // `stopProducing`.
            return .nothing
        case .stopProducing:
            demand = false
            return .nothing
        case .dropped:
            return fail(HTTPEngineError(.cancelled, "the response body was dropped before its end"), close: true)
        }
    }

    mutating func responseEndReceived() -> Action {
        switch state {
        case .receivingBody:
            state = .finished
            // A response that arrives before the request is fully sent leaves the request's framing
            // unfinished on the wire: that connection cannot carry another request.
            let reusable = keepAlive && requestComplete
            let cleanup: Cleanup = onStream ? .leaveAsIs : reusable ? .removeHandlers : .close
            return .finish(reusable: reusable, cleanup: cleanup)
        case .waitingForHead:
            return fail(HTTPEngineError(.protocolError, "\(host) ended a response that had no head"), close: true)
        case .finished:
            return .nothing
        }
    }

    /// Parser, TLS and stream errors become the engine's own, with a code (a truncated body, for one,
    /// is NIO's "stream ended at an unexpected time").
    mutating func errorCaught(_ error: any Error) -> Action {
        fail(Self.engineError(error, or: "the response from \(host) was cut short or malformed: \(error)"), close: true)
    }

    // MARK: Reads and back-pressure

    /// The channel asks to read more from the network.
    mutating func readRequested() -> Action {
        switch state {
        case .waitingForHead, .finished:
            // Before the head there is no consumer to wait for; after the end there is nothing to hold.
            return .read
        case .receivingBody:
            guard demand else {
                pendingRead = true
                return .nothing
            }
            return .read
        }
    }

    /// The consumer has caught up and wants more.
    mutating func produceMore(now: NIODeadline) -> Action {
        guard state != .finished else { return .nothing }
        demand = true
        // The server has not been idle while we held its reads back: its idle period starts now.
        lastActivity = now
        guard pendingRead else { return .nothing }
        pendingRead = false
        return .read
    }

    /// The consumer stopped reading the body before its end.
    mutating func bodyAbandoned() -> Action {
        fail(HTTPEngineError(.cancelled, "the response body was abandoned"), close: true)
    }

    // MARK: Timeouts and cancellation

    mutating func idleCheckFired(now: NIODeadline) -> Action {
        guard state != .finished else { return .nothing }
        // A slow consumer is not a slow server: look again a whole period later.
        guard demand else { return .scheduleIdleCheck(in: idleTimeout) }
        let quiet = now - lastActivity
        guard quiet >= idleTimeout else { return .scheduleIdleCheck(in: idleTimeout - quiet) }
        return fail(
            HTTPEngineError(.readTimeout, "no data from \(host) for \(idleTimeout.nanoseconds / 1_000_000) ms"),
            close: true
        )
    }

    mutating func totalTimeoutFired() -> Action {
        fail(
            HTTPEngineError(.totalTimeout, "\(host): the request did not complete before its total timeout"),
            close: true
        )
    }

    mutating func cancelled() -> Action {
        fail(HTTPEngineError(.cancelled, "\(host): the request was cancelled"), close: true)
    }

    // MARK: Helpers

    private mutating func fail(_ error: HTTPEngineError, close: Bool) -> Action {
        guard state != .finished else { return .nothing }
        let failHead = state == .waitingForHead
        state = .finished
        return .fail(error, failHead: failHead, close: close)
    }

    private static func engineError(_ error: any Error, or message: @autoclosure () -> String) -> HTTPEngineError {
        if let error = error as? HTTPEngineError { return error }
        return HTTPEngineError(.protocolError, message(), underlying: error)
    }
}
