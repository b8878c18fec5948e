import NIOCore

/// Why a request through the engine failed. Compare by `code`; `description` says what happened and,
/// for a connect that tried several addresses, lists every attempt.
package struct HTTPEngineError: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Code: Hashable, Sendable {
        /// The URL or request could not be used (bad URL, bad header…).
        case invalidRequest
        /// The host name could not be resolved.
        case nameNotResolved
        /// No address was given or found to connect to.
        case noAddresses
        /// Every address was tried and refused or failed; see `attempts`.
        case connectFailed
        /// Connecting took longer than the connect timeout.
        case connectTimeout
        /// The TLS handshake failed: untrusted or wrong certificate, pin mismatch, protocol error.
        case tlsFailed
        /// The TLS handshake took longer than its timeout.
        case tlsHandshakeTimeout
        /// No byte arrived from the server for longer than the idle read timeout.
        case readTimeout
        /// The whole request ran past its total timeout.
        case timeout
        /// The server broke the protocol or closed before the response was complete.
        case protocolError
        /// The response body was larger than the caller's limit.
        case responseTooLarge
        /// More redirects than the policy allows.
        case tooManyRedirects
        /// The request was cancelled.
        case cancelled
    }

    /// One connection attempt that failed.
    package struct Attempt: Hashable, Sendable, CustomStringConvertible {
        package var address: String
        package var stage: String  // "connect" or "tls"
        package var reason: String
        package var description: String { "\(address) (\(stage)): \(reason)" }
    }

    package let code: Code
    package let message: String
    package let attempts: [Attempt]

    package init(_ code: Code, _ message: String, attempts: [Attempt] = []) {
        self.code = code
        self.message = message
        self.attempts = attempts
    }

    package static func == (l: HTTPEngineError, r: HTTPEngineError) -> Bool { l.code == r.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }

    package var description: String {
        guard !attempts.isEmpty else { return message }
        return message + ": " + attempts.map(\.description).joined(separator: "; ")
    }
}
