// The engine's errors for a failed connect or TLS setup: codes from error values, messages naming the
// host, the address and every attempt.

import HTTPDNSCore
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

func describe(_ address: SocketAddress) -> String {
    guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
    return formatAuthority(host: ip, port: port)
}

extension SocketAddress {
    /// The socket address of an `IPAddress` and port.
    package init(_ ip: IPAddress, port: Int) throws {
        try self.init(ipAddress: ip.description, port: port)
    }

    var httpdnsIP: IPAddress? { ipAddress.flatMap { IPAddress($0) } }
}

func describeConnectFailure(_ error: any Error, host: String, port: Int, timeout: Duration) -> HTTPEngineError {
    if let e = error as? NIOConnectionError {
        let attempts = e.connectionErrors.map {
            HTTPEngineError.Attempt(
                address: describe($0.target),
                stage: "connect",
                reason: describeSocketError($0.error)
            )
        }
        var failure = HTTPEngineError(
            .connectFailed,
            attempts.count == 1
                ? "could not connect to \(host) at \(attempts[0].address)"
                : "could not connect to \(host) at any address",
            attempts: attempts,
            underlying: e
        )
        failure.networkUnavailable = NetworkUnavailable.judge(
            errnos: e.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode },
            path: nil,
            access: .unrestricted
        )
        return failure
    }
    if case ChannelError.connectTimeout = error {
        return HTTPEngineError(
            .connectTimeout,
            "connecting to \(formatAuthority(host: host, port: port)) took longer than \(timeout)",
            underlying: error
        )
    }
    var failure = HTTPEngineError(
        .connectFailed,
        "could not connect to \(formatAuthority(host: host, port: port)): \(describeSocketError(error))",
        underlying: error
    )
    if let errno = (error as? IOError)?.errnoCode {
        failure.networkUnavailable = NetworkUnavailable.judge(errnos: [errno], path: nil, access: .unrestricted)
    }
    return failure
}

/// A socket error in words: the system's text for its errno (`connection refused`), not NIO's
/// description, which nests parentheses (`connection reset (error set): Connection refused (errno: 111)`).
func describeSocketError(_ error: any Error) -> String {
    if let e = error as? IOError {
        let text = String(cString: strerror(e.errnoCode))
        return text.prefix(1).lowercased() + text.dropFirst()
    }
    if case ChannelError.connectTimeout = error { return "timed out" }
    return "\(error)"
}

/// The error for a certificate chain that does not lead to a trusted root.
func untrustedCertificate(host: String, address: String, underlying: (any Error)? = nil) -> HTTPEngineError {
    HTTPEngineError(
        .untrustedCertificate,
        "the certificate presented for \(host) at \(address) is not trusted (signed by a private CA? trust that CA: HTTPDNS.Configuration.tls.trustedCertificateFiles, or trusting: in the short form)",
        underlying: underlying
    )
}

/// The engine's error for a failed TLS setup: the code from the error's type and value (and from the TLS
/// stack's verdict on the chain), the message naming the host and the address it was reached at.
func describeTLSFailure(_ error: any Error, host: String, address: String, chainRejected: Bool) -> HTTPEngineError {
    if let e = error as? IdentityFailure {
        let code: HTTPEngineError.Code =
            switch e.kind {
            case .nameMismatch: .certificateNameMismatch
            case .pinMismatch: .pinMismatch
            case .noCertificate: .tlsFailed
            }
        // No underlying error: the check is our own, and the code and message say all there is.
        return HTTPEngineError(code, "the certificate presented at \(address) is not valid for \(host): \(e.reason)")
    }
    if let described = PlatformTransport.describeTLSError(
        error,
        host: host,
        address: address,
        chainRejected: chainRejected
    ) {
        return described
    }
    return HTTPEngineError(.tlsFailed, "TLS with \(host) at \(address) failed: \(error)", underlying: error)
}
