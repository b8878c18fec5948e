// The `.proxy` route: a system client (URLSession through `proxyConfigurations`, web views, players)
// sends its requests through the loopback proxy, which resolves through HTTPDNS and tunnels. The URLProtocol
// route is HTTPDNSKit's own (`enable(on:)`); the system's encrypted DNS is HTTPDNSKit's too
// (`enableSystemEncryptedDNS(_:)`). The DocC article "Choosing a route" compares them.
//
// A module an app opts into (the product HTTPDNSLoopbackProxy): an app that links HTTPDNSKit alone
// carries none of the proxy. Its state per HTTPDNS instance, the keeper of the one loopback proxy, is an
// attachment of the instance (HTTPDNS+Attachments.swift in HTTPDNSKit), which follows the app's
// background and foreground and ends at `shutdown()`.

import Foundation
import HTTPDNSCore
import HTTPDNSKit
import HTTPDNSURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(WebKit)
    import WebKit
#endif

/// How a system client's requests reach HTTPDNS.
public enum HTTPDNSRoute: Sendable, Hashable {
    /// HTTPDNS's URLProtocol loads the requests its policy selects, with its own engine (connection to
    /// the chosen address, TLS on the name). URLSession only; not background sessions.
    case urlProtocol
    /// The client sends every request through the loopback proxy (`HTTPDNS.loopbackProxy()`), which
    /// resolves through HTTPDNS and tunnels: the client's own TLS, HTTP/2, cookies and caching are left
    /// untouched. Through `proxyConfigurations`, iOS 17 / macOS 14 and later.
    case proxy
}

extension HTTPDNS {
    /// Sends the requests of sessions made from `configuration` into HTTPDNS by `route`.
    ///
    /// - `.urlProtocol`: as `enable(on:)`.
    /// - `.proxy`: sets the configuration's `proxyConfigurations` to an HTTP CONNECT proxy at the
    ///   loopback proxy, started first if it is not running. iOS 17 / macOS 14 / tvOS 17 / watchOS 10 and
    ///   later; earlier systems throw `.unavailableOnPlatform` (use `.urlProtocol` there), and so does
    ///   Linux, whose URLSession has no proxy configurations.
    ///
    /// One route per configuration: `.proxy` takes HTTPDNS's URLProtocol out of it, and a configuration
    /// with a proxy of its own (`.proxy`'s included) is left alone by `.urlProtocol`, by
    /// `enable(on:)` and by `enableForAllSessions()`.
    ///
    /// A session copies its configuration when it is made: configure first, then make the session. If
    /// the proxy ever has to move to another port (``onLoopbackProxyMoved(_:)``), sessions made before
    /// the move must be made again.
    ///
    /// - Parameters:
    ///   - configuration: The configuration to change, in place.
    ///   - route: The way its sessions' requests reach HTTPDNS.
    /// - Throws: `HTTPDNSConfigurationError` with code `.unavailableOnPlatform` for `.proxy` where proxy
    ///   configurations are missing; for `.proxy`, also what ``loopbackProxy()`` throws.
    public func configure(_ configuration: URLSessionConfiguration, via route: HTTPDNSRoute) async throws {
        switch route {
        case .urlProtocol:
            enable(on: configuration)
        case .proxy:
            #if canImport(Network) && canImport(ObjectiveC)
                guard #available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *) else {
                    throw ProxyConfigurations.unavailable
                }
                let proxy = try await loopbackProxy()
                try ProxyConfigurations.install(on: configuration, port: proxy.port, policy: self.configuration.policy)
                // One route per configuration: the URLProtocol, if an earlier call put it there, goes.
                configuration.disableHTTPDNS()
            #else
                throw ProxyConfigurations.unavailable
            #endif
        }
    }

    /// The loopback proxy the `.proxy` route points clients at: one per instance, on `127.0.0.1`,
    /// started on first use. Its port stays the same for the instance's life: a proxy whose listener
    /// the system took back while the app was suspended starts again on that port when the app returns
    /// to the foreground (or at the next call). Point other clients at it too (players, `proxy.pacURL`).
    /// `shutdown()` stops it.
    ///
    /// - Returns: The running proxy.
    /// - Throws: The error of starting it when it cannot listen (as ``startProxy(_:)``), or an error saying the
    ///   instance was shut down once `shutdown()` has been called.
    public func loopbackProxy() async throws -> HTTPDNSProxy {
        try await proxyKeeper().proxy()
    }

    /// Calls `handler` when the loopback proxy had to move to another port (its own was taken when it
    /// started again): configurations installed before name the old port. Web views' data stores
    /// configured through ``configure(_:via:)`` are pointed at the new port already; sessions made
    /// from configured URLSession configurations must be made again.
    ///
    /// - Parameter handler: Called with the old port and the new one, on no particular thread; it is added to
    ///   the handlers set before.
    public func onLoopbackProxyMoved(_ handler: @escaping @Sendable (_ from: Int, _ to: Int) -> Void) {
        // After shutdown there is no proxy to move: the handler would never be called.
        try? proxyKeeper().onMove(handler)
    }

    /// Starts a loopback proxy of its own for clients that only take a proxy setting (web views, players,
    /// other processes), beside the one ``loopbackProxy()`` keeps. Stop it with its `stop()`.
    ///
    /// - Parameter configuration: Where to listen and who may connect.
    /// - Returns: The running proxy.
    /// - Throws: `HTTPDNSConfigurationError` with code `.invalidProxyConfiguration` for a listen address that is
    ///   not an IP, or one off loopback without `allowNonLoopback` and credentials; the socket's error when the
    ///   address cannot be listened on.
    public func startProxy(_ configuration: HTTPDNSProxy.Configuration = .init()) async throws -> HTTPDNSProxy {
        var configuration = configuration
        configuration.upgradeToHTTPS = upgradeToHTTPS
        return try await HTTPDNSProxy.start(configuration, resolver: resolver, engine: engine, logger: logger)
    }

    /// This instance's keeper of the loopback proxy, made on first use; it throws once the instance
    /// was shut down.
    func proxyKeeper() throws -> ProxyKeeper {
        let made = attachment(ProxyKeeper.self) { [resolver, engine, logger, upgradeToHTTPS] in
            ProxyKeeper(logger: logger) { port in
                var proxy = HTTPDNSProxy.Configuration()
                proxy.port = port
                proxy.upgradeToHTTPS = upgradeToHTTPS
                return try await HTTPDNSProxy.start(proxy, resolver: resolver, engine: engine, logger: logger)
            }
        }
        guard let made else { throw ProxyKeeperError.shutDown }
        return made
    }
}

#if canImport(WebKit) && canImport(Network)
    extension HTTPDNS {
        /// Sends the requests of every web view using `dataStore` through the loopback proxy, started
        /// first if it is not running (`.proxy`; iOS 17 / macOS 14 and later: earlier systems throw
        /// `.unavailableOnPlatform`). Web views load out of the app's process, where no URLProtocol
        /// runs: `.urlProtocol` throws `.unavailableOnPlatform`. If the proxy moves to another port, the
        /// store is pointed at the new one.
        ///
        /// COMPILED FOR iOS 16 BY THE APPLE CHECK, NEVER RUN HERE.
        ///
        /// - Parameters:
        ///   - dataStore: The data store whose web views' requests go through the proxy.
        ///   - route: The way those requests reach HTTPDNS: only `.proxy` is possible.
        /// - Throws: `HTTPDNSConfigurationError` with code `.unavailableOnPlatform` for `.urlProtocol` and
        ///   before iOS 17 / macOS 14; also what ``loopbackProxy()`` throws.
        @MainActor
        public func configure(_ dataStore: WKWebsiteDataStore, via route: HTTPDNSRoute) async throws {
            guard route == .proxy else {
                throw HTTPDNSConfigurationError(
                    .unavailableOnPlatform,
                    "web views load in another process, where no URLProtocol runs: configure their data store with .proxy"
                )
            }
            guard #available(iOS 17.0, macOS 14.0, *) else { throw ProxyConfigurations.unavailable }
            let proxy = try await loopbackProxy()
            let policy = configuration.policy
            try ProxyConfigurations.install(on: dataStore, port: proxy.port, policy: policy)
            let kept = WeakDataStore(dataStore)
            // One handler per store: configuring it again replaces it.
            try proxyKeeper().onMove(for: ObjectIdentifier(dataStore)) { _, to in
                Task { @MainActor in
                    guard let dataStore = kept.store else { return }
                    try? ProxyConfigurations.install(on: dataStore, port: to, policy: policy)
                }
            }
        }
    }

    /// A data store configured for the proxy, not kept alive by it (the main actor's, so Sendable).
    @MainActor final class WeakDataStore {
        weak var store: WKWebsiteDataStore?
        init(_ store: WKWebsiteDataStore) { self.store = store }
    }
#endif
