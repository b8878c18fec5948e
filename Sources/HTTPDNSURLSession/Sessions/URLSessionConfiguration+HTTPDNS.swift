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
    /// On Apple platforms the class put first is this configuration's own (ConfigurationSlots.swift), so
    /// the session's loads find a copy of its settings, taken as URLSession takes its own; enable a
    /// configuration again after changing it, before making another session from it. A background configuration is left
    /// as it is, and that is logged: its tasks run outside the app, where no URLProtocol runs.
    package func enableHTTPDNS() {
        guard !SystemProxy.configured(in: self) else { return }
        if let reason = HandBack.reason(configurationIdentifier: identifier) {
            HTTPDNSURLProtocol.current?.logger.notice("HTTPDNS not enabled on a session configuration: \(reason)")
            return
        }
        var classes = protocolClasses ?? []
        classes.removeAll { $0 is HTTPDNSURLProtocol.Type }
        var mine: AnyClass = HTTPDNSURLProtocol.self
        #if canImport(ObjectiveC)
            // (corelibs shows a load its session: the base class loses nothing there.)
            if let slotClass = ConfigurationSlots.shared.protocolClass(for: self) {
                mine = slotClass
            } else {
                HTTPDNSURLProtocol.current?.logger.warning(
                    "HTTPDNS enabled on a session configuration without its own settings: the runtime made no class for it; its sessions use the shared storages"
                )
            }
            let count = ConfigurationSlots.shared.count
            if SlotTable<URLSessionConfiguration>.isWorthLogging(count) {
                HTTPDNSURLProtocol.current?.logger.notice(
                    "HTTPDNS enabled on \(count) session configurations in this process; each keeps a copy of its settings and a class for good: make a configuration per session, not per request"
                )
            }
        #endif
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
