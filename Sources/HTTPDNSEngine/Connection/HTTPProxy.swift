// An HTTP proxy between the engine and the origins: a corporate proxy, or a debugging one (Charles,
// mitmproxy). The engine opens a CONNECT tunnel through it and speaks TLS inside, so SNI, the
// certificate check and Host stay on the hostname. The tunnel goes to the address HTTPDNS gave (the
// proxy never resolves the name, so a hijacked resolver on its side cannot interfere), unless the app
// says the proxy must resolve (`proxyResolvesNames`: the tunnel then names the host).
//
// Which URLs use which proxy follows curl: `https_proxy` for https, `http_proxy` for http, `all_proxy`
// for both, `no_proxy` for the hosts that go direct (see `HTTPProxySettings.environment`).

import Foundation
import HTTPDNSCore

/// Basic credentials for a proxy, given per request (a URLSession delegate's answer to a 407).
package struct ProxyCredentials: Sendable, Hashable {
    var user: String
    var password: String

    package init(user: String, password: String) {
        self.user = user
        self.password = password
    }
}

/// One HTTP proxy: where it listens and, when it asks for them, Basic credentials.
public struct HTTPProxy: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The proxy's host: an IP address or a name (resolved by the system: a proxy is the local
    /// network's own service).
    public var host: String
    /// The proxy's port.
    public var port: Int
    /// The user for Basic `Proxy-Authorization`, nil for none.
    public var user: String?
    /// The password for Basic `Proxy-Authorization`; never printed.
    public var password: String?

    /// A proxy at `host:port`, without credentials.
    ///
    /// - Parameters:
    ///   - host: The proxy's host: an IP address or a name (resolved by the system).
    ///   - port: The proxy's port.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses a proxy URL as curl takes it: `http://[USER:PASSWORD@]HOST[:PORT]`, the scheme optional,
    /// the port 1080 when absent.
    ///
    /// - Parameter text: The proxy URL.
    /// - Throws: `HTTPDNSConfigurationError` (`.invalidProxyConfiguration`) for another scheme (an https:// or
    ///   SOCKS proxy is not supported), a URL without a host or a port out of range; the message never
    ///   repeats a password.
    public init(url text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let withScheme = trimmed.contains("://") ? trimmed : "http://" + trimmed
        func refuse(_ why: String) -> HTTPDNSConfigurationError {
            HTTPDNSConfigurationError(.invalidProxyConfiguration, "proxy \(Self.redacted(trimmed)): \(why)")
        }
        guard let url = URLComponents(string: withScheme), let scheme = url.scheme?.lowercased() else {
            throw refuse("not a URL; give http://HOST:PORT")
        }
        guard scheme == "http" else {
            throw refuse("\(scheme):// proxies are not supported; give an http:// proxy (CONNECT)")
        }
        guard var host = url.host, !host.isEmpty else { throw refuse("no host; give http://HOST:PORT") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = url.port ?? 1080
        guard (1...65535).contains(port) else { throw refuse("port \(port) is not a port") }
        self.host = host
        self.port = port
        self.user = url.user.flatMap { $0.isEmpty ? nil : $0 }
        self.password = url.password
    }

    /// These credentials instead of the configured ones (an app's answer to the proxy's 407).
    func with(_ credentials: ProxyCredentials?) -> HTTPProxy {
        guard let credentials else { return self }
        var proxy = self
        proxy.user = credentials.user
        proxy.password = credentials.password
        return proxy
    }

    /// `Basic …` for `Proxy-Authorization`, nil without a user.
    var authorization: String? {
        guard let user else { return nil }
        return "Basic " + Data("\(user):\(password ?? "")".utf8).base64EncodedString()
    }

    /// `http://HOST:PORT`, credentials left out.
    public var description: String { "http://" + formatAuthority(host: host, port: port) }

    /// The proxy as `dump` shows it: the password redacted.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "host": host, "port": port, "user": user as Any, "password": password == nil ? "nil" : "<redacted>",
            ],
            displayStyle: .struct
        )
    }

    /// `text` with any password replaced by `***`.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let head = text[..<at]
        let start = head.range(of: "://")?.upperBound ?? head.startIndex
        guard let colon = head[start...].firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }
}

/// Which proxy each request uses: one for https URLs, one for http URLs, and the hosts that go
/// direct. Set it on `HTTPDNS.Configuration.network.proxy`, or read curl's environment variables with
/// ``environment(_:)``.
public struct HTTPProxySettings: Sendable, Hashable {
    /// The proxy for https:// URLs (nil: direct).
    public var https: HTTPProxy?
    /// The proxy for http:// URLs (nil: direct).
    public var http: HTTPProxy?
    /// Hosts that never use a proxy, as curl's `no_proxy`: `example.com` (and every name below it;
    /// a leading dot is the same), an IP address, or `*` for every host.
    public var noProxy: [String] = []
    /// The proxy resolves names: a tunnel names the host (`CONNECT api.example.com:443`) instead of the
    /// address HTTPDNS gave. Off by default: a proxy that resolves through a hijacked resolver would
    /// undo HTTPDNS. Turn it on for a proxy that cannot reach addresses, only names.
    public var proxyResolvesNames = false

    /// `proxy` for every URL.
    ///
    /// - Parameters:
    ///   - proxy: The proxy for https:// and http:// URLs (nil: direct).
    ///   - noProxy: Hosts that never use a proxy, as curl's `no_proxy` entries.
    public init(all proxy: HTTPProxy?, noProxy: [String] = []) {
        self.https = proxy
        self.http = proxy
        self.noProxy = noProxy
    }

    /// One proxy per scheme.
    ///
    /// - Parameters:
    ///   - https: The proxy for https:// URLs (nil: direct).
    ///   - http: The proxy for http:// URLs (nil: direct).
    ///   - noProxy: Hosts that never use a proxy, as curl's `no_proxy` entries.
    public init(https: HTTPProxy?, http: HTTPProxy?, noProxy: [String] = []) {
        self.https = https
        self.http = http
        self.noProxy = noProxy
    }

    /// The settings curl would take from `environment`: `https_proxy` (or `HTTPS_PROXY`) for https,
    /// `http_proxy` for http (never `HTTP_PROXY`, which CGI lets a request set), `all_proxy` (or
    /// `ALL_PROXY`) for both when the scheme's own is absent, and `no_proxy` (or `NO_PROXY`).
    ///
    /// - Parameter environment: The environment variables; the process's by default.
    /// - Returns: The settings, or nil when no proxy is set.
    /// - Throws: `HTTPDNSConfigurationError` (`.invalidProxyConfiguration`) for a proxy URL that cannot be used.
    public static func environment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> HTTPProxySettings? {
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        }
        let all = try value("all_proxy", "ALL_PROXY").map(HTTPProxy.init(url:))
        let https = try value("https_proxy", "HTTPS_PROXY").map(HTTPProxy.init(url:)) ?? all
        let http = try value("http_proxy").map(HTTPProxy.init(url:)) ?? all
        guard https != nil || http != nil else { return nil }
        return HTTPProxySettings(https: https, http: http, noProxy: noProxyList(value("no_proxy", "NO_PROXY") ?? ""))
    }

    /// A `no_proxy` value as its entries: comma-separated, blanks dropped.
    ///
    /// - Parameter text: The `no_proxy` value.
    /// - Returns: Its entries, trimmed, in order.
    public static func noProxyList(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0.trimmingCharacters(in: .whitespaces)) }.filter { !$0.isEmpty }
    }

    /// The proxy for a request to `host` over `scheme`, nil when it goes direct.
    package func proxy(scheme: String, host: String) -> HTTPProxy? {
        guard let proxy = scheme == "https" ? https : http else { return nil }
        return bypasses(host) ? nil : proxy
    }

    /// Whether `host` is in `noProxy`: curl's rule, case-insensitive, a trailing dot ignored.
    func bypasses(_ host: String) -> Bool {
        let name = normalizeHostname(host)
        for entry in noProxy {
            var rule = normalizeHostname(entry.trimmingCharacters(in: .whitespaces))
            if rule == "*" { return true }
            if rule.hasPrefix(".") { rule.removeFirst() }
            if rule.hasPrefix("["), rule.hasSuffix("]") { rule = String(rule.dropFirst().dropLast()) }
            guard !rule.isEmpty else { continue }
            if let ip = IPAddress(rule) {
                if IPAddress(name) == ip { return true }
                continue
            }
            if name == rule || name.hasSuffix("." + rule) { return true }
        }
        return false
    }

    /// Why these settings cannot be used, or nil: a proxy with no host or a port out of range.
    package var problem: String? {
        for proxy in [https, http].compactMap({ $0 }) {
            if proxy.host.isEmpty { return "a proxy has no host" }
            if !(1...65535).contains(proxy.port) { return "proxy \(proxy): port \(proxy.port) is not a port" }
        }
        return nil
    }
}
