// Web views whose requests go through HTTPDNS's loopback proxy (iOS 17 / macOS 14 and later). Apple
// platforms only.
// snippet.hide
#if canImport(WebKit)
    // snippet.show
    import WebKit
    import HTTPDNSKit
    import HTTPDNSLoopbackProxy  // the .proxy route: a product of its own, opted into

    @MainActor func routeWebViews(through httpdns: HTTPDNS) async throws {
        // Starts the proxy (once) and sets the store's proxyConfigurations to it; kept pointed at it
        // if the proxy ever moves. iOS 16 throws .unavailableOnPlatform.
        try await httpdns.configure(WKWebsiteDataStore.default(), via: .proxy)
        let configuration = WKWebViewConfiguration()
        configuration.websiteDataStore = .default()
        _ = WKWebView(frame: .zero, configuration: configuration)
    }
// snippet.hide
#endif
