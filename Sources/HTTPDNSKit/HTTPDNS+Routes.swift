// The routes a request can take into HTTPDNS from a system client: the URLProtocol (`.urlProtocol`), or
// a proxy configuration pointing the client at the loopback proxy (`.proxy`, iOS 17 / macOS 14). The
// third route, the system's encrypted DNS, is HTTPDNS+SystemEncryptedDNS.swift. The DocC article
// "Choosing a route" compares them.

import Foundation
import HTTPDNSURLSession
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(WebKit)
    import WebKit
#endif
#if canImport(UIKit)
    import UIKit
#endif

/// How a system client's requests reach HTTPDNS.
public enum HTTPDNSRoute: Sendable, Hashable {
    /// HTTPDNS's URLProtocol loads the requests its policy selects, with its own engine (connection to
    /// the chosen address, TLS on the name). URLSession only; not background sessions.
    case urlProtocol
    /// The client sends every request through the loopback proxy (``HTTPDNS/loopbackProxy()``), which
    /// resolves through HTTPDNS and tunnels: the client's own TLS, HTTP/2, cookies and caching are left
    /// untouched. Through `proxyConfigurations`, iOS 17 / macOS 14 and later.
    case proxy
}

extension HTTPDNS {
    /// Sends the requests of sessions made from `configuration` into HTTPDNS by `route`.
    ///
    /// - `.urlProtocol`: as ``enable(on:)``.
    /// - `.proxy`: sets the configuration's `proxyConfigurations` to an HTTP CONNECT proxy at the
    ///   loopback proxy, started first if it is not running. iOS 17 / macOS 14 / tvOS 17 / watchOS 10 and
    ///   later; earlier systems throw `.unavailableOnPlatform` (use `.urlProtocol` there), and so does
    ///   Linux, whose URLSession has no proxy configurations.
    ///
    /// One route per configuration: `.proxy` takes HTTPDNS's URLProtocol out of it, and a configuration
    /// with a proxy of its own (`.proxy`'s included) is left alone by `.urlProtocol`, by
    /// ``enable(on:)`` and by `enableForAllSessions()`.
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
    /// ``shutdown()`` stops it.
    ///
    /// - Returns: The running proxy.
    /// - Throws: The error of starting it when it cannot listen (as ``startProxy(_:)``), or an error saying the
    ///   instance was shut down once ``shutdown()`` has been called.
    public func loopbackProxy() async throws -> HTTPDNSProxy {
        observeAppLifecycle()
        return try await proxyKeeper.proxy()
    }

    /// Calls `handler` when the loopback proxy had to move to another port (its own was taken when it
    /// started again): configurations installed before name the old port. Web views' data stores
    /// configured through ``configure(_:via:)`` are pointed at the new port already; sessions made
    /// from configured URLSession configurations must be made again.
    ///
    /// - Parameter handler: Called with the old port and the new one, on no particular thread; it is added to
    ///   the handlers set before.
    public func onLoopbackProxyMoved(_ handler: @escaping @Sendable (_ from: Int, _ to: Int) -> Void) {
        proxyKeeper.onMove(handler)
    }

    /// Tells HTTPDNS the app went to the background. On UIKit platforms HTTPDNS observes this itself.
    public func applicationDidEnterBackground() {
        proxyKeeper.enteredBackground()
    }

    /// Tells HTTPDNS the app came back to the foreground: the loopback proxy starts again if the system
    /// took its listener, and the system encrypted-DNS mode checks its server. On UIKit platforms HTTPDNS
    /// observes this itself.
    public func applicationWillEnterForeground() async {
        encryptedDNS.withLockedValue { $0 }?.conditionsChanged()
        await proxyKeeper.enteredForeground()
    }

    /// On UIKit platforms, starts following the app's background and foreground notices (once).
    func observeAppLifecycle() {
        #if canImport(UIKit) && !os(watchOS)
            // COMPILED FOR iOS 16 BY THE APPLE CHECK, NEVER RUN HERE; what the notices trigger is what
            // the Linux tests call directly (applicationDidEnterBackground / WillEnterForeground).
            guard appLifecycleObservers.withLockedValue({ $0.tokens.isEmpty }) else { return }
            let center = NotificationCenter.default
            let background = center.addObserver(
                forName: UIApplication.didEnterBackgroundNotification,
                object: nil,
                queue: nil
            ) { [weak self] _ in self?.applicationDidEnterBackground() }
            let foreground = center.addObserver(
                forName: UIApplication.willEnterForegroundNotification,
                object: nil,
                queue: nil
            ) { [weak self] _ in
                guard let self else { return }
                Task { await self.applicationWillEnterForeground() }
            }
            // Two first uses at once: the one that stores its observers first keeps them.
            let kept = appLifecycleObservers.withLockedValue { observers -> Bool in
                guard observers.tokens.isEmpty else { return false }
                observers.tokens = [background, foreground]
                return true
            }
            if !kept {
                center.removeObserver(background)
                center.removeObserver(foreground)
            }
        #endif
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
            proxyKeeper.onMove(for: ObjectIdentifier(dataStore)) { _, to in
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

/// The notification observers `observeAppLifecycle()` added (tokens NotificationCenter lets any thread
/// remove).
struct AppLifecycleObservers: @unchecked Sendable {
    var tokens: [any NSObjectProtocol] = []
}
