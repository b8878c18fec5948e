// The engine request for a URLRequest: the target URL (https where the app or HSTS upgrade it), the
// app's, the session's and the system's default header fields, the cookies the storage has for it, the
// body, the network rules and tuning, the connection limit, progress and timeouts.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension HTTPDNSURLProtocol {
    static func makeEngineRequest(_ request: URLRequest, body: BodySource, setup: Setup, context: LoadContext)
        throws
        -> (HTTPEngineRequest, URL)
    {
        guard let original = request.url else { throw URLError(.badURL) }
        let url = target(of: original, setup: setup)
        let target: HTTPURL
        do {
            target = try HTTPURL(url.absoluteString)
        } catch {
            throw URLError(
                .badURL,
                userInfo: [NSLocalizedDescriptionKey: "\(error)", NSURLErrorFailingURLErrorKey: original]
            )
        }
        var headers = HTTPHeaders()
        for (name, value) in context.delivery.headersSetByTheApp(request) { headers.add(name: name, value: value) }
        for (name, value) in context.additionalHeaders where !headers.contains(name: name) {
            headers.add(name: name, value: value)
        }
        // What the system's HTTP stack adds to a request without them (User-Agent, Accept, ...).
        let method = request.httpMethod ?? "GET"
        // The form Content-Type goes with a body the request itself carries (httpBody or a stream), not
        // with an upload task's data or file: the system adds it in the same cases.
        var hasBody = request.httpBody?.isEmpty == false || request.httpBodyStream != nil
        if case .stream = body { hasBody = true }
        for field in SystemRequestDefaults.current.missingFields(
            present: headers.map(\.name),
            method: method,
            hasBody: hasBody
        ) {
            headers.add(name: field.name, value: field.value)
        }
        let cookie = SystemRequestDefaults.cookieHeader(
            setByApp: headers.first(name: "cookie"),
            stored: context.cookieStorage.flatMap { CookieRules.header(for: url, in: $0) },
            handlesCookies: request.httpShouldHandleCookies && context.cookieStorage != nil
        )
        headers.remove(name: "cookie")
        if let cookie { headers.add(name: "Cookie", value: cookie) }
        var engineRequest = HTTPEngineRequest(
            method: HTTPMethod(rawValue: method),
            url: target,
            headers: headers,
            body: try body.engineBody(
                declaredLength: BodyLength.declared(
                    contentLength: headers.first(name: "content-length"),
                    taskExpects: context.expectedUploadLength
                )
            )
        )
        // URLSession decodes a compressed body whoever asked for it: the app's own Accept-Encoding is
        // narrowed to the codings the engine decodes (no brotli reaches the app still compressed).
        engineRequest.decompress = true
        // The route decided the scheme itself (`target(of:setup:)`), as the system it stands in for does.
        engineRequest.upgradesKnownHTTPSOrigins = false
        if let body = engineRequest.body {
            engineRequest.onBodySent = context.delivery.uploadProgress(expected: body.length)
        }
        let idle = context.requestTimeout(request)
        // Past a year the timeout bounds nothing (and `.infinity` would not fit in a time amount).
        if idle > 0, idle < 365 * 86_400 { engineRequest.idleTimeout = .milliseconds(Int64(idle * 1000)) }
        // The resource timeout's time left is set by `send`, before each time the request goes out.
        return (engineRequest, url)
    }
}
