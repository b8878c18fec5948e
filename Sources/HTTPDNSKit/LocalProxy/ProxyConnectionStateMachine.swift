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
//                  │     (the body streams on as it arrives)  └─► closed; 408 for a body that stalls
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
// A client half-close is remembered, not acted on, while the proxy still owes an answer: a forwarded
// response ends the connection when it is done, and a tunnel passes the half-close on to its target
// after the bytes the client sent before it.

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

        init(allowedPorts: Set<Int>, expectedAuthorization: String? = nil) {
            self.allowedPorts = allowedPorts
            self.expectedAuthorization = expectedAuthorization
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
        /// has ended, `responseStarted` once the response head went out.
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
        case close
    }

    let limits: Limits
    private(set) var state: State = .awaitingHead(.first)
    /// The client shut down its sending side while the proxy still owed it an answer.
    private(set) var clientHalfClosed = false

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
        guard case .awaitingHead = state else {
            // A second head while the first request is still being answered (pipelining) is dropped.
            return .none
        }
        return .cancelHeadTimer(then: route(head))
    }

    private mutating func route(_ head: HTTPRequestHead) -> Action {
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
        guard case .forwarding(_, requestEnded: false, _) = state else { return .none }
        return .forwardBody(chunk)
    }

    mutating func endReceived() -> Action {
        guard case .forwarding(let keepAlive, requestEnded: false, let responseStarted) = state else { return .none }
        state = .forwarding(keepAlive: keepAlive, requestEnded: true, responseStarted: responseStarted)
        return .forwardBodyEnd
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
        // A client that half-closed after its request has nothing more to ask; one whose body the origin
        // answered before it ended has the rest of it still on the way, which no next request may follow.
        guard keepAlive, requestEnded, !clientHalfClosed else {
            state = .closed
            return .close
        }
        state = .awaitingHead(.keptAlive)
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
