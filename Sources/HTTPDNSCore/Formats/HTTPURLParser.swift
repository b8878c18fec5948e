// Absolute http(s) URL parsing, pure and fuzzed (Fuzz/Targets/FuzzProxyTarget.swift,
// FuzzResolverSpec.swift).
//
// The engine's `HTTPURL`, the proxy's `ProxyRequestTarget` and the resolvers' `ResolverEndpoint` all parse
// through here. Foundation's URLComponents splits the text; on top of it: only http and https, a host that
// is an IP literal or a valid hostname (brackets stripped from IPv6), a port in 1-65535, and no control
// character anywhere in the text (a CR or LF in a URL that ends up in a request line is request smuggling).

import Foundation

/// An absolute http or https URL split into who we talk to and what we ask for.
///
/// `host` is lower case for names, and an IP literal as written (without brackets) otherwise; `port` is
/// nil when the URL has none; `target` is the percent-encoded path and query, starting with `/`.
/// Value type, `Sendable`.
package struct HTTPURLParts: Hashable, Sendable {
    package var scheme: String
    package var host: String
    package var port: Int?
    package var target: String

    init(scheme: String, host: String, port: Int?, target: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.target = target
    }

    /// The port to connect to: the URL's, or the scheme's default (443 for https, 80 for http).
    package var effectivePort: Int { port ?? (scheme == "https" ? 443 : 80) }

    /// The URL again as text (`scheme://host[:port]target`, IPv6 in brackets). Parses back to `self`.
    var text: String { "\(scheme)://\(formatAuthority(host: host, port: port))\(target)" }

    /// Parses an absolute `http://` or `https://` URL; the error says what is wrong with it. Credentials
    /// (`user:password@`) are dropped, or refused with `refusingCredentials`.
    package static func parse(_ text: String, refusingCredentials: Bool = false) throws(URLParseError)
        -> HTTPURLParts
    {
        if let (offset, byte) = text.utf8.enumerated().first(where: { $0.element < 0x20 || $0.element == 0x7F }) {
            throw URLParseError(text: text, problem: .controlCharacter(byte, offset: offset))
        }
        guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased() else {
            throw URLParseError(text: text, problem: .notAURL)
        }
        guard scheme == "http" || scheme == "https" else {
            throw URLParseError(text: text, problem: .unsupportedScheme)
        }
        // encodedHost: the name as it goes into DNS, SNI and Host (IDNA, so "bücher.example" and
        // "xn--bcher-kva.example" are both xn--bcher-kva.example). `host` would decode punycode to Unicode
        // and percent-escapes to any byte, and the hostname check would then refuse a valid name.
        guard var host = c.encodedHost, !host.isEmpty else {
            throw URLParseError(text: text, problem: .noHost)
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if IPAddress(host) == nil {
            do {
                host = try validatedHostname(host)
            } catch {
                throw URLParseError(text: text, problem: .badHost("\(error)"))
            }
        }
        if refusingCredentials, c.user != nil || c.password != nil {
            throw URLParseError(text: text, problem: .credentials)
        }
        if let port = c.port, !(1...65535).contains(port) {
            throw URLParseError(text: text, problem: .badPort("\(port)"))
        }
        // A port too big for an Int comes back as nil, like no port at all: never the default port instead.
        if c.port == nil, let range = c.rangeOfPort, let string = c.string, !range.isEmpty {
            throw URLParseError(text: text, problem: .badPort(String(string[range])))
        }
        var target = c.percentEncodedPath.isEmpty ? "/" : c.percentEncodedPath
        if let q = c.percentEncodedQuery { target += "?" + q }
        return HTTPURLParts(scheme: scheme, host: host, port: c.port, target: target)
    }
}

/// Why a URL could not be parsed. `reason` says what is wrong, quoting the URL.
package struct URLParseError: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Problem: Hashable, Sendable {
        case controlCharacter(UInt8, offset: Int)
        case notAURL
        case unsupportedScheme
        case noHost
        /// The host is neither an IP literal nor a valid hostname; the payload says why.
        case badHost(String)
        /// The port as written.
        case badPort(String)
        /// `user:password@` in a URL parsed with `refusingCredentials`.
        case credentials
    }

    /// The URL as given.
    var text: String
    package var problem: Problem

    init(text: String, problem: Problem) {
        self.text = text
        self.problem = problem
    }

    /// What is wrong, quoting the whole URL.
    package var reason: String { reason(quoting: text, hostLimit: Int.max) }

    package var description: String { reason }

    /// What is wrong, quoting at most `limit` characters of the URL with control characters escaped:
    /// one line, safe to send back to a client.
    package func reason(quotingAtMost limit: Int) -> String {
        reason(quoting: escapedForEcho(text, limit: limit), hostLimit: limit)
    }

    private func reason(quoting quoted: String, hostLimit: Int) -> String {
        switch problem {
        case .controlCharacter(let byte, let offset):
            let hex = String(byte, radix: 16, uppercase: true)
            return "URL contains the control character 0x\(hex.count < 2 ? "0" + hex : hex) at byte \(offset); "
                + "control characters must be percent-encoded"
        case .notAURL:
            return "\"\(quoted)\" is not a URL (expected http://host/path or https://host/path)"
        case .unsupportedScheme:
            return "\"\(quoted)\": only http and https URLs are supported"
        case .noHost:
            return "\"\(quoted)\" has no host"
        case .badHost(let why):
            return "\"\(quoted)\": \(escapedForEcho(why, limit: hostLimit))"
        case .badPort(let port):
            return "\"\(quoted)\": port \(escapedForEcho(port, limit: hostLimit)) is outside 1-65535"
        case .credentials:
            return "\"\(quoted)\" carries credentials (user:password@), which are not accepted here"
        }
    }
}

/// `text` cut to `limit` characters (`…` marks a cut) with control characters and DEL as `\xNN`: safe to
/// quote in a one-line message sent to a peer or written to a log.
package func escapedForEcho(_ text: some StringProtocol, limit: Int) -> String {
    var out = ""
    var count = 0
    for scalar in text.unicodeScalars {
        if count == limit {
            out += "…"
            break
        }
        count += 1
        if scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) {
            let hex = String(scalar.value, radix: 16, uppercase: true)
            out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}
