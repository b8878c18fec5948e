// What a client of the loopback proxy asked for, read from its request line alone (RFC 9110 §7.1,
// RFC 9112 §3.2): a tunnel (`CONNECT host:port`, authority-form), a forwarded request (absolute-form
// `http://…`), the PAC file, or nothing we serve. Pure and fuzzed (Fuzz/Targets/FuzzProxyTarget.swift); the
// proxy's channel handler acts on the result.

import HTTPDNSCore

/// What a proxy client asked for in its request line. Value type, `Sendable`.
enum ProxyRequestTarget: Hashable, Sendable {
    /// `CONNECT host:port`. `host` is a normalized hostname or an IP address in canonical text form
    /// (IPv6 without brackets; the request must bracket it).
    case tunnel(host: String, port: Int)
    /// An absolute-form `http://` request; `port` is always filled in (80 when the URL has none).
    case forward(HTTPURLParts)
    /// `GET /proxy.pac`.
    case pac
    /// Anything else, with why: one line, safe to send back to the client (echoed input is cut to
    /// 100 characters and control characters are escaped).
    case invalid(String)

    /// How much of the client's input an `.invalid` reason quotes.
    static let echoLimit = 100

    /// Classifies a request line's method and request-target.
    static func parse(method: String, uri: String) -> ProxyRequestTarget {
        if method == "CONNECT" {
            guard let (host, port) = authority(uri) else {
                return .invalid("CONNECT needs host:port, got \"\(escapedForEcho(uri, limit: echoLimit))\"")
            }
            return .tunnel(host: host, port: port)
        }
        if uri.hasPrefix("http://") || uri.hasPrefix("https://") {
            var parts: HTTPURLParts
            do {
                parts = try HTTPURLParts.parse(uri)
            } catch {
                return .invalid(error.reason(quotingAtMost: echoLimit))
            }
            guard parts.scheme == "http" else {
                return .invalid("https:// URLs go through CONNECT, not as absolute-form requests")
            }
            parts.port = parts.effectivePort
            return .forward(parts)
        }
        if uri == "/proxy.pac" && method == "GET" {
            return .pac
        }
        return .invalid("this is a proxy: send CONNECT host:port or an absolute http:// URL (or GET /proxy.pac)")
    }

    /// `host:port` or `[v6]:port` → (normalized host or canonical IP, port); nil when malformed.
    /// The port is 1-5 decimal digits in 1-65535 (`parsePort`); an IPv6 address must be bracketed.
    static func authority(_ text: String) -> (String, Int)? {
        guard let (host, portText) = splitHostPort(text[...]), let portText, let port = parsePort(portText) else {
            return nil
        }
        if text.hasPrefix("[") {
            guard let ip = IPAddress(host), ip.isIPv6 else { return nil }
            return (ip.description, port)
        }
        guard !host.contains(":") else { return nil }
        if let ip = IPAddress(host) { return (ip.description, port) }
        guard let name = try? validatedHostname(host) else { return nil }
        return (name, port)
    }
}
