import HTTPDNSCore
import HTTPDNSNetwork
import NIOCore
import Foundation
import SwiftASN1

extension HTTPEngine {
    /// How the engine connects and what it allows. A `Sendable` value with defaults for every field.
    package struct Configuration: Sendable {
        package var tls = HTTPEngineTLS()
        /// Which HTTP versions to offer through ALPN for https.
        package var versions: HTTPVersionPolicy = .automatic
        /// HTTP proxies the engine tunnels through (nil: straight to every origin).
        package var proxy: HTTPProxySettings?
        /// The networks every connection may use (each request may narrow them further).
        package var networkAccess = NetworkAccess.unrestricted
        /// Speak HTTP/2 without TLS (h2c, prior knowledge) to http:// URLs.
        package var http2PriorKnowledge = false
        package var timeouts = Timeouts()
        /// HTTP/1.1 connections kept per (scheme, host, port) at most; requests beyond wait for one.
        package var maxConnectionsPerHost = 8
        /// Streams on one HTTP/2 connection at most (lower if the server says so).
        package var maxConcurrentStreams = 100
        /// An idle pooled connection is closed after this long.
        package var idleConnectionTimeout: Duration = .seconds(60)
        /// Sent when the request has no User-Agent.
        package var userAgent = "swift-httpdns/0.1"
        /// Spans of each request attempt; nil: none, at the cost of a nil check.
        package var tracing: EngineTracing?

        package init() {}
    }

    /// Each phase has its own bound and its own error code.
    package struct Timeouts: Sendable {
        /// TCP connect, all happy-eyeballs attempts together.
        package var connect: Duration = .seconds(10)
        package var tlsHandshake: Duration = .seconds(10)
        /// No byte from the server for this long while waiting for or reading a response.
        package var idleRead: Duration = .seconds(30)
        /// The whole request, body included; nil for none.
        package var total: Duration?

        package init() {}
    }
}

/// TLS settings: trust anchors on top of the system roots, and optional public-key pins.
package struct HTTPEngineTLS: Sendable {
    /// Extra trusted CA certificates (e.g. a test CA, or a private service's CA).
    package var additionalTrustRoots: [TrustAnchor]
    /// Per host: base64 SHA-256 digests of SubjectPublicKeyInfo, at least one of which the server's
    /// leaf certificate must carry (the usual `pin-sha256` form). Checked on top of normal verification.
    package var pins: [String: Set<String>]

    package init(additionalTrustRoots: [TrustAnchor] = [], pins: [String: Set<String>] = [:]) {
        self.additionalTrustRoots = additionalTrustRoots
        self.pins = pins
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
        let documents: [PEMDocument]
        do {
            documents = try PEMDocument.parseMultiple(pemString: text)
        } catch {
            throw HTTPDNSConfigurationError(
                .invalidCertificate,
                "could not read PEM certificates from \(path): \(error)"
            )
        }
        let certificates = documents.filter { $0.discriminator == "CERTIFICATE" }.map { TrustAnchor(der: $0.derBytes) }
        for (index, certificate) in certificates.enumerated()
        where (try? PublicKeyPin.subjectPublicKeyInfo(certificateDER: certificate.der)) == nil {
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

/// Where the engine gets the addresses of a host: the resolver, at connect time.
package protocol AddressSource: Sendable {
    /// Addresses of `host`, each family in preference order, and who answered.
    func addresses(for host: String) async throws -> ResolvedAddresses
    /// The longest `addresses(for:)` can take: the source ends every lookup within it. nil: no such
    /// bound, so the engine bounds the lookup with the request's deadline.
    var lookupTimeout: Duration? { get }
}

extension AddressSource {
    package var lookupTimeout: Duration? { nil }
}

/// Fixed addresses per host, e.g. a resolver endpoint's bootstrap IPs; unknown hosts fail.
package struct StaticAddressSource: AddressSource {
    package var table: [String: [IPAddress]]
    package init(_ table: [String: [IPAddress]]) { self.table = table }

    package func addresses(for host: String) async throws -> ResolvedAddresses {
        guard let ips = table[normalizeHostname(host)], !ips.isEmpty else {
            throw HTTPEngineError(.nameNotResolved, "no address configured for \(host)")
        }
        return ResolvedAddresses(ipv4: ips.filter { !$0.isIPv6 }, ipv6: ips.filter(\.isIPv6), source: .staticHosts)
    }
}
