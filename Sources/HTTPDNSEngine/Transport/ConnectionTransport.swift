// The stack the engine's connections go through: a build-time choice, one per platform
// (`PlatformTransport`), not a run-time one; each build links one stack:
//
//   Linux (and other platforms without a system TLS)   BSD sockets (NIOPosix) and BoringSSL (NIOSSL):
//                                                      `PosixTransport`, PosixTransport.swift.
//   Apple platforms                                    Network.framework (NIOTransportServices) and the
//                                                      system's TLS: `NetworkFrameworkTransport`,
//                                                      NetworkFrameworkTransport.swift.
//
// On Apple platforms only NIOTransportServices is linked, so an engine given an event loop group of
// another kind refuses it at the first connect, saying so; on Linux any NIOPosix group serves.
//
// Apple asks apps not to use BSD sockets: they do not bring up the cellular radio or VPN On Demand and
// ignore the per-app VPN, Low Data Mode and the rules on expensive networks (TN3151). The rest of the
// engine (pool, exchanges, HTTP/2, redirects, retries) is the same on both and never asks which it runs
// on. What both transports share, so that they behave alike: the addresses come from our resolver in
// our ranked order and are raced by happy eyeballs (NIO's connector on Linux, `HappyEyeballsRace` on
// Apple platforms); SNI and the certificate check are on the hostname, never the IP; a certificate
// failure is classified as untrusted, name mismatch or pin alike (`SystemTrustVerdict` turns the
// Security framework's status into the codes BoringSSL's verdict gets); pins are read from the
// certificate's DER (`PublicKeyPin`); the pipeline after the handshake is the same.

import HTTPDNSCore
import NIOCore

#if canImport(Network)
    import NIOTransportServices
#endif

/// Which stack carries connections.
package enum ConnectionTransportKind: String, Sendable, Equatable {
    /// BSD sockets through NIOPosix, TLS by BoringSSL through NIOSSL.
    case posixBoringSSL = "BSD sockets + BoringSSL"
    /// Network.framework through NIOTransportServices, TLS by the system.
    case networkFramework = "Network.framework + system TLS"
}

/// What a transport does for the engine: open a connection (TCP, TLS, then the HTTP handlers ALPN chose)
/// to addresses already resolved and ranked, and a plain TCP connection for a CONNECT tunnel.
protocol ConnectionTransport: Sendable {
    /// Which stack this is.
    static var kind: ConnectionTransportKind { get }

    /// Made once per engine; throws when the configured trust roots cannot be used.
    init(configuration: HTTPEngine.Configuration) throws

    /// One connection to `url`'s host: at `addresses` (raced), or, given none, to an IP-literal host as
    /// it is; through `via`'s proxy by a tunnel to its target when given. Throws `HTTPEngineError`.
    func attempt(
        url: HTTPURL,
        addresses: ResolvedAddresses?,
        lookup: AddressLookup,
        settings: Connection.Settings,
        on eventLoop: any EventLoop,
        via: (proxy: HTTPProxy, target: String)?
    ) async throws -> Connection

    /// A plain TCP connection to `host:port` at `addresses` (raced) for a CONNECT tunnel, with a
    /// half-close from the target passed on. Throws `HTTPEngineError`.
    func tunnel(
        host: String,
        port: Int,
        addresses: ResolvedAddresses?,
        access: NetworkAccess,
        on loop: any EventLoop,
        timeout: Duration
    ) async throws -> any Channel

    /// Whether a TLS setup that failed with `underlying` may succeed if tried again (the peer vanished
    /// mid-handshake) rather than fail the same way (an alert, a verdict on the certificate).
    static func tlsRetryMayHelp(_ underlying: (any Error)?) -> Bool

    /// The engine's error for a TLS failure this stack reported (nil: not one of its errors), its code
    /// from the error's value; `chainRejected`: the stack's verdict on the chain was a rejection.
    /// The event loops this transport's channels run on, shared by the process (NIO's singletons).
    static var defaultEventLoopGroup: any EventLoopGroup { get }

    static func describeTLSError(_ error: any Error, host: String, address: String, chainRejected: Bool)
        -> HTTPEngineError?
}

/// The transport this build has: Network.framework on Apple platforms, BSD sockets elsewhere.
#if canImport(Network)
    typealias PlatformTransport = NetworkFrameworkTransport
#else
    typealias PlatformTransport = PosixTransport
#endif

extension HTTPEngine {
    /// The stack every engine's connections go through in this build.
    package static var transportKind: ConnectionTransportKind { PlatformTransport.kind }

    /// The event loops engines, the proxy and their connections run on unless told otherwise: NIO's
    /// shared `MultiThreadedEventLoopGroup` on Linux, its shared `NIOTSEventLoopGroup` on Apple platforms
    /// (Network.framework's channels run on those alone).
    package static var defaultEventLoopGroup: any EventLoopGroup { PlatformTransport.defaultEventLoopGroup }
}
