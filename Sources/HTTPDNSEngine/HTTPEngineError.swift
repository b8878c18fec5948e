import NIOCore

/// Why a request through the engine failed.
///
/// Compare errors, or switch on `code`, to decide what to do; `description` says what happened and,
/// for a connect that tried several addresses, lists every attempt. The lower-level error (NIOSSL,
/// NIO's `IOError`, the resolver's error…) is kept in `underlying`. Two errors are equal when their
/// codes are. New codes may be added in minor releases, so a `switch` over `code` needs a `default`.
public struct HTTPEngineError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kind of failure this is. An open set of values, like an enum that may grow.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidRequest
            case nameNotResolved
            case noAddresses
            case connectFailed
            case connectTimeout
            case untrustedCertificate
            case certificateNameMismatch
            case pinMismatch
            case tlsFailed
            case tlsHandshakeTimeout
            case readTimeout
            case totalTimeout
            case protocolError
            case responseTooLarge
            case tooManyRedirects
            case cancelled
            case shutdown
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The URL or request could not be used (bad URL, bad header, unreadable body file…).
        public static let invalidRequest = Code(.invalidRequest)
        /// The host name could not be resolved; `underlying` holds the resolver's error.
        public static let nameNotResolved = Code(.nameNotResolved)
        /// No address was given or found to connect to.
        public static let noAddresses = Code(.noAddresses)
        /// Every address was tried and refused or failed; the description lists each attempt.
        public static let connectFailed = Code(.connectFailed)
        /// Connecting took longer than the connect timeout.
        public static let connectTimeout = Code(.connectTimeout)
        /// The server's certificate chain did not verify against the trusted roots (unknown or private
        /// CA, self-signed, expired).
        public static let untrustedCertificate = Code(.untrustedCertificate)
        /// The server's certificate is trusted but not issued for the requested host name.
        public static let certificateNameMismatch = Code(.certificateNameMismatch)
        /// The server's public key is not one of the keys pinned for the host.
        public static let pinMismatch = Code(.pinMismatch)
        /// The TLS handshake failed for another reason (no shared protocol version or cipher, an alert
        /// from the server…).
        public static let tlsFailed = Code(.tlsFailed)
        /// The TLS handshake took longer than its timeout.
        public static let tlsHandshakeTimeout = Code(.tlsHandshakeTimeout)
        /// No byte arrived from the server for longer than the idle read timeout.
        public static let readTimeout = Code(.readTimeout)
        /// The whole request (lookup, connect, redirects and body included) ran past its total timeout.
        public static let totalTimeout = Code(.totalTimeout)
        /// The server broke the protocol or closed before the response was complete.
        public static let protocolError = Code(.protocolError)
        /// The response body was larger than the caller's limit.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// More redirects than the caller allows.
        public static let tooManyRedirects = Code(.tooManyRedirects)
        /// The request was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The engine was shut down before or while the request ran.
        public static let shutdown = Code(.shutdown)

        /// The code's name, e.g. `untrustedCertificate`.
        public var description: String { base.rawValue }
    }

    /// One connection attempt that failed.
    package struct Attempt: Hashable, Sendable, CustomStringConvertible {
        var address: String
        var stage: String  // "connect" or "tls"
        var reason: String
        package var description: String {
            stage == "connect" ? "\(address): \(reason)" : "\(address) (\(stage)): \(reason)"
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened, in words, naming the host and address involved.
    public let message: String
    let attempts: [Attempt]
    /// The lower-level error this one stands for (a NIOSSL or socket error, the resolver's error), if any.
    public let underlying: (any Error)?
    /// Set on a failed connect when the device had no network it could use (NetworkUnavailable.swift):
    /// URLSession reports those as "not connected to the Internet".
    package var networkUnavailable: NetworkUnavailable?
    /// Set when the server's certificate was refused where the system ran TLS: the handshake's trust
    /// object, which URLSession hands the app under `NSURLErrorFailingURLPeerTrustErrorKey`.
    package var peerTrust: PlatformTrust?

    package init(_ code: Code, _ message: String, attempts: [Attempt] = [], underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.attempts = attempts
        self.underlying = underlying
    }

    /// Errors are equal when their codes are.
    public static func == (l: HTTPEngineError, r: HTTPEngineError) -> Bool { l.code == r.code }

    /// The message, followed by every failed connection attempt when there were several.
    public var description: String {
        guard !attempts.isEmpty else { return message }
        // One attempt that the message already names by address: its reason alone, one line.
        if attempts.count == 1, attempts[0].stage == "connect", message.hasSuffix(" at \(attempts[0].address)") {
            return message + ": " + attempts[0].reason
        }
        return message + ": " + attempts.map(\.description).joined(separator: "; ")
    }
}
