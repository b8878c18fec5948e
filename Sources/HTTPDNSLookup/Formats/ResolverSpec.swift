import Foundation
import HTTPDNSCore

/// An HTTP(S) endpoint of a resolver service, e.g. `https://127.0.0.1:8473/dns-query`.
///
/// `host` is what TLS verifies and what goes into Host / `:authority`; where the socket connects is
/// decided separately (an IP literal host, or a bootstrap IP for a name).
public struct ResolverEndpoint: Hashable, Sendable, CustomStringConvertible {
    var scheme: String
    /// The service's hostname or IP literal: what TLS verifies and what goes into Host.
    public internal(set) var host: String
    var port: Int
    var path: String
    /// The query string already on the URL (without `?`), kept in front of the parameters we add.
    var query: String?

    package var isTLS: Bool { scheme == "https" }
    /// The endpoint's URL.
    public var description: String {
        "\(scheme)://\(formatAuthority(host: host, port: port))\(path)\(query.map { "?\($0)" } ?? "")"
    }

    /// Parses an absolute http or https URL (through `HTTPURLParts.parse`, credentials refused).
    ///
    /// - Parameter text: The URL, e.g. `https://127.0.0.1:8473/dns-query`.
    /// - Throws: `HTTPDNSConfigurationError` with code `.invalidResolverSpec` and a message saying what to fix.
    public init(url text: String) throws {
        let parts: HTTPURLParts
        do {
            parts = try HTTPURLParts.parse(text, refusingCredentials: true)
        } catch {
            let example = "write it like https://127.0.0.1:8473/dns-query"
            switch error.problem {
            case .notAURL: throw invalidSpec("\"\(text)\" is not a URL; \(example)")
            case .noHost: throw invalidSpec("\"\(text)\" has no host; \(example)")
            case .unsupportedScheme:
                let scheme = text.prefix { $0 != ":" }.lowercased()
                throw invalidSpec("\"\(text)\" uses \(scheme):, only http: and https: resolver URLs are supported")
            case .badHost(let why): throw invalidSpec(why)
            case .credentials: throw invalidSpec("\"\(text)\" carries credentials; resolver URLs must not")
            case .controlCharacter, .badPort: throw invalidSpec(error.reason)
            }
        }
        self.scheme = parts.scheme
        self.host = parts.host
        self.port = parts.effectivePort
        let target = parts.target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        self.path = String(target[0])
        self.query = target.count > 1 && !target[1].isEmpty ? String(target[1]) : nil
    }

    /// The request target (path and query) with `parameters` appended, percent-encoded; `path`
    /// replaces the endpoint's path and query (a signed form's own path, its parameters all given).
    func target(adding parameters: [(String, String)], path: String? = nil) -> String {
        var parts: [String] = path == nil ? query.map { [$0] } ?? [] : []
        for (k, v) in parameters { parts.append("\(Self.encode(k))=\(Self.encode(v))") }
        let path = path ?? self.path
        return parts.isEmpty ? path : "\(path)?\(parts.joined(separator: "&"))"
    }

    /// The value of `name` in the URL's own query string, if there.
    func queryValue(_ name: String) -> String? {
        for pair in (query ?? "").split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if kv[0] == name { return kv.count > 1 ? String(kv[1]).removingPercentEncoding : "" }
        }
        return nil
    }

    static func encode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~,")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}

/// One resolver as given on the command line or in configuration:
/// `doh:URL`, `doh-post:URL`, `doh-json:URL`, `dnspod:URL`, `json:URL`, `dns:IP[:PORT]`, `system`.
public enum ResolverSpec: Hashable, Sendable, CustomStringConvertible {
    /// RFC 8484 DNS-over-HTTPS, wire format; GET with `?dns=` or POST with `application/dns-message`.
    case doh(ResolverEndpoint, usePOST: Bool)
    /// JSON DNS-over-HTTPS (`application/dns-json`, `?name=&type=`).
    case dohJSON(ResolverEndpoint)
    /// DNSPod / Tencent Cloud HTTPDNS text API (`/d?dn=`): the free form without `auth`; with it, the
    /// enterprise forms (AES- or DES-encrypted, or an HTTPS token).
    case dnspod(ResolverEndpoint, auth: DNSPodAuth? = nil)
    /// Alibaba-style JSON API (`/resolve?host=`, or Alibaba Cloud's `/ACCOUNT/d?host=`). With `secret`
    /// (Alibaba Cloud EMAS), `/ACCOUNT/d` queries are signed and sent to `/ACCOUNT/sign_d`; an endpoint
    /// `/v2/d?id=ACCOUNT` speaks the newer API, signed with the hex `secret` when given, its names and
    /// answers encrypted with `encryption`'s key when given (modes 1 and 2, as the vendor's SDKs send them
    /// when a key is set).
    case json(ResolverEndpoint, secret: ResolverSecret? = nil, encryption: AlibabaEncryption? = nil)
    /// Classic DNS over UDP (TCP when truncated).
    case dns(IPAddress, port: Int)
    /// The operating system's resolver (getaddrinfo).
    case system

    package static let kinds = "doh:URL, doh-post:URL, doh-json:URL, dnspod:URL, json:URL, dns:IP[:PORT], system"

    /// Parses one spec such as `doh:https://127.0.0.1:8473/dns-query` or `dns:127.0.0.1:53`.
    ///
    /// - Parameter text: The spec: `doh:URL`, `doh-post:URL`, `doh-json:URL`, `dnspod:URL`, `json:URL`,
    ///   `dns:IP[:PORT]` or `system`.
    /// - Throws: `HTTPDNSConfigurationError` with code `.invalidResolverSpec` and a message saying how to
    ///   write it.
    public init(parsing text: String) throws {
        if text == "system" {
            self = .system
            return
        }
        guard let colon = text.firstIndex(of: ":") else {
            throw invalidSpec("\"\(text)\" has no kind; use one of \(Self.kinds)")
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
            throw invalidSpec("unknown resolver kind \"\(kind)\" in \"\(text)\"; use one of \(Self.kinds)")
        }
    }

    /// `IP`, `IP:PORT`, `[V6]`, `[V6]:PORT` or a bare IPv6 address (split by `splitHostPort`, the port
    /// checked by `parsePort`).
    package static func parseHostPort(_ text: String, defaultPort: Int) throws -> (IPAddress, Int) {
        if let ip = IPAddress(text) { return (ip, defaultPort) }
        guard let (host, portText) = splitHostPort(text[...]), let ip = IPAddress(host) else {
            throw invalidSpec(
                "\"\(text)\" is not IP[:PORT]; a DNS server is given by address, e.g. dns:127.0.0.1:53"
            )
        }
        guard let portText else { return (ip, defaultPort) }
        guard let port = parsePort(portText) else {
            throw invalidSpec("\"\(text)\" has port \"\(portText)\"; use a number from 1 to 65535")
        }
        return (ip, port)
    }

    /// The endpoint of an HTTP-based resolver (nil for `dns:` and `system`).
    package var endpoint: ResolverEndpoint? {
        switch self {
        case .doh(let e, _), .dohJSON(let e), .dnspod(let e, _), .json(let e, _, _): return e
        case .dns, .system: return nil
        }
    }

    /// The spec in the form `init(parsing:)` takes. Credentials are not part of it: they never appear
    /// in text.
    public var description: String {
        switch self {
        case .doh(let e, let post): return "\(post ? "doh-post" : "doh"):\(e)"
        case .dohJSON(let e): return "doh-json:\(e)"
        case .dnspod(let e, _): return "dnspod:\(e)"
        case .json(let e, _, _): return "json:\(e)"
        case .dns(let ip, let port): return "dns:" + formatAuthority(host: ip.description, port: port)
        case .system: return "system"
        }
    }
}

/// The error for a resolver spec or endpoint URL that cannot be used; the message says what to fix.
private func invalidSpec(_ message: String) -> HTTPDNSConfigurationError {
    HTTPDNSConfigurationError(.invalidResolverSpec, message)
}

extension ResolverEndpoint {
    /// Where to reach this endpoint without DNS: nil for an IP-literal host (connected to as it is);
    /// for a hostname, its entry in `bootstrap` (keyed by normalized name; empty when missing, which is
    /// a configuration error). The one lookup the providers and the CLI's check share.
    package func bootstrapAddresses(in bootstrap: [String: [IPAddress]]) -> [IPAddress]? {
        guard IPAddress(host) == nil else { return nil }
        return bootstrap[normalizeHostname(host)] ?? []
    }
}

/// Alibaba Cloud EMAS v2's encrypted modes (`m=1`, `m=2`): the query's names go inside `enc` and the
/// answer's `data` comes back encrypted, with the account's AES key (the console's second key, hex). The
/// vendor's iOS SDK sends mode 1 (AES-CBC), its Android SDK mode 2 (AES-GCM) where the system has it.
public struct AlibabaEncryption: Hashable, Sendable {
    /// The cipher mode.
    public enum Mode: Int, Hashable, Sendable {
        /// `m=1`: AES-CBC, a random 16-byte IV, PKCS#7 padding (the vendor's iOS SDK).
        case cbc = 1
        /// `m=2`: AES-GCM, a random 12-byte nonce, the 16-byte tag after the ciphertext (its Android SDK).
        case gcm = 2
    }

    /// The cipher mode.
    public var mode: Mode
    /// The AES key as the console shows it: hex of 16 (AES-128), 24 or 32 bytes. Never printed.
    public var key: ResolverSecret

    /// Mode `mode` with `key` (hex).
    ///
    /// - Parameters:
    ///   - mode: The cipher mode; AES-CBC by default.
    ///   - key: The AES key as the console shows it: hex of 16, 24 or 32 bytes.
    public init(mode: Mode = .cbc, key: ResolverSecret) {
        self.mode = mode
        self.key = key
    }
}
