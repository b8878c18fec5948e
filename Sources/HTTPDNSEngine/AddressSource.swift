// The seam between the engine and whatever gives it addresses: the engine asks at connect time, by
// hostname, and never resolves by itself. The app's engine is given the resolver (HTTPDNSLookup); the
// resolver's own engine, which reaches DoH and HTTPDNS services, is given their bootstrap addresses
// (`StaticAddressSource`), so the two engines never ask each other.

import HTTPDNSCore
import NIOCore

/// Where the engine gets the addresses of a host: the resolver, at connect time.
package protocol AddressSource: Sendable {
    /// Addresses of `host`, each family in preference order, and who answered. Ends by `deadline`
    /// (the request's; nil: none) with an error when it passes: the engine adds no timer of its own.
    func addresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses

    /// Calls `body` each time the source's answer for a host changes: the host, the family and its new
    /// addresses (an engine retires its connections to addresses no longer given).
    func onAnswerChanged(_ body: @escaping @Sendable (String, AddressFamily, [IPAddress]) -> Void)

    /// Whether `serviceBindings(for:deadline:)` can answer (a resolver with a query for HTTPS records).
    var answersServiceBindings: Bool { get }

    /// The HTTPS records (RFC 9460) of `host`, an alias followed, ended by `deadline`.
    func serviceBindings(for host: String, deadline: NIODeadline?) async throws -> ServiceBindings

    /// The HTTPS records of `host` when the source has them at hand (cached and fresh, each alias
    /// step too), without waiting; nil otherwise.
    func cachedServiceBindings(for host: String) -> ServiceBindings?

    // What a connect asks when the addresses given failed or are slow (ConnectFailover.swift).

    /// Connecting to `failed`, addresses of `host` the source gave, failed: no later lookup is served
    /// them (on this network).
    func forget(_ failed: [IPAddress], of host: String)

    /// `host`'s addresses asked again past any cache (joining a refresh already on its way), ended by
    /// `deadline`; nil when the source has no other way to ask.
    func freshAddresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses?

    /// `host`'s addresses from the fallback its policy allows (LocalDNS), ended by `deadline`; nil
    /// when none may answer (a strict name, fallback off, or a source without one).
    func fallbackAddresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses?

    // Known https origins (StrictTransportSecurity.swift): the source keeps them beside its answers.

    /// Whether the source keeps HSTS (the engine reads responses' Strict-Transport-Security only then).
    var keepsStrictTransportSecurity: Bool { get }

    /// An https response from `host`, over a connection whose certificate passed, carried
    /// Strict-Transport-Security `value` (RFC 6797).
    func strictTransportSecurity(_ value: String, from host: String)

    /// Whether `host` is known to serve https: it asked for HSTS, or (`byRecords`) it has HTTPS records
    /// with an endpoint at hand (RFC 9460 §9.5). Without waiting.
    func knownHTTPSOrigin(_ host: String, byRecords: Bool) -> Bool
}

extension AddressSource {
    /// A source without HTTPS records.
    package var answersServiceBindings: Bool { false }

    /// A source without HTTPS records has none for any name.
    package func serviceBindings(for host: String, deadline: NIODeadline?) async throws -> ServiceBindings {
        ServiceBindings(name: host, aliases: [], endpoints: [], source: .literal)
    }

    /// A source without HTTPS records has none at hand.
    package func cachedServiceBindings(for host: String) -> ServiceBindings? { nil }

    /// A source without memory forgets nothing.
    package func forget(_ failed: [IPAddress], of host: String) {}

    /// A source without a cache has no other answer.
    package func freshAddresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses? { nil }

    /// A source without a fallback has none.
    package func fallbackAddresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses? {
        nil
    }

    /// A source without memory keeps no HSTS.
    package var keepsStrictTransportSecurity: Bool { false }

    /// A source without memory forgets the policy.
    package func strictTransportSecurity(_ value: String, from host: String) {}

    /// A source without memory knows no https origin.
    package func knownHTTPSOrigin(_ host: String, byRecords: Bool) -> Bool { false }

    /// A source whose answers never change (fixed tables) tells nobody.
    package func onAnswerChanged(_ body: @escaping @Sendable (String, AddressFamily, [IPAddress]) -> Void) {}
}

/// Fixed addresses per host, e.g. a resolver endpoint's bootstrap IPs; unknown hosts fail.
package struct StaticAddressSource: AddressSource {
    var table: [String: [IPAddress]]
    package init(_ table: [String: [IPAddress]]) { self.table = table }

    package func addresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses {
        guard let ips = table[normalizeHostname(host)], !ips.isEmpty else {
            throw HTTPEngineError(.nameNotResolved, "no address configured for \(host)")
        }
        return ResolvedAddresses(ipv4: ips.filter { !$0.isIPv6 }, ipv6: ips.filter(\.isIPv6), source: .staticHosts)
    }
}
