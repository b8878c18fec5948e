// The requests on one HTTP/2 connection of HTTPListener, read straight from the frames the connection's
// NIOHTTP2Handler passes on, without a child channel per stream (the child channel, its
// pipeline and the HTTP/1 codec were ~40% of the DoH server's CPU per query).
//
// `HTTP2Requests` decides; `HTTP2RequestHandler` (HTTP2RequestHandler.swift) does the I/O. NIOHTTP2Handler
// still enforces the protocol and every connection limit (streams at once, header list size, floods);
// this table adds what the child channels gave:
// - a request is its HEADERS, its DATA up to `maxRequestBytes` and an END_STREAM; trailers end it too;
// - a body past the limit is answered 413 at once and the rest of the request refused with RST_STREAM
//   NO_ERROR (RFC 9113 §8.1), as a client may still be sending it;
// - flow control: without a multiplexer nothing opens the windows again, so every DATA frame's bytes
//   are given back to the connection window, and to the stream's while its body is within the limit
//   (the limit, not the window, bounds what one stream may send);
// - a stream reset or closed by either side is forgotten, so an answer that arrives later is dropped;
// - an answer written but not sent (the client holds its flow-control window shut, so END_STREAM cannot
//   go out) is timed: reset (RST_STREAM CANCEL) once `requestTimeout` has passed with no progress (the
//   handler starts the time again at each WINDOW_UPDATE), as nginx's `send_timeout` times each write and
//   HAProxy's `timeout client` ends a stalled send. Such a stream is no request in progress: its
//   connection is *sending* (ConnectionSlots: closed for a newcomer only when it stalls or has been
//   sending too long while the listener is full), and it does not keep the connection from its idle
//   timeout once it is reset;
// - draining (the server is shutting down gracefully): GOAWAY NO_ERROR naming the last stream taken,
//   the streams up to it answered, any later one refused (REFUSED_STREAM: the client may send it again
//   elsewhere, RFC 9113 §8.7), and the connection closed once the last stream has ended.

import HTTPDNSCore
import HTTPDNSListener
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

struct HTTP2Requests {
    /// A stream whose request has started.
    struct Stream {
        /// Where a stream is, from its first HEADERS to its end.
        enum Phase: Equatable {
            /// Its request is still arriving (timed: requestTimeout).
            case receiving
            /// Complete and handed to the answering function (not timed here: the answer has its own
            /// bounds); further frames are the peer's mistake.
            case answering
            /// The answer is written; its last frame waits for the client's flow-control window (timed:
            /// requestTimeout, then reset).
            case sending
        }

        var headers: HPACKHeaders
        var body = ByteBuffer()
        var phase = Phase.receiving
        /// Complete: handed to the answering function, or answered.
        var answering: Bool { phase != .receiving }
    }

    enum Action: Equatable {
        /// A request started and has more to come, or an answer was written and waits to be sent:
        /// time it (the whole request must arrive, or the answer go out, within requestTimeout), and
        /// report `timerFired` when the time is up. Replaces the stream's timer if it has one.
        case startTimer(HTTP2StreamID)
        /// The request is complete: answer it.
        case answer(HTTP2StreamID)
        /// The body is past the limit: answer 413 and refuse the rest with RST_STREAM NO_ERROR.
        case refuseTooLarge(HTTP2StreamID)
        /// Give `bytes` back to the connection's window, and to the stream's when `stream` is set.
        case openWindows(bytes: Int, stream: HTTP2StreamID?)
        /// The peer broke the request's framing (HEADERS in the middle of a body without END_STREAM,
        /// frames after the end), or a stream came after GOAWAY: reset the stream.
        case reset(HTTP2StreamID, HTTP2ErrorCode)
        /// Draining: send GOAWAY NO_ERROR with this last stream ID.
        case goAway(lastStreamID: HTTP2StreamID)
        /// Draining and no stream left: close the connection.
        case close
    }

    let maxRequestBytes: Int
    private(set) var streams: [HTTP2StreamID: Stream] = [:]
    /// The highest stream a request started on.
    private(set) var lastStreamID: HTTP2StreamID = .rootStream
    /// Set by `drain()`: the last stream taken; later ones are refused.
    private(set) var goAwayAfter: HTTP2StreamID?

    init(maxRequestBytes: Int) {
        self.maxRequestBytes = maxRequestBytes
    }

    /// A HEADERS frame: a new request, or the trailers that end one.
    mutating func headers(_ id: HTTP2StreamID, _ headers: HPACKHeaders, endStream: Bool) -> [Action] {
        guard let answering = streams[id]?.answering else {
            if let last = goAwayAfter, id > last { return [.reset(id, .refusedStream)] }
            lastStreamID = max(lastStreamID, id)
            streams[id] = Stream(headers: headers)
            // A request whole on its HEADERS (a DoH GET) has nothing left to time: no timer.
            return endStream ? [complete(id)] : [.startTimer(id)]
        }
        // Trailers: allowed once, only as the end of the request.
        guard endStream, !answering else { return [forget(id, .protocolError)] }
        return [complete(id)]
    }

    /// A DATA frame of `flowControlledBytes` (payload and padding).
    mutating func data(_ id: HTTP2StreamID, _ payload: ByteBuffer, flowControlledBytes: Int, endStream: Bool)
        -> [Action]
    {
        var actions: [Action] = []
        // The stream is changed in place (`streams[id]!.…`): a copy taken out of the dictionary would
        // share the body's storage, and appending to it would copy the whole body on every frame.
        guard let answering = streams[id]?.answering, !answering else {
            // NIOHTTP2Handler lets no DATA through before HEADERS; after the end or after a 413 the
            // bytes still count against the connection's window.
            if flowControlledBytes > 0 { actions.append(.openWindows(bytes: flowControlledBytes, stream: nil)) }
            if streams[id] != nil { actions.append(forget(id, .streamClosed)) }
            return actions
        }
        if streams[id]!.body.readableBytes + payload.readableBytes > maxRequestBytes {
            streams[id]!.phase = .answering
            streams[id]!.body = ByteBuffer()
            if flowControlledBytes > 0 { actions.append(.openWindows(bytes: flowControlledBytes, stream: nil)) }
            actions.append(.refuseTooLarge(id))
            return actions
        }
        var payload = payload
        streams[id]!.body.writeBuffer(&payload)
        if flowControlledBytes > 0 {
            actions.append(.openWindows(bytes: flowControlledBytes, stream: endStream ? nil : id))
        }
        if endStream { actions.append(complete(id)) }
        return actions
    }

    /// The stream is gone (reset by either side, closed, timed out): nothing more is done for it.
    /// Draining, the last stream's end closes the connection.
    @discardableResult
    mutating func closed(_ id: HTTP2StreamID) -> [Action] {
        streams[id] = nil
        return goAwayAfter != nil && streams.isEmpty ? [.close] : []
    }

    /// The server is shutting down gracefully: the streams started so far are answered, no later one.
    mutating func drain() -> [Action] {
        guard goAwayAfter == nil else { return [] }
        goAwayAfter = lastStreamID
        return [.goAway(lastStreamID: lastStreamID)] + (streams.isEmpty ? [.close] : [])
    }

    /// The answer to `id` was written (to NIOHTTP2Handler, which sends it as the client's windows
    /// allow): time its sending. The stream stays until it is closed (`closed`: the last frame went out).
    mutating func answerWritten(_ id: HTTP2StreamID) -> [Action] {
        guard streams[id] != nil else { return [] }
        streams[id]!.phase = .sending
        return [.startTimer(id)]
    }

    /// The stream's timer ran out: a request still arriving, or an answer the client would not take,
    /// is reset. An answer being made is not cut off.
    mutating func timerFired(_ id: HTTP2StreamID) -> [Action] {
        switch streams[id]?.phase {
        case .receiving, .sending: [forget(id, .cancel)]
        case .answering, nil: []
        }
    }

    /// Whether a request is in progress: one arriving or being answered. A stream whose answer waits
    /// for the client's window is not one: nothing of the server's work is left on it.
    var hasRequestInProgress: Bool { streams.values.contains { $0.phase != .sending } }

    /// The request on `id`, once `.answer` said it is complete.
    func request(_ id: HTTP2StreamID) -> Stream? { streams[id] }

    private mutating func complete(_ id: HTTP2StreamID) -> Action {
        streams[id]?.phase = .answering
        return .answer(id)
    }

    private mutating func forget(_ id: HTTP2StreamID, _ code: HTTP2ErrorCode) -> Action {
        streams[id] = nil
        return .reset(id, code)
    }
}

extension HTTP2Requests.Stream {
    /// The request as the listener's answering functions take it.
    func listenerRequest(isTLS: Bool, remote: String, remoteIP: IPAddress?) -> ListenerRequest {
        var fields = HTTPHeaders()
        for (name, value, _) in headers where !name.hasPrefix(":") { fields.add(name: name, value: value) }
        if !fields.contains(name: "host"), let authority = headers.first(name: ":authority") {
            fields.add(name: "host", value: authority)
        }
        return ListenerRequest(
            method: HTTPMethod(rawValue: headers.first(name: ":method") ?? "GET"),
            uri: headers.first(name: ":path") ?? "/",
            headers: fields,
            body: body,
            version: "h2",
            isTLS: isTLS,
            remote: remote,
            remoteIP: remoteIP
        )
    }
}
