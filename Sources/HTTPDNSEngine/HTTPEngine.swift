// The one HTTP engine: every HTTP exchange of the project (the resolver's own DoH/JSON queries now, app
// traffic later) goes through here.
//
// "Who we talk to" and "where we connect" are kept apart: a request names the real host (used for TLS
// SNI, the certificate check and Host / :authority) and the caller passes the socket addresses to try.
// An IP never goes into SNI: for an IP-literal host no SNI is sent and the certificate is checked
// against the IP (IP SAN), as NIOSSL does when no hostname is given. Verification is never switched off.

import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import HTTPDNSCore

/// Which HTTP versions the engine may use.
public enum HTTPVersionPolicy: String, Sendable, Hashable {
    /// HTTP/2 when the server agrees through ALPN, else HTTP/1.1.
    case automatic
    /// Offer only http/1.1.
    case http1Only
    /// Offer only h2 (what RFC 8484 servers such as kresd `doh2`, bind9 and unbound speak).
    case http2Only
}

/// The HTTP version a response came over.
public enum HTTPVersionUsed: String, Sendable, Hashable {
    case http1 = "http/1.1"
    case http2 = "h2"
}

/// A request: the real host and port, the target (path and query), headers and an optional body.
public struct HTTPEngineRequest: Sendable {
    public var method: HTTPMethod
    public var scheme: String
    public var host: String
    public var port: Int
    public var target: String
    public var headers: HTTPHeaders
    public var body: [UInt8]?

    public init(method: HTTPMethod = .GET, scheme: String, host: String, port: Int, target: String, headers: HTTPHeaders = [:], body: [UInt8]? = nil) {
        self.method = method
        self.scheme = scheme
        self.host = host
        self.port = port
        self.target = target
        self.headers = headers
        self.body = body
    }

    /// `host[:port]` as it goes into Host / :authority (port left out when it is the scheme's default).
    public var authority: String {
        let h = host.contains(":") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return port == defaultPort ? h : "\(h):\(port)"
    }
}

/// A complete response.
public struct HTTPEngineResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    public var version: HTTPVersionUsed
    /// The address the response came from.
    public var remoteAddress: String
}

/// TLS settings: trust anchors on top of the system roots.
public struct HTTPEngineTLS: Sendable {
    /// Extra trusted CA certificates (e.g. a test CA, or a private resolver's CA).
    public var additionalTrustRoots: [NIOSSLCertificate]

    public init(additionalTrustRoots: [NIOSSLCertificate] = []) {
        self.additionalTrustRoots = additionalTrustRoots
    }

    /// Loads PEM certificates from a file; throws a message naming the file when it holds none.
    public static func loadPEM(file path: String) throws -> [NIOSSLCertificate] {
        let certs: [NIOSSLCertificate]
        do {
            certs = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw HTTPEngineError(.invalidRequest, "could not read PEM certificates from \(path): \(error)")
        }
        guard !certs.isEmpty else {
            throw HTTPEngineError(.invalidRequest, "\(path) holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)")
        }
        return certs
    }
}

/// Sends HTTP requests to given addresses while speaking to the real hostname.
///
/// Thread-safe (`Sendable`); one instance is meant to be shared. This first version opens one
/// connection per request; pooling arrives with the full engine.
public final class HTTPEngine: Sendable {
    let group: any EventLoopGroup
    let sslContexts: [HTTPVersionPolicy: NIOSSLContext]
    let logger: Logger

    public init(eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, tls: HTTPEngineTLS = HTTPEngineTLS(), logger: Logger = Logger(label: "httpdns.engine")) throws {
        self.group = eventLoopGroup
        self.logger = logger
        var contexts: [HTTPVersionPolicy: NIOSSLContext] = [:]
        for policy in [HTTPVersionPolicy.automatic, .http1Only, .http2Only] {
            var config = TLSConfiguration.makeClientConfiguration()
            config.minimumTLSVersion = .tlsv12
            if !tls.additionalTrustRoots.isEmpty {
                config.additionalTrustRoots = [.certificates(tls.additionalTrustRoots)]
            }
            switch policy {
            case .automatic: config.applicationProtocols = ["h2", "http/1.1"]
            case .http1Only: config.applicationProtocols = ["http/1.1"]
            case .http2Only: config.applicationProtocols = ["h2"]
            }
            contexts[policy] = try NIOSSLContext(configuration: config)
        }
        self.sslContexts = contexts
    }

    /// Sends `request` to the first of `addresses` that accepts a connection (and a TLS handshake for
    /// https), and returns the whole response.
    ///
    /// - Parameters:
    ///   - addresses: where to connect, in order of preference. Each is tried in turn.
    ///   - timeout: for the whole exchange, connects included.
    ///   - maxResponseBytes: a larger body fails with `.responseTooLarge`.
    public func execute(
        _ request: HTTPEngineRequest,
        addresses: [SocketAddress],
        versions: HTTPVersionPolicy = .automatic,
        timeout: Duration,
        maxResponseBytes: Int = 1 << 20
    ) async throws -> HTTPEngineResponse {
        guard !addresses.isEmpty else { throw HTTPEngineError(.noAddresses, "no address to connect to for \(request.host)") }
        let deadline = NIODeadline.now() + .nanoseconds(timeout.nanoseconds)
        var attempts: [HTTPEngineError.Attempt] = []
        for address in addresses {
            let remaining = deadline - .now()
            if remaining <= .zero { break }
            let connection: HTTPConnection
            do {
                connection = try await HTTPConnection.connect(
                    to: address,
                    request: request,
                    sslContext: request.scheme == "https" ? sslContexts[versions] : nil,
                    group: group,
                    deadline: deadline
                )
            } catch let failure as HTTPConnection.SetupFailure {
                logger.debug("connect attempt failed", metadata: ["address": "\(address)", "stage": "\(failure.stage)"])
                attempts.append(.init(address: describe(address), stage: failure.stage, reason: failure.reason))
                continue
            }
            defer { connection.close() }
            return try await connection.execute(request, deadline: deadline, maxResponseBytes: maxResponseBytes)
        }
        if attempts.isEmpty {
            throw HTTPEngineError(.timeout, "timed out after \(timeout) before connecting to \(request.host)")
        }
        let timedOut = deadline - .now() <= .zero
        throw HTTPEngineError(
            timedOut ? .timeout : .connectFailed,
            timedOut ? "timed out connecting to \(request.host)" : "could not connect to \(request.host) at any address",
            attempts: attempts
        )
    }
}

func describe(_ address: SocketAddress) -> String {
    guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
    return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
}

extension SocketAddress {
    /// The socket address of an `IPAddress` and port.
    public init(_ ip: IPAddress, port: Int) throws {
        try self.init(ipAddress: ip.description, port: port)
    }
}
