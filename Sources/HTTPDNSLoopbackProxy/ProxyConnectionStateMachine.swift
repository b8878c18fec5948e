// What one client connection of the loopback proxy does next, as a value: no channels, no clocks, no
// I/O. `ProxyHandler` feeds it events (a request head arrived, the head timer fired, the tunnel's target
// connected, a forwarded response ended, the client half-closed…) and performs the `Action` each event
// returns. The shape follows AsyncHTTPClient's `HTTPRequestStateMachine`.
//
//                      head timer / head too large ──────────────────────────► 408 / 431, closed
//                      keep-alive timer (no byte of a next request) ────────────► closed
//   awaitingHead ──┬── CONNECT, allowed port ──► connecting ──► tunnelling (200, bytes glued; handler leaves)
//                  │                                 ├────────► 502, closed
//                  │                                 └────────► 508 (the target is this proxy), closed
//                  ├── http://, allowed port ──► forwarding ──► awaitingHead (keep-alive)
//                  │     (the body streams on as it arrives)  ├─► the next queued request (pipelined)
//                  │                                          └─► closed; 408 for a body that stalls
//                  ├── GET /proxy.pac ──► PAC, then awaitingHead (keep-alive) or closed
//                  └── 407 / 403 / 400 ─► closed
//
// Every head is timed, as nginx times them: the first from the moment the connection is accepted; on a
// kept-alive connection, the wait for a next request is bounded by the keep-alive timeout (then the
// connection is closed without a word, as nginx's keepalive_timeout), and once the first byte of that
// request has arrived (`bytesArrived`, from `HeadLimiter`) its head must be whole within the head
// timeout (408). Only the first head is size-limited by `HeadLimiter`; later ones by NIO's HTTP parser.
// Resolution happens inside "connecting":
// NIO's happy-eyeballs connector resolves through the proxy's resolver and races the addresses in one
// step, so there is no separate resolving state to observe.
//
// A forwarded request goes to the engine as soon as its head is here, and its body (if the head declares
// one) follows part by part while the response may already be coming back; the handler reads the client
// only as fast as the engine sends (ForwardedBody), so a connection holds a few chunks, not a whole body.
//
// A request that arrives while a forwarded one is still being answered is kept, not dropped (a dropped
// one left its client waiting for the keep-alive timeout): a client that pipelines (two GETs in one write), and a keep-alive client whose next GET is read
// before the proxy has seen its previous response end (the engine's task tells the loop a moment after
// the last byte went out). Its parts (head, body, end) wait in `pipelined`, and reading stops at the
// first, so what waits is at most what the read under way brought (NIO's few buffers of one wakeup); of
// that, at most `Limits.maxPipelined` requests, and a connection that sent more closes once those are
// answered (a client retries the requests a closed connection left unanswered, RFC 9112 §9.3.2). As
// each response ends, the next queued request is served, so responses go out in request order; reading
// resumes when the queue is empty.
//
// A client half-close is remembered, not acted on, while the proxy still owes an answer: a forwarded
// response ends the connection when it is done (after the requests queued behind it), and a tunnel
// passes the half-close on to its target after the bytes the client sent before it.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOHTTP1

struct ProxyConnectionStateMachine {
    /// What the machine needs from the proxy's configuration.
    struct Limits: Equatable {
        var allowedPorts: Set<Int>
        /// The whole `Proxy-Authorization` value a client must send (`Basic …`); nil: none needed.
        var expectedAuthorization: String?
        /// Requests kept behind the one being answered. Reading stops at the first, so only what the read
        /// under way brought can be queued; this bounds the requests among it.
        var maxPipelined: Int

        init(allowedPorts: Set<Int>, expectedAuthorization: String? = nil, maxPipelined: Int = 4) {
            self.allowedPorts = allowedPorts
            self.expectedAuthorization = expectedAuthorization
            self.maxPipelined = maxPipelined
        }

        init(_ configuration: HTTPDNSProxy.Configuration) {
            self.init(
                allowedPorts: configuration.allowedPorts,
                expectedAuthorization: configuration.credentials.map {
                    "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString()
                }
            )
        }
    }

    /// What a connection waiting for a request head waits for, and which timer runs.
    enum HeadWait: Equatable {
        /// The connection's first head: the head timer runs from the accept.
        case first
        /// A kept-alive connection's next request, no byte of which has arrived: the keep-alive timer runs.
        case keptAlive
        /// The rest of a next request's head, whose first bytes have arrived: the head timer runs.
        case next
    }

    enum State: Equatable {
        /// Waiting for a request head.
        case awaitingHead(HeadWait)
        /// The engine is sending a request on; `requestEnded` once the client's request (its body)
        /// has ended, `responseStarted` once the response head went out. Requests that arrive meanwhile
        /// wait in `pipelined`.
        case forwarding(keepAlive: Bool, requestEnded: Bool, responseStarted: Bool)
        /// CONNECT: resolving the host and connecting to it.
        case connecting(host: String, port: Int)
        /// The tunnel is open; the channel belongs to the glue handlers now.
        case tunnelling
        /// Closing or closed: every further event is ignored.
        case closed
    }

    /// No request in progress: waiting for a head (the first, or the next on a kept-alive connection),
    /// or for the rest of one. Such a connection may be closed to make room for a new one.
    var isIdle: Bool {
        if case .awaitingHead = state { return true }
        return false
    }

    /// An HTTP response to write through the response encoder.
    struct Reply: Equatable {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: String
        /// Close the connection once the reply is written.
        var close: Bool

        /// A text reply: `text` plus a newline (unless `newline` is false) as the body, with its
        /// content type and length.
        static func text(
            _ status: HTTPResponseStatus,
            _ text: String,
            close: Bool = true,
            headers extra: HTTPHeaders = [:],
            contentType: String = "text/plain",
            newline: Bool = true
        ) -> Reply {
            let body = newline ? text + "\n" : text
            var headers = extra
            headers.add(name: "content-type", value: contentType)
            headers.add(name: "content-length", value: "\(body.utf8.count)")
            if close { headers.add(name: "connection", value: "close") }
            return Reply(status: status, headers: headers, body: body, close: close)
        }

        /// A reply before any request head (408, 431): no body, and then the connection closes. The
        /// header spelling is what the proxy has always sent here, byte for byte.
        static func bare(_ status: HTTPResponseStatus) -> Reply {
            Reply(status: status, headers: ["Content-Length": "0", "Connection": "close"], body: "", close: true)
        }
    }

    indirect enum Action: Equatable {
        case none
        /// Stop the head timer (or the keep-alive timer), then perform `then`.
        case cancelHeadTimer(then: Action)
        /// Start the head timer (`requestHeadTimeout`); report `headTimerFired` when it runs out.
        case startHeadTimer
        /// Start the keep-alive timer (`keepAliveTimeout`), then perform `then`; report
        /// `keepAliveTimerFired` when it runs out.
        case startKeepAliveTimer(then: Action)
        /// Write the reply, and close after it if it says so.
        case reply(Reply)
        /// Write the PAC file; close after it unless the client keeps the connection alive.
        case servePAC(close: Bool)
        /// Resolve `host` and connect to it; report `connectSucceeded` or `connectFailed`.
        case openTunnel(host: String, port: Int)
        /// A tunnel that could not be opened: record it as failed with `error`, then write the reply.
        case failTunnel(host: String, port: Int, error: String, reply: Reply)
        /// Answer 200 and glue the client to the connected target; pass on the client's half-close
        /// (after the bytes that came before it) when `passOnHalfClose`.
        case establishTunnel(host: String, port: Int, passOnHalfClose: Bool)
        /// The target connected after the client went away: close the new connection.
        case closeUpstream
        /// Send the request on through the engine, its body (if the head declares one) to follow as
        /// `forwardBody` parts; report `forwardResponseStarted`, then `forwardFinished` or `forwardFailed`.
        case forward(HTTPRequestHead, HTTPURL)
        /// A part of the forwarded request's body.
        case forwardBody(ByteBuffer)
        /// The forwarded request's body is complete.
        case forwardBodyEnd
        /// The forwarded request's body will not be complete: fail it (the engine gives up the request),
        /// and write `reply` when there is one.
        case abortForwardBody(String, reply: Reply?)
        /// Stop reading the client: requests wait behind the one being answered.
        case pauseReading
        /// Read the client again: no request waits any more.
        case resumeReading
        /// Perform each, in order (a queued request served: its head, its body parts, its end).
        case sequence([Action])
        case close
    }

    let limits: Limits
    private(set) var state: State = .awaitingHead(.first)
    /// The client shut down its sending side while the proxy still owed it an answer.
    private(set) var clientHalfClosed = false
    /// The parts of the requests that arrived while a forwarded one was being answered, in the decoder's
    /// order: each head, then its body parts and end. The first part is always a head.
    private(set) var pipelined = CircularBuffer<HTTPServerRequestPart>()
    /// The heads in `pipelined`: at most `limits.maxPipelined`.
    private var pipelinedHeads = 0
    /// The client pipelined more requests than the queue holds: those past it were dropped, and the
    /// connection closes once the queued ones are answered.
    private(set) var pipelineOverflowed = false
    /// Reading was stopped for the queue (`pauseReading`) and not resumed yet.
    private var readingPaused = false

    init(limits: Limits) { self.limits = limits }

    // MARK: before a head

    /// The client did not send a whole head in time.
    mutating func headTimerFired() -> Action {
        guard state == .awaitingHead(.first) || state == .awaitingHead(.next) else { return .none }
        state = .closed
        return .reply(.bare(.requestTimeout))
    }

    /// Bytes arrived from the client (before the HTTP decoder): on a kept-alive connection, the next
    /// request has started, and its head is timed from now.
    mutating func bytesArrived() -> Action {
        guard state == .awaitingHead(.keptAlive) else { return .none }
        state = .awaitingHead(.next)
        return .cancelHeadTimer(then: .startHeadTimer)
    }

    /// A kept-alive connection had no byte of a next request for the keep-alive timeout: closed, without
    /// a reply (there is no request to answer).
    mutating func keepAliveTimerFired() -> Action {
        guard state == .awaitingHead(.keptAlive) else { return .none }
        state = .closed
        return .close
    }

    /// The head grew past the limit before its blank line (reported by `HeadLimiter`).
    mutating func headTooLarge() -> Action {
        guard case .awaitingHead = state else { return .none }
        state = .closed
        return .reply(.bare(.requestHeaderFieldsTooLarge))
    }

    /// The HTTP decoder could not parse what the client sent.
    mutating func malformedRequest(_ description: String) -> Action {
        switch state {
        case .awaitingHead, .connecting:
            state = .closed
            return .reply(.text(.badRequest, "malformed request: \(description)"))
        case .forwarding(_, let requestEnded, let responseStarted):
            state = .closed
            // A body that cannot be parsed is not sent on as if complete; a response already under way
            // cannot take a 400 in its middle.
            guard !requestEnded else { return .close }
            let why = "malformed request body: \(description)"
            return .abortForwardBody(why, reply: responseStarted ? nil : .text(.badRequest, why))
        case .tunnelling, .closed:
            return .none
        }
    }

    // MARK: the request

    mutating func headReceived(_ head: HTTPRequestHead) -> Action {
        switch state {
        case .awaitingHead:
            return .cancelHeadTimer(then: dispatch(head))
        case .forwarding:
            // A next request while this one is still being answered: kept, and served once its response
            // has ended.
            return enqueue(.head(head))
        case .connecting, .tunnelling, .closed:
            // The decoder passes what follows a CONNECT head on as the tunnel's bytes: no head comes from
            // it here, and none is served.
            return .none
        }
    }

    private mutating func dispatch(_ head: HTTPRequestHead) -> Action {
        if let expected = limits.expectedAuthorization, head.headers["proxy-authorization"].first != expected {
            state = .closed
            return .reply(
                .text(
                    .proxyAuthenticationRequired,
                    "proxy authentication required",
                    headers: ["proxy-authenticate": "Basic realm=\"httpdns\""]
                )
            )
        }
        switch ProxyRequestTarget.parse(method: head.method.rawValue, uri: head.uri) {
        case .tunnel(let host, let port):
            guard limits.allowedPorts.contains(port) else {
                state = .closed
                return .failTunnel(
                    host: host,
                    port: port,
                    error: "port not allowed",
                    reply: .text(.forbidden, "CONNECT to port \(port) is not allowed (allowed: \(allowedPortsText))")
                )
            }
            state = .connecting(host: host, port: port)
            return .openTunnel(host: host, port: port)
        case .forward(let parts):
            let url = HTTPURL(parts)
            // The same port rule as CONNECT: otherwise http://127.0.0.1:ANYPORT/ reaches any local service.
            guard limits.allowedPorts.contains(url.port) else {
                state = .closed
                return .reply(
                    .text(.forbidden, "forwarding to port \(url.port) is not allowed (allowed: \(allowedPortsText))")
                )
            }
            state = .forwarding(keepAlive: head.isKeepAlive, requestEnded: false, responseStarted: false)
            return .forward(head, url)
        case .pac:
            guard head.isKeepAlive else {
                state = .closed
                return .servePAC(close: true)
            }
            state = .awaitingHead(.keptAlive)
            return .startKeepAliveTimer(then: .servePAC(close: false))
        case .invalid(let why):
            state = .closed
            return .reply(.text(.badRequest, why))
        }
    }

    mutating func bodyReceived(_ chunk: ByteBuffer) -> Action {
        switch state {
        case .forwarding(_, requestEnded: false, _):
            return .forwardBody(chunk)
        case .forwarding where !pipelined.isEmpty:
            // The body of a queued request: it stays with its head.
            return enqueue(.body(chunk))
        default:
            return .none
        }
    }

    mutating func endReceived() -> Action {
        switch state {
        case .forwarding(let keepAlive, requestEnded: false, let responseStarted):
            state = .forwarding(keepAlive: keepAlive, requestEnded: true, responseStarted: responseStarted)
            return .forwardBodyEnd
        case .forwarding where !pipelined.isEmpty:
            return enqueue(.end(nil))
        default:
            return .none
        }
    }

    // MARK: requests queued behind the one being answered

    /// Keeps a part of a request that must wait for the one being answered. The first part kept stops
    /// reading, so the client's next bytes wait in its socket; of the requests already read, those past
    /// `maxPipelined` are dropped, and the connection will close once the queued ones are answered.
    private mutating func enqueue(_ part: HTTPServerRequestPart) -> Action {
        guard !pipelineOverflowed else { return .none }
        if case .head = part {
            guard pipelinedHeads < limits.maxPipelined else {
                pipelineOverflowed = true
                return .none
            }
            pipelinedHeads += 1
        }
        pipelined.append(part)
        guard !readingPaused else { return .none }
        readingPaused = true
        return .pauseReading
    }

    /// Serves the queue once the response before it has ended (the connection waits for a head): the
    /// next request's head, then the body parts and end that came with it. A head after them waits for
    /// that request's answer, unless it was answered at once (the PAC file); one that closes the
    /// connection leaves the rest unanswered. Reading resumes once the queue is empty.
    private mutating func serveQueued() -> Action {
        var actions: [Action] = []
        serving: while let part = pipelined.first {
            let action: Action
            switch (part, state) {
            case (_, .closed):
                // Refused, or answered and closed: no one is left to answer the rest.
                pipelined.removeAll()
                pipelinedHeads = 0
                break serving
            case (.head(var head), .awaitingHead):
                pipelined.removeFirst()
                pipelinedHeads -= 1
                if pipelineOverflowed, pipelinedHeads == 0 {
                    // The last request this connection answers: its response says the connection closes.
                    head.headers.replaceOrAdd(name: "connection", value: "close")
                }
                action = headReceived(head)
            case (.head, _):
                // The next request waits for this one's answer.
                break serving
            case (.body(let chunk), _):
                pipelined.removeFirst()
                action = bodyReceived(chunk)
            case (.end, _):
                pipelined.removeFirst()
                action = endReceived()
            }
            if action != .none { actions.append(action) }
        }
        if clientHalfClosed, pipelined.isEmpty {
            // All the client sent before its half-close has been taken: a request it left unfinished is
            // given up, and a connection with none in progress is closed.
            let action = inputClosed()
            if action != .none { actions.append(action) }
        }
        if readingPaused, pipelined.isEmpty, state != .closed {
            readingPaused = false
            actions.append(.resumeReading)
        }
        switch actions.count {
        case 0: return .none
        case 1: return actions[0]
        default: return .sequence(actions)
        }
    }

    /// No byte of the forwarded request's body arrived for the body timeout while one was wanted.
    mutating func bodyTimedOut() -> Action {
        guard case .forwarding(_, requestEnded: false, let responseStarted) = state else { return .none }
        state = .closed
        let why = "request body not complete in time"
        return .abortForwardBody(why, reply: responseStarted ? nil : .text(.requestTimeout, why))
    }

    // MARK: forwarding

    /// The forwarded response's head is about to be written: from now on a failure can only close.
    mutating func forwardResponseStarted() -> Action {
        guard case .forwarding(let keepAlive, let requestEnded, _) = state else { return .none }
        state = .forwarding(keepAlive: keepAlive, requestEnded: requestEnded, responseStarted: true)
        return .none
    }

    mutating func forwardFinished() -> Action {
        guard case .forwarding(let keepAlive, let requestEnded, _) = state else { return .none }
        // A client that half-closed after its requests has nothing more to ask, nor one that pipelined
        // more than the queue holds once the queue is served; one whose body the origin answered before
        // it ended has the rest of it still on the way, which no next request may follow.
        let nothingMore = pipelined.isEmpty && (clientHalfClosed || pipelineOverflowed)
        guard keepAlive, requestEnded, !nothingMore else {
            state = .closed
            return .close
        }
        state = .awaitingHead(.keptAlive)
        guard pipelined.isEmpty else { return serveQueued() }
        return .startKeepAliveTimer(then: .none)
    }

    /// The engine could not fetch the request, or the response broke off; `message` says why.
    mutating func forwardFailed(_ message: String) -> Action {
        guard case .forwarding(_, _, let responseStarted) = state else { return .none }
        state = .closed
        // Mid-response the only honest signal left is closing the connection.
        return responseStarted ? .close : .reply(.text(.badGateway, message))
    }

    // MARK: CONNECT

    /// `toItself`: the target's address is the one the client reached this proxy at (a CONNECT to the
    /// proxy itself, by address or by a name that resolves to it). Refused with 508: each such tunnel
    /// would hold a client connection, a tunnel and a second client connection of our own, and a
    /// client could nest them as deep as it liked.
    mutating func connectSucceeded(toItself: Bool = false) -> Action {
        guard case .connecting(let host, let port) = state else { return .closeUpstream }
        guard !toItself else {
            state = .closed
            let authority = formatAuthority(host: host, port: port)
            return .failTunnel(
                host: host,
                port: port,
                error: "the target is this proxy",
                reply: .text(.loopDetected, "\(authority) is this proxy itself: a tunnel to it would loop")
            )
        }
        state = .tunnelling
        return .establishTunnel(host: host, port: port, passOnHalfClose: clientHalfClosed)
    }

    /// `why`: the connector's error, as `ProxyHandler.describe` words it.
    mutating func connectFailed(_ why: String) -> Action {
        guard case .connecting(let host, let port) = state else { return .none }
        state = .closed
        let authority = formatAuthority(host: host, port: port)
        return .failTunnel(
            host: host,
            port: port,
            error: why,
            reply: .text(.badGateway, "could not connect to \(authority): \(why)")
        )
    }

    // MARK: the client connection

    /// The client shut down its sending side (reported by `HeadLimiter`, which keeps it from the decoder).
    mutating func inputClosed() -> Action {
        switch state {
        case .awaitingHead:
            // No whole request, and nothing more will come.
            state = .closed
            return .close
        case .forwarding(_, requestEnded: false, let responseStarted):
            // The body ends short: it is not sent on as if complete.
            state = .closed
            let why = "the client closed its side before the request body ended"
            return .abortForwardBody(why, reply: responseStarted ? nil : .text(.badRequest, why))
        case .forwarding, .connecting:
            clientHalfClosed = true
            return .none
        case .tunnelling, .closed:
            return .none
        }
    }

    /// Any other error on the connection.
    mutating func errorCaught() -> Action {
        switch state {
        case .closed, .tunnelling:
            return .none
        default:
            state = .closed
            return .close
        }
    }

    mutating func channelInactive() -> Action {
        state = .closed
        return .none
    }

    /// The allowed ports, for the 403 that refuses another (CONNECT and absolute-form alike).
    private var allowedPortsText: String {
        limits.allowedPorts.sorted().map(String.init).joined(separator: ", ")
    }
}

/// Counts the bytes of a connection's first request head, up to its blank line, for `HeadLimiter`.
/// The blank line is found with or without CRs (`\n\n`, `\r\n\r\n`, `\n\r\n`, `\r\n\n`), so a head the
/// HTTP decoder accepts always ends the count, and the bytes after it (body, tunnel) are never counted.
struct RequestHeadCounter {
    enum Verdict: Equatable {
        /// Pass the bytes on.
        case pass
        /// The head just grew past the limit: report it, and drop these bytes.
        case tooLarge
        /// Past the limit before: drop.
        case drop
    }

    let maxBytes: Int
    private(set) var seen = 0
    private(set) var headEnded = false
    private var overLimit = false
    /// 0: inside a line; 1: just after a LF; 2: after a LF and a CR.
    private var lineStart = 0

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    mutating func received<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Verdict {
        if overLimit { return .drop }
        if headEnded { return .pass }
        var count = 0
        for byte in bytes {
            count += 1
            switch (byte, lineStart) {
            case (UInt8(ascii: "\n"), 1), (UInt8(ascii: "\n"), 2):
                headEnded = true
            case (UInt8(ascii: "\n"), _):
                lineStart = 1
            case (UInt8(ascii: "\r"), 1):
                lineStart = 2
            default:
                lineStart = 0
            }
            if headEnded { break }
        }
        seen += count
        if seen > maxBytes {
            overLimit = true
            return .tooLarge
        }
        return .pass
    }
}
