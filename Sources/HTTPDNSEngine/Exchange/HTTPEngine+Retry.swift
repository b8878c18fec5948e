// When a request whose exchange broke is sent again on a new connection: a pure rule, tested without
// sockets (ExchangeRetryTests); `HTTPEngine.execute` carries it out. Connects are retried by the pool
// (ConnectAttemptFailed.retryMayHelp, PoolStateMachine); this is about exchanges.
//
// - A stream the server never processed (RFC 9113 §6.8: above the last stream its GOAWAY accepted, or
//   never written) goes again whatever its method: the server did nothing with it.
// - An exchange broken by the connection closing (a protocol error) goes again only for an idempotent
//   method with a body that can be sent twice, and only where the close is the known race: a kept-alive
//   HTTP/1.1 connection the server had already closed, or an HTTP/2 one it is closing (GOAWAY).
// - At most `limit` times: under load the retry can land on the next connection a server is retiring
//   (nginx ends an h2 connection every `keepalive_requests` streams).

import NIOHTTP1

enum ExchangeRetry {
    /// New connections one request may be sent again on.
    static let limit = 2

    enum Failure {
        /// The exchange failed with a protocol error (the connection closed under it).
        case broken
        /// The server cannot have processed the HTTP/2 stream.
        case neverProcessed
    }

    /// What the rule looks at, read when the exchange has failed.
    struct Attempt {
        var method: HTTPMethod
        /// No body, or bytes in memory (a stream cannot be sent twice).
        var bodyReplayable: Bool
        /// The connection had served an earlier request.
        var reused: Bool
        var version: HTTPVersionUsed
        var goAwayReceived: Bool
        var retriesLeft: Int

        init(request: HTTPEngineRequest, reused: Bool, version: HTTPVersionUsed, goAwayReceived: Bool, retriesLeft: Int)
        {
            self.method = request.method
            if case .stream = request.body?.storage { bodyReplayable = false } else { bodyReplayable = true }
            self.reused = reused
            self.version = version
            self.goAwayReceived = goAwayReceived
            self.retriesLeft = retriesLeft
        }
    }

    static let idempotent: [HTTPMethod] = [.GET, .HEAD, .OPTIONS, .PUT, .DELETE]

    /// Whether the request goes again on a new connection.
    static func sendAgain(after failure: Failure, _ attempt: Attempt) -> Bool {
        guard attempt.retriesLeft > 0, attempt.bodyReplayable else { return false }
        switch failure {
        case .neverProcessed:
            return true
        case .broken:
            let knownRace = (attempt.reused && attempt.version == .http1) || attempt.goAwayReceived
            return idempotent.contains(attempt.method) && knownRace
        }
    }
}
