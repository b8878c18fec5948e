// A client that swift-openapi-generator made, sending through HTTPDNS: enable the package trait
// `OpenAPI` (`traits: ["OpenAPI"]` on the package line) and add the product
// `.product(name: "HTTPDNSOpenAPI", package: "swift-httpdns")` next to the generated code's
// OpenAPIRuntime. `Client` and `Servers` are what the generator made from your OpenAPI document.
// snippet.hide
#if OpenAPI
    // snippet.show
    import HTTPDNSKit
    import HTTPDNSOpenAPI

    let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["api.example.com"])
    // Each request bounded as a whole (the body included); bodies stream both ways.
    let transport = HTTPDNSTransport(httpdns, configuration: .init(timeout: .seconds(30)))
    // let client = Client(serverURL: try Servers.Server1.url(), transport: transport)
    // A failure is a ClientError whose underlyingError is our HTTPEngineError, with its code.
    // snippet.hide
    _ = transport
#endif
