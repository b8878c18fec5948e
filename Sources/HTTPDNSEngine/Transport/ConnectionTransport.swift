// The stack the engine's connections go through, chosen at run time from the engine's event loop group
// (as AsyncHTTPClient chooses it, HTTPConnectionPool+Factory.swift), among the stacks this build has:
//
//   Linux (and other platforms without a system TLS)   BSD sockets (NIOPosix) and BoringSSL (NIOSSL):
//                                                      `PosixTransport`, PosixTransport.swift.
//   Apple platforms                                    Network.framework (NIOTransportServices) and the
//                                                      system's TLS: `NetworkFrameworkTransport`,
//                                                      NetworkFrameworkTransport.swift.
//
// A `NIOTSEventLoopGroup` (the default on Apple platforms) means Network.framework; any other group means
// BSD sockets, where this build has them (Linux; on Apple platforms only NIOTransportServices is linked,
// so there a group of another kind is refused at the first connect, saying so). `TransportChoice` is the
// rule, tested on Linux.
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

/// Which transport carries an engine's connections: decided at run time from its event loop group.
package enum TransportChoice {
    /// The transports this build has, the platform's own first.
    static var compiled: [any ConnectionTransport.Type] {
        #if canImport(Network)
            return [NetworkFrameworkTransport.self]
        #else
            return [PosixTransport.self]
        #endif
    }

    /// The transport for connections on `group`: Network.framework for a group whose loops can run its
    /// channels (NIOTransportServices'), otherwise BSD sockets where this build has them; else the
    /// platform's own, which then refuses the group at the first connect with an error saying so.
    package static func kind(for group: any EventLoopGroup) -> ConnectionTransportKind {
        transport(for: group).kind
    }

    static func transport(for group: any EventLoopGroup) -> any ConnectionTransport.Type {
        #if canImport(Network)
            if NIOTSConnectionBootstrap(validatingGroup: group) != nil { return NetworkFrameworkTransport.self }
        #endif
        return compiled.first { $0.kind == .posixBoringSSL } ?? compiled[0]
    }

    /// The engine's error for a TLS failure, from whichever transport's error it is.
    static func describeTLSError(_ error: any Error, host: String, address: String, chainRejected: Bool)
        -> HTTPEngineError?
    {
        for transport in compiled {
            if let described = transport.describeTLSError(
                error,
                host: host,
                address: address,
                chainRejected: chainRejected
            ) {
                return described
            }
        }
        return nil
    }

    /// Whether a failed TLS setup may succeed if tried again: no transport calls its error final.
    static func tlsRetryMayHelp(_ underlying: (any Error)?) -> Bool {
        compiled.allSatisfy { $0.tlsRetryMayHelp(underlying) }
    }
}

extension HTTPEngine {
    /// The stack connections on the default event loop group go through.
    package static var transportKind: ConnectionTransportKind { TransportChoice.kind(for: defaultEventLoopGroup) }

    /// The event loops engines, the proxy and their connections run on unless told otherwise: NIO's
    /// shared `MultiThreadedEventLoopGroup` on Linux, its shared `NIOTSEventLoopGroup` on Apple platforms
    /// (Network.framework's channels run on those alone).
    package static var defaultEventLoopGroup: any EventLoopGroup { TransportChoice.compiled[0].defaultEventLoopGroup }

    /// The stack this engine's connections go through (chosen from its event loop group).
    package var transportKind: ConnectionTransportKind { TransportChoice.kind(for: group) }
}
