// How an https origin's HTTPS records (RFC 9460) change a connect: pure rules, no I/O. The connection
// factory asks its address source for the records next to the addresses and applies what `choose` says.
//
// - Only an https URL on the default port asks (a URL naming its own port would ask `_PORT._https.host`,
//   RFC 9460 §9.1; that form is not asked here, and the URL's port is used as it is).
// - The first endpoint by priority that offers a protocol this engine speaks (h2, http/1.1) within the
//   request's versions is used; an endpoint offering only h3 is passed over. With none usable the connect
//   goes as if there were no record (RFC 9460 §3: a client may fall back).
// - Its port replaces the URL's for the socket only: TLS SNI, the certificate check and Host stay the
//   origin's (§7.2).
// - ALPN offers only what the endpoint offers (`alpn`, plus http/1.1 unless `no-default-alpn`).
// - Its target ("." is the owner: the origin, or an alias's target) is the name whose addresses are used.
// - Its hints are used when the addresses' lookup gives none or fails (§7.3).
// - `ech` is not used: this TLS stack cannot send ECH, and ECH half-done would not hide the name.

import HTTPDNSCore

package struct ServiceEndpoint: Equatable, Sendable {
    /// The port to connect to.
    var port: Int
    /// The HTTP versions to offer in ALPN.
    var versions: HTTPVersionPolicy
    /// The name whose addresses to connect to.
    var addressName: String
    /// Addresses to use when `addressName` has none.
    var hints: [IPAddress]

    /// What `bindings` (the origin's) say about connecting to its `port` with `versions`; nil when they
    /// change nothing (no usable endpoint).
    package static func choose(
        _ bindings: ServiceBindings,
        port: Int,
        versions: HTTPVersionPolicy
    ) -> ServiceEndpoint? {
        let speaks: Set<String> =
            switch versions {
            case .automatic: ["h2", "http/1.1"]
            case .http1Only: ["http/1.1"]
            case .http2Only: ["h2"]
            }
        for endpoint in bindings.endpoints where !endpoint.isAlias {
            let offered = Set(endpoint.protocols).intersection(speaks)
            guard !offered.isEmpty else { continue }
            let chosen: HTTPVersionPolicy =
                offered.count == 2 ? versions : offered.contains("h2") ? .http2Only : .http1Only
            return ServiceEndpoint(
                port: endpoint.port ?? port,
                versions: chosen,
                addressName: endpoint.target == "." ? bindings.owner : normalizeHostname(endpoint.target),
                hints: endpoint.ipv6Hints + endpoint.ipv4Hints
            )
        }
        return nil
    }

    /// How long past the addresses' lookup the records' answer is waited for: a tenth of that lookup's
    /// time, at most 50 ms. The records count when they come with the addresses (one server asked
    /// both at once answers both at once), never at the cost of a round trip: a lookup of one round
    /// trip waits a tenth of one more for a late answer (Chrome waits a fifth; on a 100 ms link that
    /// fifth was measured at 0.2 of a round trip on every connect whose records came late).
    static func extraWait(afterLookupOf took: Duration) -> Duration {
        min(.milliseconds(50), took / 10)
    }

    /// How long a connect waits for the origin's HTTPS records once its addresses are in: none when
    /// the addresses came without a round trip (the cache, fresh or stale, an override, a configured
    /// table), so a relaunch that connects on a persisted answer is never held up by a records query
    /// on its way; else `extraWait(afterLookupOf:)`. `source` nil: the addresses' lookup failed (the
    /// records' hints may still stand in).
    static func recordsWait(addressesFrom source: ResolutionSource?, lookupTook took: Duration) -> Duration {
        switch source {
        case .cache, .stale, .override, .literal, .staticHosts, .bootstrap, .serviceList: return .zero
        case .httpdns, .localDNS, .fallback, .system, .proxy, nil: return extraWait(afterLookupOf: took)
        }
    }
}
