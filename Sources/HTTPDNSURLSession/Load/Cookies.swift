// Cookies for intercepted requests, by RFC 6265's rules, kept in the app's HTTPCookieStorage.
//
// Foundation's storage and parser are used for keeping and parsing; the decisions that matter for
// safety are made here, because corelibs' HTTPCookie accepts any Domain attribute (a.test can set a
// cookie for b.test) and ignores Max-Age. Matching is by label: a cookie for a.test never goes to
// evila.test, only to a.test and, when it has a Domain attribute, to its subdomains.

import Foundation
import HTTPDNSCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

enum CookieRules {
    /// RFC 6265 §5.1.3: `host` equals `domain` or ends with "." + `domain`, and is not an IP address.
    static func domainMatches(host: String, domain: String) -> Bool {
        let h = host.lowercased()
        let d = domain.lowercased()
        if h == d { return true }
        return IPAddress(h) == nil && h.hasSuffix("." + d)
    }

    /// RFC 6265 §5.1.4: the cookie path is the request path or a prefix of it ending at a "/".
    static func pathMatches(requestPath: String, cookiePath: String) -> Bool {
        let path = requestPath.isEmpty ? "/" : requestPath
        if path == cookiePath { return true }
        guard path.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || path.dropFirst(cookiePath.count).hasPrefix("/")
    }

    /// Whether a cookie set by a response from `url` may be kept (§5.3 step 6): its domain must
    /// domain-match the host that set it, and a top-level label alone ("test", "com") is refused.
    static func mayStore(_ cookie: HTTPCookie, from url: URL) -> Bool {
        guard let host = url.host?.lowercased() else { return false }
        let domain = cookie.domain.lowercased()
        if domain.hasPrefix(".") {
            let bare = String(domain.dropFirst())
            return bare.contains(".") && domainMatches(host: host, domain: bare)
        }
        return domain == host
    }

    /// Whether `cookie` goes with a request to `url` (§5.4): domain (host-only without a Domain
    /// attribute), path, Secure only over https, not expired.
    static func shouldSend(_ cookie: HTTPCookie, to url: URL, now: Date = Date()) -> Bool {
        guard let host = url.host?.lowercased() else { return false }
        let domain = cookie.domain.lowercased()
        let domainOK =
            domain.hasPrefix(".") ? domainMatches(host: host, domain: String(domain.dropFirst())) : domain == host
        guard domainOK, pathMatches(requestPath: url.path, cookiePath: cookie.path) else { return false }
        if cookie.isSecure, url.scheme?.lowercased() != "https" { return false }
        if let expires = cookie.expiresDate, expires <= now { return false }
        return true
    }

    /// The `Cookie` header value for `url`, most specific path first (§5.4 step 2), or nil.
    static func header(for url: URL, in storage: HTTPCookieStorage) -> String? {
        let cookies = (storage.cookies(for: url) ?? [])
            .filter { shouldSend($0, to: url) }
            .sorted { $0.path.count > $1.path.count }
        guard !cookies.isEmpty else { return nil }
        return cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Whether a response from `url` may set cookies under the accept policy in force (the session's
    /// on swift-corelibs-foundation, the storage's on Apple platforms): never with `.never`; with
    /// `.onlyFromMainDocumentDomain`, only when the main document's host ends with `url`'s host (no
    /// main document: allowed, as the system does).
    static func accepts(_ policy: HTTPCookie.AcceptPolicy, from url: URL, mainDocumentURL: URL?) -> Bool {
        switch policy {
        case .never: return false
        case .onlyFromMainDocumentDomain:
            guard let main = mainDocumentURL else { return true }
            guard let mainHost = main.host?.lowercased(), let host = url.host?.lowercased() else { return false }
            return mainHost.hasSuffix(host)
        default: return true
        }
    }

    /// Keeps the cookies of every `Set-Cookie` value of a response from `url` that RFC 6265 allows;
    /// honours Max-Age (a zero or negative one deletes the cookie).
    static func store(_ setCookieValues: [String], from url: URL, in storage: HTTPCookieStorage, now: Date = Date()) {
        for value in setCookieValues {
            for var cookie in HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": value], for: url) {
                guard mayStore(cookie, from: url) else { continue }
                if let maxAge = maxAge(in: value), var properties = cookie.properties {
                    properties[.expires] = now.addingTimeInterval(TimeInterval(maxAge))
                    properties[.discard] = nil
                    if maxAge <= 0 {
                        storage.deleteCookie(cookie)
                        continue
                    }
                    if let updated = HTTPCookie(properties: properties) { cookie = updated }
                }
                storage.setCookie(cookie)
            }
        }
    }

    /// The Max-Age attribute of a Set-Cookie value (§5.2.2), if any.
    static func maxAge(in value: String) -> Int? {
        for attribute in value.split(separator: ";").dropFirst() {
            let parts = attribute.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "max-age" else {
                continue
            }
            return Int(parts[1].trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
