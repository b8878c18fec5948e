import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionConfiguration {
    /// Puts `HTTPDNSURLProtocol` first in `protocolClasses`, so the session's http(s) requests for
    /// hosts the installed setup selects go through HTTPDNS. Safe to call more than once, and on a
    /// configuration a third-party stack built (before it makes its session). A configuration with a
    /// proxy of its own (`connectionProxyDictionary`) is left as it is: its requests go through that
    /// proxy, as the system sends them (see SystemProxy.swift).
    ///
    /// The class put first is one of the protocol's per-configuration classes (ConfigurationSlots.swift),
    /// so the session's loads find this configuration's settings. A background configuration is left
    /// as it is, and that is logged: its tasks run outside the app, where no URLProtocol runs.
    package func enableHTTPDNS() {
        guard !SystemProxy.configured(in: self) else { return }
        if let reason = HandBack.reason(configurationIdentifier: identifier) {
            HTTPDNSURLProtocol.current?.logger.notice("HTTPDNS not enabled on a session configuration: \(reason)")
            return
        }
        var classes = protocolClasses ?? []
        classes.removeAll { $0 is HTTPDNSURLProtocol.Type }
        let mine: HTTPDNSURLProtocol.Type
        if let slot = ConfigurationSlots.shared.protocolClass(for: self) {
            mine = slot
        } else {
            mine = HTTPDNSURLProtocol.self
            #if canImport(Darwin)
                // (corelibs shows a load its session: nothing is lost there.)
                HTTPDNSURLProtocol.current?.logger.notice(
                    "HTTPDNS enabled on a session configuration without its own settings: \(HTTPDNSURLProtocol.slotCount) configurations already have theirs; its sessions use the shared storages"
                )
            #endif
        }
        classes.insert(mine, at: 0)
        protocolClasses = classes
    }

    /// Takes HTTPDNS's protocol out of `protocolClasses` again: for a configuration that goes through
    /// the loopback proxy instead (`HTTPDNS.configure(_:via: .proxy)`), where the proxy, not the
    /// URLProtocol, must see its requests.
    package func disableHTTPDNS() {
        protocolClasses?.removeAll { $0 is HTTPDNSURLProtocol.Type }
    }

    /// A copy of `self` with HTTPDNS enabled.
    package func withHTTPDNS() -> URLSessionConfiguration {
        let copy = self.copy() as! URLSessionConfiguration
        copy.enableHTTPDNS()
        return copy
    }
}

extension HTTPDNSURLProtocol {
    /// Registers the protocol process-wide, for sessions whose configuration was never given to
    /// `enableHTTPDNS()` (`URLSession.shared` included). On Apple platforms a registered class is asked
    /// before the built-in ones. On swift-corelibs-foundation registered classes come after the
    /// built-in http(s) protocol, which registers itself with the first URLSession made: call this
    /// before creating any session, or it never sees an http(s) request there.
    package static func registerGlobally() {
        _ = URLProtocol.registerClass(HTTPDNSURLProtocol.self)
    }
}
