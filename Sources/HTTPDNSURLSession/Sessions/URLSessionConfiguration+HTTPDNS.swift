import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionConfiguration {
    /// Puts `interception`'s protocol class first in `protocolClasses`, so the session's http(s) requests
    /// for hosts its setup selects go through HTTPDNS, with its resolver and engine. Safe to call more
    /// than once, and on a configuration a third-party stack built (before it makes its session); another
    /// interception's class is replaced. A configuration with a proxy of its own
    /// (`connectionProxyDictionary`) is left as it is: its requests go through that proxy, as the system
    /// sends them (see SystemProxy.swift).
    ///
    /// On Apple platforms the class put first is this configuration's own (ConfigurationSlots.swift), so
    /// the session's loads find a copy of its settings, taken as URLSession takes its own; enable a
    /// configuration again after changing it, before making another session from it. A background
    /// configuration is left as it is, and that is logged: its tasks run outside the app, where no
    /// URLProtocol runs.
    func enableHTTPDNS(_ interception: Interception) {
        guard !SystemProxy.configured(in: self) else { return }
        if let reason = HandBack.reason(configurationIdentifier: identifier) {
            interception.logger?.notice("HTTPDNS not enabled on a session configuration: \(reason)")
            return
        }
        var classes = protocolClasses ?? []
        classes.removeAll { $0 is HTTPDNSURLProtocol.Type }
        var mine: AnyClass = interception.protocolClass
        #if canImport(ObjectiveC)
            // (corelibs shows a load its session: the interception's one class loses nothing there.)
            if let slotClass = interception.slots.protocolClass(for: self, of: interception) {
                mine = slotClass
            } else {
                interception.logger?.warning(
                    "HTTPDNS enabled on a session configuration without its own settings: the runtime made no class for it; its sessions use the shared storages and the globally registered setup"
                )
            }
            let count = interception.slots.count
            if SlotTable<URLSessionConfiguration>.isWorthLogging(count) {
                interception.logger?.notice(
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
}
