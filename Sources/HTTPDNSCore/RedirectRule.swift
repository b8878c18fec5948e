/// What a redirect does to the next request (RFC 9110 §15.4, as browsers and URLSession do it): 301/302
/// turn a POST into a GET, 303 turns anything but HEAD into a GET (both drop the body), 307/308 keep the
/// method and the body. Shared by the engine's redirect layer and the URLProtocol.
package enum RedirectRule {
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The next request's method and whether the body goes with it; nil when `status` is not a redirect.
    package static func next(status: Int, method: String) -> (method: String, keepsBody: Bool)? {
        guard statuses.contains(status) else { return nil }
        let upper = method.uppercased()
        if (status == 303 && upper != "HEAD") || ((status == 301 || status == 302) && upper == "POST") {
            return ("GET", false)
        }
        return (method, true)
    }

    /// Request headers (lowercased) that never follow a redirect to another scheme, host or port.
    package static let crossOriginDroppedHeaders = ["authorization", "cookie", "proxy-authorization", "host"]

    /// Body headers (lowercased) dropped with the body.
    package static let bodyHeaders = ["content-length", "content-type", "transfer-encoding"]
}
