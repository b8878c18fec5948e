// HTTPS records (RFC 9460, type 65): where and how to reach an https origin, learnt with its addresses.
// One record is either an alias (priority 0: ask again for `target`) or a service endpoint: the target
// name ("." is the origin's own), the ALPN protocols it speaks, its port, address hints, and the ECH
// configuration. Their wire and presentation forms are read and written in HTTPDNSLookup
// (ServiceBinding+Wire.swift).

import Foundation

/// An HTTPS record (RFC 9460): how to reach an https origin.
///
/// `HTTPDNSResolver.serviceBindings(for:)` asks for them next to the addresses, and the CLI prints them
/// with `httpdns resolve --type https`.
public struct ServiceBinding: Hashable, Sendable, CustomStringConvertible {
    /// 0 for an alias (the origin is served as `target` is); otherwise lower is preferred.
    public var priority: UInt16
    /// The name to connect to: `.` means the origin's own name.
    public var target: String
    /// The ALPN protocol ids offered (`alpn`), e.g. `h2`, `h3`.
    public var alpn: [String] = []
    /// `no-default-alpn`: http/1.1 is not offered unless `alpn` lists it.
    public var noDefaultALPN = false
    /// The port to connect to instead of the URL's.
    public var port: Int?
    /// Addresses to try while A / AAAA answers are on their way.
    public var ipv4Hints: [IPAddress] = []
    /// Addresses to try while A / AAAA answers are on their way.
    public var ipv6Hints: [IPAddress] = []
    /// The Encrypted ClientHello configuration list (`ech`), kept and reported: this TLS stack cannot
    /// send ECH, so it is never used half-way.
    public var ech: [UInt8]?

    /// A record with the given fields.
    ///
    /// - Parameters:
    ///   - priority: 0 for an alias; otherwise lower is preferred.
    ///   - target: The name to connect to: `.` means the origin's own name.
    public init(priority: UInt16, target: String) {
        self.priority = priority
        self.target = target
    }

    /// Whether this is an alias (priority 0): ask for `target`'s records instead.
    public var isAlias: Bool { priority == 0 }

    /// The protocols a client may use with this endpoint, in the record's order: `alpn`, then http/1.1
    /// unless `no-default-alpn` (RFC 9460 §7.1.1).
    public var protocols: [String] {
        noDefaultALPN || alpn.contains("http/1.1") ? alpn : alpn + ["http/1.1"]
    }

    /// The presentation form, as a zone file writes it: `1 . alpn="h2" port=8443 ipv4hint=127.0.0.1`.
    public var description: String {
        var parts = ["\(priority)", target.hasSuffix(".") ? target : target + "."]
        if !alpn.isEmpty { parts.append("alpn=\"\(alpn.joined(separator: ","))\"") }
        if noDefaultALPN { parts.append("no-default-alpn") }
        if let port { parts.append("port=\(port)") }
        if !ipv4Hints.isEmpty { parts.append("ipv4hint=\(ipv4Hints.map(\.description).joined(separator: ","))") }
        if let ech { parts.append("ech=\"\(Data(ech).base64EncodedString())\"") }
        if !ipv6Hints.isEmpty { parts.append("ipv6hint=\(ipv6Hints.map(\.description).joined(separator: ","))") }
        return parts.joined(separator: " ")
    }
}

/// A name's HTTPS records, with the aliases followed to reach them.
public struct ServiceBindings: Hashable, Sendable, CustomStringConvertible {
    /// The name asked, in normal form.
    public var name: String
    /// The alias targets followed, in order (empty when the name's own records answered).
    public var aliases: [String]
    /// The service endpoints, by priority: empty when the name has none. A target of `.` is the last
    /// name of the chain (`aliases.last`, else `name`).
    public var endpoints: [ServiceBinding]
    /// Who answered: an HTTPDNS provider, LocalDNS, or the cache.
    public var source: ResolutionSource

    /// The name the endpoints' `.` targets stand for.
    public var owner: String { aliases.last ?? name }

    /// Records found for `name`, reached through `aliases`, answered by `source`.
    ///
    /// - Parameters:
    ///   - name: The name asked, in normal form.
    ///   - aliases: The alias targets followed, in order.
    ///   - endpoints: The service endpoints, by priority.
    ///   - source: Who answered: an HTTPDNS provider, LocalDNS, or the cache.
    public init(name: String, aliases: [String], endpoints: [ServiceBinding], source: ResolutionSource) {
        self.name = name
        self.aliases = aliases
        self.endpoints = endpoints
        self.source = source
    }

    /// One line per endpoint, the alias chain first: `alias.example → a.example: 1 . alpn="h2"`.
    public var description: String {
        let chain = ([name] + aliases).joined(separator: " → ")
        guard !endpoints.isEmpty else { return "\(chain): no HTTPS record" }
        return endpoints.map { "\(chain): \($0)" }.joined(separator: "\n")
    }
}
