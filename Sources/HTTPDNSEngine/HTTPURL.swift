// The engine's URL: who we talk to and what we ask for, parsed once.

import Foundation
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// An absolute http(s) URL split the way the engine needs it: who we talk to (scheme, host, port) and
/// what we ask for (target = path and query). The host keeps its name; it is never replaced by an IP.
package struct HTTPURL: Hashable, Sendable, CustomStringConvertible {
    package var scheme: String
    package var host: String
    package var port: Int
    /// Path and query, percent-encoded, starting with `/`.
    package var target: String

    package init(scheme: String, host: String, port: Int? = nil, target: String = "/") {
        self.scheme = scheme
        self.host = host
        self.port = port ?? (scheme == "https" ? 443 : 80)
        self.target = target.isEmpty ? "/" : target
    }

    /// Parses `http://` and `https://` URLs (`HTTPURLParts.parse`); throws `.invalidRequest` saying what is
    /// wrong.
    package init(_ text: String) throws {
        do {
            self.init(try HTTPURLParts.parse(text))
        } catch {
            throw HTTPEngineError(.invalidRequest, error.reason)
        }
    }

    /// An origin as an app names it for a pre-connect: a host name (`api.example.com`, meaning https on
    /// 443) or a URL (`https://api.example.com:8443/`, whose path is ignored). Throws `.invalidRequest`.
    package init(origin text: String) throws {
        try self.init(text.contains("://") ? text : "https://\(text)/")
        target = "/"
    }

    /// The URL the parser split, its port filled in when it had none.
    package init(_ parts: HTTPURLParts) {
        self.init(scheme: parts.scheme, host: parts.host, port: parts.port, target: parts.target)
    }

    package var isTLS: Bool { scheme == "https" }
    package var hostIsIP: Bool { IPAddress(host) != nil }

    /// `host[:port]` for Host / :authority; the port is left out when it is the scheme's default.
    package var authority: String { formatAuthority(host: host, port: port == (isTLS ? 443 : 80) ? nil : port) }

    package var description: String { "\(scheme)://\(authority)\(target)" }

    /// The URL a `Location` header points to, resolved against this one (RFC 3986 §5).
    func resolving(_ location: String) throws -> HTTPURL {
        guard let base = URL(string: description), let next = URL(string: location, relativeTo: base)?.absoluteURL
        else {
            throw HTTPEngineError(.protocolError, "redirect to \"\(location)\", which is not a URL")
        }
        return try HTTPURL(next.absoluteString)
    }
}
