// Names the app pins to addresses (`HTTPDNS.Configuration.addressOverrides`), like curl's `--resolve`
// and AsyncHTTPClient's `dnsOverride`: a staging or test server, a name pinned while a service moves.
// Such a name is answered from the table before the policy, the cache and every resolver; nothing is
// asked and nothing is cached. The addresses keep their order per family and the engine races them as
// it races any answer (RFC 8305), so a table may list a spare address after the main one.

import HTTPDNSCore

extension HTTPDNSResolver {
    /// Throws `HTTPDNSConfigurationError` (`.invalidAddressOverride`) naming an entry of `table` whose
    /// name is not a hostname or that has no address.
    static func validateOverrides(_ table: [String: [IPAddress]]) throws {
        for (name, addresses) in table {
            let key: String
            do {
                key = try validatedHostname(name)
            } catch {
                throw HTTPDNSConfigurationError(
                    .invalidAddressOverride,
                    "address override \"\(name)\": \(error); give a hostname such as api.example.com"
                )
            }
            guard IPAddress(key) == nil else {
                throw HTTPDNSConfigurationError(
                    .invalidAddressOverride,
                    "address override \"\(name)\" is an IP address; give the hostname the app requests"
                )
            }
            guard !addresses.isEmpty else {
                throw HTTPDNSConfigurationError(
                    .invalidAddressOverride,
                    "address override \"\(name)\" has no address; give at least one, or remove the entry"
                )
            }
        }
    }

    /// `table` with its names in normal form (two spellings of one name: their addresses together).
    static func normalizedOverrides(_ table: [String: [IPAddress]]) -> [String: [IPAddress]] {
        Dictionary(table.map { (normalizeHostname($0.key), $0.value) }, uniquingKeysWith: +)
    }

    /// The pinned answer for `name` (normal form) with the families `query` asks, nil when the name is
    /// not pinned. Throws `ResolverError` (`.noAddress`) when the table has none of those families.
    func overriddenResolution(_ name: String, _ query: AddressQuery) throws -> Resolution? {
        guard let pinned = overrides[name] else { return nil }
        let resolution = Resolution(
            name: name,
            ipv4: query.wantsIPv4 ? pinned.filter { !$0.isIPv6 } : [],
            ipv6: query.wantsIPv6 ? pinned.filter(\.isIPv6) : [],
            ttl: nil,
            source: .override,
            elapsed: .zero
        )
        guard resolution.ipv4.isEmpty && resolution.ipv6.isEmpty else { return resolution }
        throw ResolverError(
            .noAddress,
            name: name,
            "the address override for \(name) has no \(query.wantsIPv4 ? "IPv4" : "IPv6") address, "
                + "the only family this network can reach; add one"
        )
    }
}
