// Following redirects: each hop is a new request, resolved again at connect time, under the first
// request's total timeout. The method and header rules are RedirectRule's (HTTPDNSCore).

import HTTPDNSCore
import NIOCore
import NIOHTTP1

extension HTTPEngine {
    /// Sends `request`, following up to `followRedirects` redirects. Each hop is a new request: its
    /// host is resolved again at connect time. Method rules: 301/302 turn POST into GET and 303 turns
    /// anything but HEAD into GET, dropping the body; 307/308 keep method and body (a body that cannot
    /// be sent again fails the redirect). Credentials and cookies are not carried to another host.
    /// The request's total timeout (`timeout`, else the configuration's) bounds the whole chain.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - followRedirects: The most redirects to follow; 0 (the default) returns a redirect as it is.
    /// - Returns: The response, as soon as its head has arrived; read its `body` for the rest.
    /// - Throws: `HTTPEngineError`: `.totalTimeout` when the chain's time runs out, `.tooManyRedirects` past
    ///   `followRedirects`, `.invalidRequest` for a redirect that must send a streamed body again,
    ///   `.protocolError` for a `Location` that is not a URL, or the code of the hop's failure (lookup,
    ///   connect, TLS, read).
    public func send(_ request: HTTPEngineRequest, followRedirects: Int = 0) async throws -> HTTPEngineResponse {
        var current = request
        var hops = 0
        var earlier: [RequestMetrics] = []
        let deadline = (request.timeout ?? configuration.timeouts.request).map { ContinuousClock.now + $0 }
        while true {
            if let deadline {
                let left = deadline - ContinuousClock.now
                guard left > .zero else {
                    throw HTTPEngineError(.totalTimeout, "\(current.url.host): no time left for redirect \(hops)")
                }
                current.timeout = left
            }
            let response = try await execute(current)
            response.recorder.update {
                $0.redirects = hops
                $0.hops = earlier
            }
            guard followRedirects > 0, let next = try Self.redirect(from: current, response: response) else {
                return response
            }
            guard hops < followRedirects else {
                throw HTTPEngineError(.tooManyRedirects, "more than \(followRedirects) redirects (last to \(next.url))")
            }
            // Drain a small redirect body so the connection can be reused; abandon a large one.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            var hop = response.metrics
            hop.hops = []
            earlier.append(hop)
            hops += 1
            current = next
        }
    }

    /// The request a redirect response asks for, or nil when `response` is not a redirect to follow.
    package static func redirect(from request: HTTPEngineRequest, response: HTTPEngineResponse) throws
        -> HTTPEngineRequest?
    {
        let code = Int(response.status.code)
        guard let rule = RedirectRule.next(status: code, method: request.method.rawValue),
            let location = response.headers.first(name: "location")
        else {
            return nil
        }
        var next = request
        next.url = try request.url.resolving(location)
        if !rule.keepsBody {
            next.method = HTTPMethod(rawValue: rule.method)
            next.body = nil
            for name in RedirectRule.bodyHeaders { next.headers.remove(name: name) }
        } else if let body = request.body, case .stream = body.storage {
            throw HTTPEngineError(
                .invalidRequest,
                "redirect \(code) to \(next.url) must resend the body, but a streamed body cannot be sent twice"
            )
        }
        if next.url.host != request.url.host || next.url.port != request.url.port
            || next.url.scheme != request.url.scheme
        {
            for name in RedirectRule.crossOriginDroppedHeaders { next.headers.remove(name: name) }
        }
        return next
    }
}
