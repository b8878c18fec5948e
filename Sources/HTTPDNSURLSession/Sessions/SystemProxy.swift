// Whether the system would send a request through a proxy, for `HTTPDNSURLProtocol.canInit`: when it
// would, and the app gave HTTPDNS no proxy of its own (`HTTPDNS.Configuration.network.proxy`), the protocol
// leaves the request to the system (docs/CLI.md, "Proxies"). A proxy the user or the company
// set is there on purpose (policy, a debugging proxy); the proxy, not the device, connects to the
// origin; and a PAC file may choose per URL. Intercepting would bypass all of that.
//
// Apple platforms: the system's settings and PAC, through CFNetwork (compiled, not run, here: the
// Linux tests prove the rule with curl's variables). swift-corelibs-foundation: its URLSession is
// libcurl, which takes curl's variables, so they are what is read.

import Foundation
import HTTPDNSEngine

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(CFNetwork)
    import CFNetwork
#endif

enum SystemProxy {
    /// True when the system would send a request for `url` through a proxy.
    static func applies(to url: URL) -> Bool {
        #if canImport(CFNetwork) && canImport(Darwin)
            // Compiled, not run: CFNetwork exists on Apple platforms only.
            guard let settings = CFNetworkCopySystemProxySettings()?.takeRetainedValue() else { return false }
            let proxies = CFNetworkCopyProxiesForURL(url as CFURL, settings).takeRetainedValue() as? [[String: Any]]
            let none = kCFProxyTypeNone as String
            return (proxies ?? []).contains { ($0[kCFProxyTypeKey as String] as? String).map { $0 != none } ?? false }
        #else
            guard let scheme = url.scheme?.lowercased(), let host = url.host, let settings = environment else {
                return false
            }
            return settings.proxy(scheme: scheme, host: host) != nil
        #endif
    }

    /// curl's variables, read once: libcurl reads them as each transfer starts, but a process does
    /// not change its own environment while it runs, and this is asked for every request.
    private static let environment: HTTPProxySettings? = (try? HTTPProxySettings.environment()) ?? nil

    /// True when a session configuration names a proxy of its own: `connectionProxyDictionary`, or
    /// iOS 17's `proxyConfigurations` (which `HTTPDNS.configure(_:via: .proxy)` sets to the loopback
    /// proxy: its requests are the proxy's, never the URLProtocol's).
    static func configured(in configuration: URLSessionConfiguration) -> Bool {
        if let dictionary = configuration.connectionProxyDictionary, !dictionary.isEmpty { return true }
        #if canImport(Network) && canImport(ObjectiveC)
            // Compiled, not run: the property is read through the Objective-C runtime (ProxyConfigurations).
            if #available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *),
                ProxyConfigurations.areSet(on: configuration)
            {
                return true
            }
        #endif
        return false
    }
}
