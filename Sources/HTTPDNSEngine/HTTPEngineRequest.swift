// A request as the engine takes it.

import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A request: method, URL, headers, optional body.
public struct HTTPEngineRequest: Sendable {
    /// The request method.
    public var method: HTTPMethod
    package var url: HTTPURL
    /// Headers to send; `Host` is set from the URL when absent.
    public var headers: HTTPHeaders
    /// The body, or nil for none.
    public var body: HTTPRequestBody?
    /// Ask for gzip/deflate and decompress the response body; an Accept-Encoding of the request's own is
    /// narrowed to the codings decoded (`ContentCodings`).
    public var decompress = false
    /// Bound on the whole request, body included (overrides `Configuration.timeouts.request`).
    public var timeout: Duration?
    /// Longest wait for the connection and then between two received bytes, for this request alone
    /// (overrides `Configuration.timeouts.connect` and `.read`; a URLRequest's `timeoutInterval` means
    /// this). Nil: the configuration's.
    public var idleTimeout: Duration?
    /// HTTP versions for this request (overrides `Configuration.http.versions`).
    var versions: HTTPVersionPolicy?
    /// Upload progress: told the number of body bytes handed to the connection so far, each time a
    /// chunk goes (an inline body: once, with the head). The URLSession integration turns it into the
    /// task's progress. Called on the connection's event loop or the sending task: keep it short.
    public var onBodySent: (@Sendable (Int) -> Void)?
    /// Whether an http:// URL to a known https origin (it sent HSTS, or has an HTTPS record) goes to
    /// https; `HTTPSettings.keepHTTP` names hosts that never do. True by default; false where the caller
    /// decides the scheme itself (the URLSession route does, as the system it stands in for).
    public var upgradesKnownHTTPSOrigins = true

    package init(method: HTTPMethod = .GET, url: HTTPURL, headers: HTTPHeaders = [:], body: HTTPRequestBody? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A request for `url` (an http or https URL with a hostname or an IP).
    ///
    /// - Parameters:
    ///   - method: The request method; GET by default.
    ///   - url: The URL to request.
    ///   - headers: Headers to send; `Host` is set from the URL when absent.
    ///   - body: The body, or nil for none.
    /// - Throws: `HTTPEngineError` with code `.invalidRequest` for a URL it cannot use.
    public init(method: HTTPMethod = .GET, url: String, headers: HTTPHeaders = [:], body: HTTPRequestBody? = nil) throws
    {
        self.init(method: method, url: try HTTPURL(url), headers: headers, body: body)
    }
}
