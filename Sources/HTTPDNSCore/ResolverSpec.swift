import Foundation

/// An HTTP(S) endpoint of a resolver service, e.g. `https://127.0.0.1:8473/dns-query`.
///
/// `host` is what TLS verifies and what goes into Host / `:authority`; where the socket connects is
/// decided separately (an IP literal host, or a bootstrap IP for a name).
public struct ResolverEndpoint: Hashable, Sendable, CustomStringConvertible {
    package var scheme: String
    package var host: String
    package var port: Int
    package var path: String
    /// The query string already on the URL (without `?`), kept in front of the parameters we add.
    package var query: String?

    package var isTLS: Bool { scheme == "https" }
    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(h):\(port)\(path)\(query.map { "?\($0)" } ?? "")"
    }

    /// Parses an absolute http or https URL; throws a message saying what to fix.
    public init(url text: String) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw ResolverSpecError("\"\(text)\" is not a URL; write it like https://127.0.0.1:8473/dns-query")
        }
        guard scheme == "https" || scheme == "http" else {
            throw ResolverSpecError("\"\(text)\" uses \(scheme):, only http: and https: resolver URLs are supported")
        }
        // encodedHost, not host: see HTTPURLParts.parse (punycode stays punycode).
        guard var host = components.encodedHost, !host.isEmpty else {
            throw ResolverSpecError("\"\(text)\" has no host; write it like https://127.0.0.1:8473/dns-query")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if IPAddress(host) == nil { host = try validatedHostname(host) }
        guard components.user == nil, components.password == nil else {
            throw ResolverSpecError("\"\(text)\" carries credentials; resolver URLs must not")
        }
        self.scheme = scheme
        self.host = host
        // A port too big for an Int comes back as nil, like no port at all: never the default port instead.
        if components.port == nil, let range = components.rangeOfPort, !range.isEmpty {
            throw ResolverSpecError("\"\(text)\" has a port outside 1-65535")
        }
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65535).contains(self.port) else {
            throw ResolverSpecError("\"\(text)\" has port \(self.port), outside 1-65535")
        }
        self.path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        self.query = components.percentEncodedQuery.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The request target (path and query) with `parameters` appended, percent-encoded.
    package func target(adding parameters: [(String, String)]) -> String {
        var parts: [String] = query.map { [$0] } ?? []
        for (k, v) in parameters { parts.append("\(Self.encode(k))=\(Self.encode(v))") }
        return parts.isEmpty ? path : "\(path)?\(parts.joined(separator: "&"))"
    }

    static func encode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~,")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}

/// A bad resolver specification, with a message saying how to write it.
package struct ResolverSpecError: Error, Hashable, Sendable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// One resolver as given on the command line or in configuration:
/// `doh:URL`, `doh-post:URL`, `doh-json:URL`, `dnspod:URL`, `json:URL`, `dns:IP[:PORT]`, `system`.
public enum ResolverSpec: Hashable, Sendable, CustomStringConvertible {
    /// RFC 8484 DNS-over-HTTPS, wire format; GET with `?dns=` or POST with `application/dns-message`.
    case doh(ResolverEndpoint, usePOST: Bool)
    /// JSON DNS-over-HTTPS (`application/dns-json`, `?name=&type=`).
    case dohJSON(ResolverEndpoint)
    /// DNSPod / Tencent D+ text API (`/d?dn=`).
    case dnspod(ResolverEndpoint)
    /// Alibaba-style JSON API (`/resolve?host=`).
    case json(ResolverEndpoint)
    /// Classic DNS over UDP (TCP when truncated).
    case dns(IPAddress, port: Int)
    /// The operating system's resolver (getaddrinfo).
    case system

    package static let kinds = "doh:URL, doh-post:URL, doh-json:URL, dnspod:URL, json:URL, dns:IP[:PORT], system"

    public init(parsing text: String) throws {
        if text == "system" {
            self = .system
            return
        }
        guard let colon = text.firstIndex(of: ":") else {
            throw ResolverSpecError("\"\(text)\" has no kind; use one of \(Self.kinds)")
        }
        let kind = text[..<colon].lowercased()
        let rest = String(text[text.index(after: colon)...])
        switch kind {
        case "doh": self = .doh(try ResolverEndpoint(url: rest), usePOST: false)
        case "doh-post": self = .doh(try ResolverEndpoint(url: rest), usePOST: true)
        case "doh-json": self = .dohJSON(try ResolverEndpoint(url: rest))
        case "dnspod": self = .dnspod(try ResolverEndpoint(url: rest))
        case "json": self = .json(try ResolverEndpoint(url: rest))
        case "dns":
            let (ip, port) = try Self.parseHostPort(rest, defaultPort: 53)
            self = .dns(ip, port: port)
        default:
            throw ResolverSpecError("unknown resolver kind \"\(kind)\" in \"\(text)\"; use one of \(Self.kinds)")
        }
    }

    /// `IP`, `IP:PORT`, `[V6]`, `[V6]:PORT` or a bare IPv6 address.
    package static func parseHostPort(_ text: String, defaultPort: Int) throws -> (IPAddress, Int) {
        if let ip = IPAddress(text) { return (ip, defaultPort) }
        var hostPart = text
        var portPart: Substring?
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            hostPart = String(text[text.index(after: text.startIndex)..<close])
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") { portPart = after.dropFirst() } else if !after.isEmpty { hostPart = text }
        } else if let colon = text.lastIndex(of: ":") {
            hostPart = String(text[..<colon])
            portPart = text[text.index(after: colon)...]
        }
        guard let ip = IPAddress(hostPart) else {
            throw ResolverSpecError(
                "\"\(text)\" is not IP[:PORT]; a DNS server is given by address, e.g. dns:127.0.0.1:53"
            )
        }
        guard let p = portPart else { return (ip, defaultPort) }
        guard let port = Int(p), (1...65535).contains(port) else {
            throw ResolverSpecError("\"\(text)\" has port \"\(p)\"; use a number from 1 to 65535")
        }
        return (ip, port)
    }

    /// The endpoint of an HTTP-based resolver (nil for `dns:` and `system`).
    package var endpoint: ResolverEndpoint? {
        switch self {
        case .doh(let e, _), .dohJSON(let e), .dnspod(let e), .json(let e): return e
        case .dns, .system: return nil
        }
    }

    public var description: String {
        switch self {
        case .doh(let e, let post): return "\(post ? "doh-post" : "doh"):\(e)"
        case .dohJSON(let e): return "doh-json:\(e)"
        case .dnspod(let e): return "dnspod:\(e)"
        case .json(let e): return "json:\(e)"
        case .dns(let ip, let port): return ip.isIPv6 ? "dns:[\(ip)]:\(port)" : "dns:\(ip):\(port)"
        case .system: return "system"
        }
    }
}
