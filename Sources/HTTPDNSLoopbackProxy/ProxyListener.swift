// The proxy's listening socket, on the stack the engine's connections use (HTTPEngine.transportKind):
// NIOPosix's ServerBootstrap on Linux; NIOTransportServices' listener on Apple platforms, so that the
// accepted channels run on the same Network.framework event loops as the tunnels opened for them. The
// Apple branch is COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.

import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSListener
import NIOCore

#if canImport(Network)
    import NIOTransportServices
#else
    import NIOPosix
#endif

enum ProxyListener {
    /// Listens on `host:port`; `child` sets up each accepted connection, admitted by `connections`
    /// (which counts accepted connections on the listener too, on Linux). Throws when the address cannot
    /// be bound.
    static func bind(
        host: String,
        port: Int,
        group: any EventLoopGroup,
        connections: ConnectionLimiter,
        child: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> any Channel {
        #if canImport(Network)
            guard let bootstrap = NIOTSListenerBootstrap(validatingGroup: group) else {
                throw HTTPDNSConfigurationError(
                    .invalidProxyConfiguration,
                    "on Apple platforms the proxy listens through Network.framework and needs a NIOTSEventLoopGroup; leave the event loop group at its default"
                )
            }
            return
                try await bootstrap
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .childChannelInitializer(child)
                .bind(host: host, port: port).get()
        #else
            // Out of descriptors (EMFILE), accept fails and keeps failing: pause instead of spinning.
            return try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 512)
                .pausingAccepts(countingFor: connections)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .childChannelInitializer(child)
                .bind(host: host, port: port).get()
        #endif
    }
}
