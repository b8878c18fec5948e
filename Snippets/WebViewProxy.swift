// A web view whose requests go through HTTPDNS's loopback proxy (iOS 17 / macOS 14 and later). Apple
// platforms only.
// snippet.hide
#if canImport(WebKit)
    // snippet.show
    import Network
    import WebKit
    import HTTPDNSKit

    @available(iOS 17.0, macOS 14.0, *)
    @MainActor func routeWebViews(through httpdns: HTTPDNS) async throws {
        let proxy = try await httpdns.startProxy()
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: NWEndpoint.Port(integerLiteral: UInt16(proxy.port)))
        let store = WKWebsiteDataStore.default()
        store.proxyConfigurations = [ProxyConfiguration(httpCONNECTProxy: endpoint)]
    }
// snippet.hide
#endif
