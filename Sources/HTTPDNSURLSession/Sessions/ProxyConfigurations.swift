// iOS 17's proxy configurations, reached through the Objective-C runtime (the iOS 16 SDKs the package
// still builds with lack them). One owner of the property for the proxy route (HTTPDNSKit) and for the
// URLProtocol's rule that a configuration with a proxy of its own is left to it (SystemProxy.swift).

import Foundation
import HTTPDNSCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Network)
    import Network
#endif

/// iOS 17's `proxyConfigurations` (on a `URLSessionConfiguration` or a `WKWebsiteDataStore`): set to the
/// loopback proxy by `HTTPDNS.configure(_:via: .proxy)`, and read by `SystemProxy.configured(in:)`.
package enum ProxyConfigurations {
    package static let unavailable = HTTPDNSConfigurationError(
        .unavailableOnPlatform,
        "proxy configurations need iOS 17, macOS 14, tvOS 17 or watchOS 10 (and Apple's URLSession): use the .urlProtocol route here"
    )

    #if canImport(Network) && canImport(ObjectiveC)
        /// Sets `object`'s `proxyConfigurations` (a `URLSessionConfiguration` or a `WKWebsiteDataStore`)
        /// to one HTTP CONNECT proxy at `127.0.0.1:port`.
        ///
        /// COMPILED FOR iOS 16 BY THE APPLE CHECK, NEVER RUN HERE. The property and
        /// `nw_proxy_config_create_http_connect` are iOS 17 API, absent from the iOS 16 SDKs this package
        /// still builds with, so they are reached through the Objective-C runtime: the property by its
        /// name (key-value coding calls its setter), the function by its symbol. Both are public API,
        /// looked up only behind the iOS 17 availability check; a missing one throws instead of crashing.
        @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
        ///
        /// The configuration allows failover (when the loopback listener is gone, say in a background
        /// task before the app returns to the foreground, requests go direct instead of failing), and
        /// names the hosts `policy` selects as its match domains, so the others never go through it.
        package static func install(on object: NSObject, port: Int, policy: HostPolicy = .all) throws {
            guard object.responds(to: NSSelectorFromString("setProxyConfigurations:")) else { throw unavailable }
            let proxy = try httpConnectProxy(port: port)
            try call("nw_proxy_config_set_failover_allowed", on: proxy, flag: true)
            let domains = policy.proxyDomains
            for domain in domains.match { try call("nw_proxy_config_add_match_domain", on: proxy, text: domain) }
            for domain in domains.excluded { try call("nw_proxy_config_add_excluded_domain", on: proxy, text: domain) }
            object.setValue([proxy] as NSArray, forKey: key)
        }

        /// Calls `void name(nw_proxy_config_t, bool)`, found by its symbol (iOS 17 API).
        private static func call(_ name: String, on proxy: AnyObject, flag: Bool) throws {
            typealias Set = @convention(c) (UnsafeMutableRawPointer, Bool) -> Void
            let function = unsafeBitCast(try symbol(name), to: Set.self)
            withExtendedLifetime(proxy) { function(Unmanaged.passUnretained(proxy).toOpaque(), flag) }
        }

        /// Calls `void name(nw_proxy_config_t, const char *)`, found by its symbol (iOS 17 API).
        private static func call(_ name: String, on proxy: AnyObject, text: String) throws {
            typealias Add = @convention(c) (UnsafeMutableRawPointer, UnsafePointer<CChar>) -> Void
            let function = unsafeBitCast(try symbol(name), to: Add.self)
            withExtendedLifetime(proxy) {
                text.withCString { function(Unmanaged.passUnretained(proxy).toOpaque(), $0) }
            }
        }

        private static func symbol(_ name: String) throws -> UnsafeMutableRawPointer {
            // RTLD_DEFAULT, a C macro Swift does not import: ((void *)-2) on Apple platforms.
            guard let found = dlsym(UnsafeMutableRawPointer(bitPattern: -2), name) else { throw unavailable }
            return found
        }

        /// Whether `object` has proxy configurations set.
        @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
        static func areSet(on object: NSObject) -> Bool {
            guard object.responds(to: NSSelectorFromString(key)) else { return false }
            return (object.value(forKey: key) as? NSArray).map { $0.count > 0 } ?? false
        }

        private static let key = "proxyConfigurations"

        /// `nw_proxy_config_create_http_connect(nw_endpoint_create_host("127.0.0.1", port), NULL)`.
        @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
        private static func httpConnectProxy(port: Int) throws -> AnyObject {
            typealias Create =
                @convention(c) (UnsafeMutableRawPointer, UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer?
            let create = unsafeBitCast(try symbol("nw_proxy_config_create_http_connect"), to: Create.self)
            let endpoint = nw_endpoint_create_host("127.0.0.1", String(port))
            let made = withExtendedLifetime(endpoint) {
                create(Unmanaged.passUnretained(endpoint as AnyObject).toOpaque(), nil)
            }
            guard let made else { throw unavailable }
            // NW_RETURNS_RETAINED: the object is ours to release.
            return Unmanaged<AnyObject>.fromOpaque(made).takeRetainedValue()
        }
    #endif
}
