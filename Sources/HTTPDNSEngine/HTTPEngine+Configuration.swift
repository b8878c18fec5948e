import HTTPDNSCore
import NIOCore
import Foundation

extension HTTPEngine {
    /// How the engine connects and what it allows. A `Sendable` value with defaults for every field.
    package struct Configuration: Sendable {
        package var tls = HTTPEngineTLS()
        package var timeouts = TimeoutSettings()
        /// The networks every connection may use (each request may narrow them further), and the
        /// proxy the engine tunnels through (nil: straight to every origin).
        package var network = NetworkSettings()
        /// Which HTTP versions to offer through ALPN for https, connections per origin, h2c.
        package var http = HTTPSettings()
        /// Streams on one HTTP/2 connection at most (lower if the server says so).
        var maxConcurrentStreams = 100
        /// An idle pooled connection is closed after this long.
        var idleConnectionTimeout: Duration = .seconds(60)
        /// Sent when the request has no User-Agent.
        var userAgent = "swift-httpdns/0.1"
        /// Spans of each request attempt; nil: none, at the cost of a nil check.
        package var tracing: EngineTracing?

        package init() {}
    }
}

/// TLS settings: trust anchors on top of the system roots, and optional public-key pins.
package struct HTTPEngineTLS: Sendable {
    /// Extra trusted CA certificates (e.g. a test CA, or a private service's CA).
    package var additionalTrustRoots: [TrustAnchor]
    /// Per host: base64 SHA-256 digests of SubjectPublicKeyInfo, at least one of which the server's
    /// leaf certificate must carry (the usual `pin-sha256` form). Checked on top of normal verification.
    var pins: [String: Set<String>]

    package init(additionalTrustRoots: [TrustAnchor] = [], pins: [String: Set<String>] = [:]) {
        self.additionalTrustRoots = additionalTrustRoots
        self.pins = pins
    }

    /// The trust `settings` describe: its PEM files loaded, its pins as they are. Throws
    /// `HTTPDNSConfigurationError` (`.invalidCertificate`) naming a file that cannot be used.
    package init(loading settings: TLSSettings) throws {
        self.init(
            additionalTrustRoots: try settings.trustedCertificateFiles.flatMap(Self.loadPEM(file:)),
            pins: settings.pins
        )
    }

    /// Loads PEM certificates from a file. Throws `HTTPDNSConfigurationError` with code
    /// `.invalidCertificate`, naming the file, when it cannot be read or holds no certificate.
    package static func loadPEM(file path: String) throws -> [TrustAnchor] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw HTTPDNSConfigurationError(
                .invalidCertificate,
                "could not read PEM certificates from \(path): \(error.localizedDescription)"
            )
        }
        let certificates: [TrustAnchor]
        do {
            certificates = try CertificateDER.certificates(inPEM: text).map { TrustAnchor(der: $0) }
        } catch {
            throw HTTPDNSConfigurationError(
                .invalidCertificate,
                "could not read PEM certificates from \(path): \(error)"
            )
        }
        for (index, certificate) in certificates.enumerated()
        where CertificateDER.subjectPublicKeyInfo(of: certificate.der) == nil {
            throw HTTPDNSConfigurationError(
                .invalidCertificate,
                "certificate \(index + 1) in \(path) is not an X.509 certificate (its DER does not parse)"
            )
        }
        guard !certificates.isEmpty else {
            throw HTTPDNSConfigurationError(
                .invalidCertificate,
                "\(path) holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)"
            )
        }
        return certificates
    }
}

/// A CA certificate trusted on top of the system's roots, as its DER bytes: the form both TLS stacks
/// take (BoringSSL on Linux, the Security framework on Apple platforms).
package struct TrustAnchor: Sendable, Hashable {
    package var der: [UInt8]

    package init(der: [UInt8]) {
        self.der = der
    }
}

/// Which HTTP versions the engine offers to https servers through ALPN.
public enum HTTPVersionPolicy: String, Sendable, Hashable {
    /// HTTP/2 when the server agrees through ALPN, else HTTP/1.1 (the default).
    case automatic
    /// Offer only http/1.1: for a server whose HTTP/2 is broken, or to compare the two.
    case http1Only
    /// Offer only h2 (what RFC 8484 servers such as kresd `doh2`, bind9 and unbound speak); a server
    /// without it fails the handshake.
    case http2Only

    /// What ALPN offers, the preferred first.
    var alpn: [String] {
        switch self {
        case .automatic: ["h2", "http/1.1"]
        case .http1Only: ["http/1.1"]
        case .http2Only: ["h2"]
        }
    }
}

/// The HTTP version a response came over.
/// The HTTP version a connection speaks, as ALPN names it.
public enum HTTPVersionUsed: String, Sendable, Hashable {
    /// HTTP/1.1 (`http/1.1`).
    case http1 = "http/1.1"
    /// HTTP/2 (`h2`).
    case http2 = "h2"
}
