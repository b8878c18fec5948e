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
    package var decompress = false
    /// Bound on the whole request, body included (overrides `Configuration.timeouts.request`).
    public var timeout: Duration?
    /// Longest wait for the connection and then between two received bytes (overrides
    /// `Configuration.timeouts.connect` and `.read`; URLRequest's `timeoutInterval` means this).
    package var idleTimeout: Duration?
    /// HTTP versions for this request (overrides `Configuration.http.versions`).
    var versions: HTTPVersionPolicy?
    /// What the request's session narrows for its connections (a URLSession's, made by its one
    /// factory); empty for the engine's defaults.
    package var terms = ConnectionProfile.Terms()
    /// Told the body bytes handed to the connection so far, each time a chunk goes (an inline body:
    /// once, with the head); the URLSession integration turns it into upload progress. On the
    /// connection's event loop or the sending task: keep it short.
    package var onBodySent: (@Sendable (Int) -> Void)?
    /// An http:// URL to a known https origin goes to https (`HTTPSettings.keepHTTP` says where not);
    /// false where the caller decides itself (the URLSession route, as the system it stands in for).
    package var upgradesKnownHTTPSOrigins = true

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
