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
    package func enableHTTPDNS() {
        guard !SystemProxy.configured(in: self) else { return }
        var classes = protocolClasses ?? []
        classes.removeAll { $0 == HTTPDNSURLProtocol.self }
        classes.insert(HTTPDNSURLProtocol.self, at: 0)
        protocolClasses = classes
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
