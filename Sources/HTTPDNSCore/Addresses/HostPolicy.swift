/// A hostname pattern: an exact name (`api.example.com`), a wildcard for every name below a domain
/// (`*.example.com` matches `a.example.com` and `a.b.example.com`, not `example.com` itself), or `*`
/// for every name. Matching is case-insensitive and ignores a trailing dot.
package struct HostPattern: Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        case any
        case exact(String)
        case suffix(String)  // ".example.com"
    }

    let kind: Kind

    init(kind: Kind) { self.kind = kind }

    /// Parses `example.com`, `*.example.com` or `*`. Throws `HTTPDNSConfigurationError` with code
    /// `.invalidHostPattern` and a message naming the pattern's problem.
    package init(_ text: String) throws {
        func hostname(_ name: some StringProtocol) throws -> String {
            do {
                return try validatedHostname(name)
            } catch {
                throw HTTPDNSConfigurationError(.invalidHostPattern, "\(error)")
            }
        }
        let t = normalizeHostname(text.trimmed(of: " \t"))
        if t == "*" {
            kind = .any
        } else if t.hasPrefix("*.") {
            kind = .suffix("." + (try hostname(t.dropFirst(2))))
        } else if t.contains("*") {
            throw HTTPDNSConfigurationError(
                .invalidHostPattern,
                "pattern \"\(text)\": '*' may only stand alone or as the first label (*.example.com)"
            )
        } else if let ip = IPAddress(t) {
            kind = .exact(ip.description)
        } else {
            kind = .exact(try hostname(t))
        }
    }

    package func matches(_ host: String) -> Bool {
        let h = normalizeHostname(host)
        switch kind {
        case .any: return true
        case .exact(let n): return h == n
        case .suffix(let s): return h.hasSuffix(s)
        }
    }

    /// The domain a proxy configuration's match (or excluded) domain list names for this pattern: the
    /// name, or the domain below the wildcard (such lists match a domain and every name under it); nil
    /// for `*` and for IP literals (a domain list names no addresses).
    var proxyDomain: String? {
        switch kind {
        case .any: return nil
        case .exact(let name): return IPAddress(name) == nil ? name : nil
        case .suffix(let suffix): return String(suffix.dropFirst())
        }
    }

    package var description: String {
        switch kind {
        case .any: return "*"
        case .exact(let n): return n
        case .suffix(let s): return "*" + s
        }
    }
}

/// Which names go through HTTPDNS, which never fall back, which may answer with private addresses.
///
/// The default selects nothing: an embedded library routes no name through HTTPDNS until the app says
/// which (`only: ["*"]` for everything). The command-line tool starts from `*`.
/// Value type, `Sendable`.
public struct HostPolicy: Hashable, Sendable {
    /// Names resolved through HTTPDNS (empty: none).
    package var only: [HostPattern]
    /// Names never resolved through HTTPDNS even when `only` matches (deny wins).
    var except: [HostPattern]
    /// Names that never fall back to LocalDNS when every HTTPDNS provider fails.
    var strict: [HostPattern]
    /// Public names allowed to resolve to loopback/private/non-global addresses.
    /// Names under special-use domains (`.test`, `.localhost`, `.local`, `.internal`, `.home.arpa`,
    /// `.invalid`, `.example`) may always.
    var allowNonGlobal: [HostPattern]

    package init(
        only: [HostPattern] = [],
        except: [HostPattern] = [],
        strict: [HostPattern] = [],
        allowNonGlobal: [HostPattern] = []
    ) {
        self.only = only
        self.except = except
        self.strict = strict
        self.allowNonGlobal = allowNonGlobal
    }

    /// Builds a policy from pattern texts (`example.com`, `*.example.com`, `*`).
    ///
    /// - Parameters:
    ///   - only: Names resolved through HTTPDNS (empty: none).
    ///   - except: Names never resolved through HTTPDNS even when `only` matches (deny wins).
    ///   - strict: Names that never fall back to LocalDNS when every HTTPDNS provider fails.
    ///   - allowPrivate: Public names allowed to resolve to loopback, private or other non-global addresses.
    /// - Throws: `HTTPDNSConfigurationError` with code `.invalidHostPattern`, naming the first pattern that is
    ///   not a valid one.
    public init(
        only: [String],
        except: [String] = [],
        strict: [String] = [],
        allowPrivate: [String] = []
    ) throws {
        self.init(
            only: try only.map(HostPattern.init),
            except: try except.map(HostPattern.init),
            strict: try strict.map(HostPattern.init),
            allowNonGlobal: try allowPrivate.map(HostPattern.init)
        )
    }

    /// Selects nothing (the library default).
    public static let none = HostPolicy()
    /// Selects every name.
    public static var all: HostPolicy { HostPolicy(only: [HostPattern(kind: .any)]) }

    /// Whether the policy selects no name for HTTPDNS (the library default).
    package var selectsNothing: Bool { only.isEmpty }

    /// How a name is to be resolved.
    package enum Lookup: Hashable, Sendable {
        /// The host is an IP literal: no lookup at all.
        case literal(IPAddress)
        /// Through HTTPDNS; `strict` forbids falling back to LocalDNS.
        case httpdns(strict: Bool)
        /// Not selected: LocalDNS only.
        case localDNS
    }

    package func lookup(for host: String) -> Lookup {
        if let ip = IPAddress(host) { return .literal(ip) }
        guard only.contains(where: { $0.matches(host) }), !except.contains(where: { $0.matches(host) }) else {
            return .localDNS
        }
        return .httpdns(strict: strict.contains(where: { $0.matches(host) }))
    }

    /// The domains a system proxy configuration pointed at HTTPDNS's loopback proxy should send there
    /// (`matchDomains`) and keep away (`excludedDomains`): the hosts this policy selects, so the others
    /// go straight out as without HTTPDNS. Both empty when the policy selects every name (or none: then
    /// every host goes to the proxy, which resolves the unselected ones with LocalDNS).
    package var proxyDomains: (match: [String], excluded: [String]) {
        guard !only.contains(where: { $0.kind == .any }) else {
            return ([], except.compactMap(\.proxyDomain))
        }
        let match = only.compactMap(\.proxyDomain)
        return match.isEmpty ? ([], []) : (match, except.compactMap(\.proxyDomain))
    }

    static let specialUseSuffixes = [
        "test", "localhost", "local", "internal", "home.arpa", "invalid", "example", "lan",
    ]

    /// Whether `host` may resolve to non-global (loopback, private, link-local) addresses.
    package func mayResolveToNonGlobal(_ host: String) -> Bool {
        let h = normalizeHostname(host)
        if Self.specialUseSuffixes.contains(where: { h == $0 || h.hasSuffix("." + $0) }) { return true }
        return allowNonGlobal.contains(where: { $0.matches(h) })
    }
}
