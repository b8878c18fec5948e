// Which connection may serve a request, and how one is opened for it: one value, derived once where a
// request enters the engine (`HTTPEngine.profile(of:given:)`), by which the pool keys its hosts and from
// which the connection factory alone computes a connection's settings. Requests with equal profiles
// share connections (AsyncHTTPClient derives its `ConnectionPool.Key` the same way, once).
//
// What a session says about its requests' connections (a URLSession delegate's say on certificates, its
// proxy credentials, network rules, service class and TLS versions, connection limit) comes with the
// request as `ConnectionProfile.Terms`, made by URLSession's one factory (`Terms.forLoad`); a new session
// option is a field there and a line in that factory, and the factory here turns it into a setting.

import HTTPDNSCore

/// Which connections may serve a request, and how to open one for it.
package struct ConnectionProfile: Sendable {
    /// What a session narrows for its requests' connections; empty for the engine's defaults.
    package struct Terms: Sendable {
        /// The app's say on the server's certificate beyond the engine's check (a URLSession delegate's).
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
    }

    /// Scheme, host and port (the target is `/`).
    var origin: HTTPURL
    var versions: HTTPVersionPolicy
    /// HTTP/2 over cleartext with prior knowledge.
    var h2c: Bool
    /// Connections whose certificate an app had a say on serve only requests of the same partition
    /// (one URLSession, say); compared by its partition.
    var serverTrust: ServerTrustEvaluation?
    /// Connections opened with a request's own proxy credentials serve only requests with the same.
    var proxyCredentials: ProxyCredentials?
    /// The networks the connection may use: the engine's rules, narrowed by the request's.
    var networkAccess: NetworkAccess
    /// Connections opened with another service class, multipath mode or TLS versions serve only requests
    /// that ask for the same.
    var tuning: ConnectionTuning
    /// A lower connection limit than the engine's: such requests get connections of their own, held to
    /// it.
    var connectionLimit: Int?
    /// Where to connect instead of asking the address source (a resolver endpoint's bootstrap IPs);
    /// compared by its first address of each family, so a resolver moved to another service address stops
    /// reusing connections to the one before.
    var given: ResolvedAddresses?

    init(
        origin: HTTPURL,
        versions: HTTPVersionPolicy = .automatic,
        h2c: Bool = false,
        serverTrust: ServerTrustEvaluation? = nil,
        proxyCredentials: ProxyCredentials? = nil,
        networkAccess: NetworkAccess = .unrestricted,
        tuning: ConnectionTuning = .standard,
        connectionLimit: Int? = nil,
        given: ResolvedAddresses? = nil
    ) {
        self.origin = HTTPURL(scheme: origin.scheme, host: origin.host, port: origin.port)
        self.versions = versions
        self.h2c = h2c
        self.serverTrust = serverTrust
        self.proxyCredentials = proxyCredentials
        self.networkAccess = networkAccess
        self.tuning = tuning
        self.connectionLimit = connectionLimit
        self.given = given
    }

    var host: String { origin.host }
    var port: Int { origin.port }

    /// The first given address of each family: what tells two profiles with given addresses apart.
    var givenFirsts: [IPAddress]? { given.map { [$0.ipv4.first, $0.ipv6.first].compactMap { $0 } } }
}

extension ConnectionProfile: Hashable {
    package static func == (a: ConnectionProfile, b: ConnectionProfile) -> Bool {
        a.origin == b.origin && a.versions == b.versions && a.h2c == b.h2c
            && a.serverTrust?.partition == b.serverTrust?.partition && a.proxyCredentials == b.proxyCredentials
            && a.networkAccess == b.networkAccess && a.tuning == b.tuning && a.connectionLimit == b.connectionLimit
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
