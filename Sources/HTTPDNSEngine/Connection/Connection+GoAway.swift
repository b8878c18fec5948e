// HTTP/2 GOAWAY on a client connection: what the server said (which streams it will never process);
// HTTP2ClientStreams hears it. The pool retires the connection; the engine sends refused streams again.

import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2

/// What a server said when it sent GOAWAY (RFC 9113 §6.8): it takes no new stream on this connection,
/// and the streams above `lastStreamID` were never processed, so they may be sent again elsewhere,
/// whatever their method. nginx sends one after `keepalive_requests` streams (1000 by default), so a
/// busy client meets it all the time: the pool stops using the connection, refused streams are sent
/// again on a new one (at most twice), and so are idempotent requests the closing connection dropped
/// (nginx may close before answering its last accepted stream, which a POST cannot be retried after).
final class GoAwayRecord: Sendable {
    private struct State {
        var lastStreamID: HTTP2StreamID?
        var onReceived: (@Sendable () -> Void)?
    }
    private let state = NIOLockedValueBox(State())

    /// Calls `body` once, when the first GOAWAY arrives (at once if it already has).
    func onReceived(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLockedValue { state -> Bool in
            guard state.lastStreamID == nil else { return true }
            state.onReceived = body
            return false
        }
        if now { body() }
    }

    func received(lastStreamID: HTTP2StreamID) {
        let notify = state.withLockedValue { state -> (@Sendable () -> Void)? in
            let first = state.lastStreamID == nil
            // A later GOAWAY may only lower the last stream (RFC 9113 §6.8).
            state.lastStreamID = min(state.lastStreamID ?? lastStreamID, lastStreamID)
            defer { state.onReceived = nil }
            return first ? state.onReceived : nil
        }
        notify?()
    }

    /// Whether the server has sent GOAWAY.
    var wasReceived: Bool { state.withLockedValue { $0.lastStreamID != nil } }

    /// Whether the server's GOAWAY said it will not process stream `id`.
    func refuses(_ id: HTTP2StreamID) -> Bool {
        state.withLockedValue { $0.lastStreamID.map { id > $0 } ?? false }
    }
}
