// Which connection may serve a request, and how one is opened for it: one value, derived once where a
// request enters the engine (`ConnectionProfile(of:terms:given:configuration:)`), by which the pool keys its
// hosts and from which the connection factory alone computes a connection's settings. Requests with equal
// profiles share connections (AsyncHTTPClient derives its `ConnectionPool.Key` the same way, once).
//
// What a session says about its requests' connections (a URLSession delegate's say on certificates, its
// proxy credentials, network rules, service class and TLS versions, connection limit) comes beside the
// request (`HTTPEngine.execute(_:terms:)`) as `ConnectionProfile.Terms`, made by URLSession's one factory
// (`Terms.forLoad`), never as a field of the request, and is kept in
// the profile as it is, after the engine's configuration has narrowed it (`Terms.narrowed`). A new session
// option is a field of the terms (compared and hashed with them) and a line in that factory; what acts on
// it (the pool for a limit, a transport for a socket or TLS option) reads it from the profile.

import HTTPDNSCore

/// Which connections may serve a request, and how to open one for it.
package struct ConnectionProfile: Sendable {
    /// What a session narrows for its requests' connections; empty for the engine's defaults. Two
    /// profiles whose terms differ in any field never share a connection.
    package struct Terms: Hashable, Sendable {
        /// The app's say on the server's certificate beyond the engine's check (a URLSession delegate's);
        /// compared by its partition.
        package var serverTrust: ServerTrustEvaluation?
        /// Credentials for the proxy instead of the configured ones (a URLSession delegate's, after a 407).
        package var proxyCredentials: ProxyCredentials?
        /// The networks the request may use, on top of the engine's `Configuration.network.access`.
        package var networkAccess: NetworkAccess?
        /// The service class, multipath mode and TLS versions; nil: the engine's.
        var tuning: ConnectionTuning?
        /// At most this many connections to the host (a URLSession configuration's
        /// `httpMaximumConnectionsPerHost`); nil or one above the engine's limit: the engine's.
        var connectionLimit: Int?

        package init(
            serverTrust: ServerTrustEvaluation? = nil,
            proxyCredentials: ProxyCredentials? = nil,
            networkAccess: NetworkAccess? = nil,
            tuning: ConnectionTuning? = nil,
            connectionLimit: Int? = nil
        ) {
            self.serverTrust = serverTrust
            self.proxyCredentials = proxyCredentials
            self.networkAccess = networkAccess
            self.tuning = tuning
            self.connectionLimit = connectionLimit
        }

        /// These terms for a connection to `origin` under the engine's `configuration`: a say on
        /// certificates only over TLS; the engine's network rules narrowed by the session's; the engine's
        /// tuning and limit where the session's add nothing (nil), so such requests share the engine's
        /// connections.
        func narrowed(for origin: HTTPURL, by configuration: HTTPEngine.Configuration) -> Terms {
            var terms = self
            if !origin.isTLS { terms.serverTrust = nil }
            terms.networkAccess =
                networkAccess.map(configuration.network.access.narrowed(by:))
                ?? configuration.network.access
            if tuning == .standard { terms.tuning = nil }
            terms.connectionLimit = connectionLimit.flatMap { $0 < configuration.http.maxConnectionsPerHost ? $0 : nil }
            return terms
        }
    }

    /// Scheme, host and port (the target is `/`).
    var origin: HTTPURL
    var versions: HTTPVersionPolicy
    /// HTTP/2 over cleartext with prior knowledge.
    var h2c: Bool
    /// The session's terms, narrowed by the engine's configuration.
    var terms: Terms
    /// Where to connect instead of asking the address source (a resolver endpoint's bootstrap IPs);
    /// compared by its first address of each family, so a resolver moved to another service address stops
    /// reusing connections to the one before.
    var given: ResolvedAddresses?

    init(
        origin: HTTPURL,
        versions: HTTPVersionPolicy = .automatic,
        h2c: Bool = false,
        terms: Terms = Terms(),
        given: ResolvedAddresses? = nil
    ) {
        self.origin = HTTPURL(scheme: origin.scheme, host: origin.host, port: origin.port)
        self.versions = versions
        self.h2c = h2c
        self.terms = terms
        self.given = given
    }

    /// The profile of `request` under its session's `terms` (to `given` addresses, if it names them)
    /// and the engine's `configuration`, derived once per attempt: requests with equal profiles share
    /// connections.
    init(
        of request: HTTPEngineRequest,
        terms: Terms,
        given: ResolvedAddresses?,
        configuration: HTTPEngine.Configuration
    ) {
        let url = request.url
        self.init(
            origin: url,
            versions: request.versions ?? configuration.http.versions,
            h2c: !url.isTLS && configuration.http.http2PriorKnowledge,
            terms: terms.narrowed(for: url, by: configuration),
            given: given
        )
    }

    var host: String { origin.host }
    var port: Int { origin.port }

    /// Connections whose certificate an app had a say on serve only requests of the same partition
    /// (one URLSession, say).
    var serverTrust: ServerTrustEvaluation? {
        get { terms.serverTrust }
        set { terms.serverTrust = newValue }
    }
    /// Connections opened with a request's own proxy credentials serve only requests with the same.
    var proxyCredentials: ProxyCredentials? { terms.proxyCredentials }
    /// The networks the connection may use: the engine's rules, narrowed by the request's.
    var networkAccess: NetworkAccess { terms.networkAccess ?? .unrestricted }
    /// Connections opened with another service class, multipath mode or TLS versions serve only requests
    /// that ask for the same.
    var tuning: ConnectionTuning { terms.tuning ?? .standard }
    /// A lower connection limit than the engine's: such requests get connections of their own, held to
    /// it.
    var connectionLimit: Int? { terms.connectionLimit }

    /// The first given address of each family: what tells two profiles with given addresses apart.
    var givenFirsts: [IPAddress]? { given.map { [$0.ipv4.first, $0.ipv6.first].compactMap { $0 } } }
}

extension ConnectionProfile: Hashable {
    package static func == (a: ConnectionProfile, b: ConnectionProfile) -> Bool {
        a.origin == b.origin && a.versions == b.versions && a.h2c == b.h2c && a.terms == b.terms
            && a.givenFirsts == b.givenFirsts
    }

    /// The origin alone: profiles that differ only in the rest (tuning, limits, partitions: rare, and
    /// compared in full by `==`) share a bucket. The whole key was hashed at every lease and release,
    /// a third of the pool's cost per request.
    package func hash(into hasher: inout Hasher) {
        hasher.combine(origin.host)
        hasher.combine(origin.port)
    }
}
