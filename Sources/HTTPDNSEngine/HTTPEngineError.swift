import NIOCore

/// Why a request through the engine failed. Compare by `code`; `description` says what happened and,
/// for a connect that tried several addresses, lists every attempt.
public struct HTTPEngineError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: Hashable, Sendable {
        /// No address was given to connect to.
        case noAddresses
        /// Every address was tried and failed (TCP connect or TLS); see `attempts`.
        case connectFailed
        /// The whole request ran past its deadline.
        case timeout
        /// The server broke the protocol or closed before the response was complete.
        case protocolError
        /// The response body was larger than the caller's limit.
        case responseTooLarge
        /// The request could not be formed (bad header, IP given as SNI…).
        case invalidRequest
    }

    /// One connection attempt that failed.
    public struct Attempt: Hashable, Sendable, CustomStringConvertible {
        public var address: String
        public var stage: String  // "connect" or "tls"
        public var reason: String
        public var description: String { "\(address) (\(stage)): \(reason)" }
    }

    public let code: Code
    public let message: String
    public let attempts: [Attempt]

    init(_ code: Code, _ message: String, attempts: [Attempt] = []) {
        self.code = code
        self.message = message
        self.attempts = attempts
    }

    public static func == (l: HTTPEngineError, r: HTTPEngineError) -> Bool { l.code == r.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        guard !attempts.isEmpty else { return message }
        return message + ": " + attempts.map(\.description).joined(separator: "; ")
    }
}
