// Which requests the protocol leaves to the system's own URL loading, and why: the ones it cannot
// serve the way the system would. Each reason is logged when a request is handed back. Pure rules,
// tested on Linux; the callers (`canInit`, `enableHTTPDNS`) only gather the facts.

import Foundation
import HTTPDNSEngine

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

enum HandBack {
    /// Why a request with these properties goes to the system's loading, or nil to serve it.
    /// - `cachePolicy`: `.returnCacheDataDontLoad` never touches the network, so there is nothing to
    ///   resolve: the system answers it from the session's cache, or fails it as offline, as it would.
    /// - network rules: a request that forbids cellular, expensive or constrained networks, where the
    ///   system honours that and our transport could not.
    /// - `cleartextForbidden`: an http:// load that App Transport Security forbids (TransportSecurity.swift):
    ///   the system refuses it, as the app expects; it must not go out in the clear through us.
    /// - `systemTLS`: why the system's own TLS must serve an https load (pins in `NSPinnedDomains`, TLS
    ///   relaxed by an ATS exception).
    /// - `waitsWhileOffline`: the session waits for connectivity (`waitsForConnectivity`) and there is
    ///   no network now: the system waits, and tells the delegate, as a URLProtocol cannot.
    static func reason(
        cachePolicy: URLRequest.CachePolicy,
        forbidsSomeNetworks: Bool,
        transportHonoursNetworkRules: Bool,
        systemHonoursNetworkRules: Bool,
        cleartextForbidden: Bool = false,
        systemTLS: String? = nil,
        waitsWhileOffline: Bool = false
    ) -> String? {
        if cleartextForbidden {
            return "App Transport Security forbids cleartext HTTP to this host: the system refuses it as it would"
        }
        if let systemTLS { return systemTLS }
        if waitsWhileOffline {
            return "its session waits for connectivity and there is no network: the system waits and tells the delegate"
        }
        if cachePolicy == .returnCacheDataDontLoad {
            return "its cache policy is returnCacheDataDontLoad: the system answers it from the session's cache"
        }
        if forbidsSomeNetworks, systemHonoursNetworkRules, !transportHonoursNetworkRules {
            return
                "it forbids some networks (cellular, expensive or constrained), which this transport cannot tell apart"
        }
        return nil
    }

    /// Why a session configuration is left without HTTPDNS, or nil to enable it: a background
    /// session's tasks run in another process, which a URLProtocol cannot serve; on watchOS an ordinary
    /// app may not use Network.framework (TN3135: only audio streaming and VoIP apps may), which every
    /// HTTPDNS connection goes through, so the system's loading keeps its sessions.
    static func reason(
        configurationIdentifier: String?,
        lowLevelNetworking: Bool = lowLevelNetworkingAllowed
    ) -> String? {
        guard lowLevelNetworking else { return Self.noLowLevelNetworking }
        guard let identifier = configurationIdentifier else { return nil }
        return "background session \"\(identifier)\": its tasks run outside the app, where no URLProtocol runs"
    }

    static let noLowLevelNetworking =
        "watchOS: an ordinary watch app may not use Network.framework (TN3135), which HTTPDNS connects through: the system's loading serves it"

    /// Whether the app may open connections itself: not on watchOS, where Network.framework is for
    /// audio streaming and VoIP apps only (TN3135).
    static var lowLevelNetworkingAllowed: Bool {
        #if os(watchOS)
            return false
        #else
            return true
        #endif
    }

    /// Whether the engine's transport applies a request's network rules: Network.framework does
    /// (NWParameters); BSD sockets cannot tell a cellular interface from another.
    static var transportHonoursNetworkRules: Bool { HTTPEngine.transportKind == .networkFramework }

    /// Whether the system's own loading applies them: Apple's does; libcurl (corelibs) ignores them.
    static var systemHonoursNetworkRules: Bool {
        #if canImport(Darwin)
            return true
        #else
            return false
        #endif
    }
}
