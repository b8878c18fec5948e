// The groups `HTTPDNS.Configuration` is made of, one per concern, each handed as it is to the parts
// that use it: timeouts to both engines (and the lookup bound to the resolver), TLS to both engines
// (the URLSession route reads its server-trust rule), the network to the resolver's monitor and both
// engines, HTTP to the app's engine (the resolvers' own connections always let ALPN choose), tracing
// to the resolver and the app's engine.

import HTTPDNSCore
import Tracing

/// How long each phase of a lookup and a request may take.
public struct TimeoutSettings: Sendable, Hashable {
    /// Bound on one lookup, every resolver and the fallback to LocalDNS included.
    public var lookup: Duration = .seconds(5)
    /// Bound on connecting to the addresses of one host, every RFC 8305 attempt together (the next
    /// address is tried while one is slow).
    public var connect: Duration = .seconds(10)
    /// Longest wait for the next byte of a response.
    public var read: Duration = .seconds(30)
    /// Bound on a whole request, lookup and body included (nil: none beyond the other timeouts).
    public var request: Duration?
    /// Bound on the TLS handshake after the connect.
    var tlsHandshake: Duration = .seconds(10)

    /// The defaults: 5 s lookup, 10 s connect, 30 s between bytes, no bound on the whole request.
    public init() {}
}

/// Whom the library's TLS trusts, and when a URLSession delegate is asked about it. Verification is
/// never off: these only add trust (a private CA, a delegate's own check) or narrow it (pins).
public struct TLSSettings: Sendable, Hashable {
    /// PEM files of certificate authorities trusted on top of the system's (a private resolver or
    /// origin); loaded when the `HTTPDNS` is made.
    public var trustedCertificateFiles: [String] = []
    /// Public-key pins: host to the base64 SHA-256 of a certificate's SubjectPublicKeyInfo. A host
    /// listed here connects only when one of its keys matches the key of a certificate of the verified
    /// chain: the server's own, an intermediate's or the CA's, as TrustKit and `NSPinnedDomains` pin
    /// (on top of the normal verification; of a chain only the app's delegate accepted, the server's
    /// own key alone counts).
    public var pins: [String: Set<String>] = [:]
    /// When the app's URLSession delegate is asked about an origin's certificate: once for every new
    /// TLS connection, as Apple's URLSession does (the default), or only when our check refuses it. Its
    /// answer is honoured as the system stack would (see `HTTPDNSServerTrustSpace`); HTTP 401 and proxy
    /// 407 challenges always go to the delegate.
    public var serverTrustChallenges = ServerTrustChallenges.always

    /// The system's trust, no pins, the delegate asked once per new connection.
    public init() {}
}

/// When a URLSession delegate is asked about an origin's certificate.
public enum ServerTrustChallenges: Sendable, Hashable {
    /// Only when our check refuses it (an untrusted CA, a name mismatch): the delegate may accept it (a
    /// private CA), and a delegate that never answers about server trust costs nothing. A delegate that
    /// pins certificates is then skipped for every server our check trusts: choose this only when no
    /// delegate of the app's pins.
    case whenOurCheckFails
    /// For every new TLS connection, as Apple's URLSession does (the default): the delegate sees every
    /// chain, so its pinning runs (Alamofire's `ServerTrustManager`, TrustKit, an app's own). Such
    /// connections serve only that session's requests (on Apple platforms, those of the sessions made
    /// from one enabled configuration), and are reused by them: one question per connection. A delegate
    /// that does not implement the challenge answers with the default handling, which keeps our
    /// verdict; the cost is a hop to the delegate queue per new connection.
    case always
}

/// The device's network as the library sees it: following its changes, which networks connections may
/// use, and the proxy they go through.
public struct NetworkSettings: Sendable {
    /// Follow the device's network by itself (the default): which address families have a route,
    /// the NAT64 prefix of an IPv6-only network, and changes of network, from the operating
    /// system's notices (rtnetlink on Linux, `NWPathMonitor` on Apple platforms). On a change the
    /// cache switches to the new network's answers, pooled connections are retired and the names in
    /// use are resolved again in the background. Off: the app tells changes with
    /// `HTTPDNS.networkChanged(to:)`.
    public var watchesChanges: Bool {
        get { monitor.watch }
        set { monitor.watch = newValue }
    }
    /// The networks the library's connections may use, its lookups' and the app's requests' alike:
    /// cellular, expensive (a personal hotspot) and constrained (Low Data Mode) networks. On Apple
    /// platforms Network.framework honours it for each connection, and a URLSession request narrows it
    /// further by its session's and its own rules (`allowsCellularAccess` and the like). Linux's
    /// sockets cannot honour it: there it only keeps connections made under other rules apart.
    public var access = NetworkAccess.unrestricted
    /// HTTP proxies every connection goes through (the app's requests and the DoH/HTTPDNS queries
    /// alike), by CONNECT tunnels to the addresses HTTPDNS gave; TLS, SNI and the certificate check
    /// stay end to end on the hostname. Nil (the default): no proxy. `HTTPProxySettings.environment()`
    /// reads curl's `https_proxy`, `http_proxy`, `all_proxy` and `no_proxy`. Classic DNS resolvers
    /// (`dns:`, `system`) do not go through it.
    public var proxy: HTTPProxySettings?
    /// Active probing of a name's addresses (as Tencent's and Alibaba's SDKs' IP ranking does): nil (the
    /// default) is off, and connects rank addresses by how earlier connects went, racing them as RFC 8305
    /// says. See `AddressProbing`.
    public var probing: AddressProbing?
    /// TCP Fast Open (RFC 7413) for the connections HTTPDNS opens, the resolver's and the app's: off by
    /// default. To a server seen before (whose cookie the system kept, across launches), the TLS
    /// ClientHello rides in the SYN, so a new connection's TLS 1.3 handshake ends one round trip
    /// earlier: a relaunch that connects on a persisted answer reaches its first byte in 2 round trips
    /// instead of 3. Only the ClientHello is sent early, never request data (no TLS early data, which a
    /// network attacker could replay). The first connection to a server, and every connection to one
    /// that does not offer fast open, is an ordinary one.
    ///
    /// Opt-in because networks exist that drop SYNs carrying data (the system then turns fast open off
    /// for a while by itself, Linux after one such loss), and because a deferred connect is reported
    /// as made before the server answers: happy eyeballs then races the TLS handshakes rather than the
    /// TCP connects. Linux: `TCP_FASTOPEN_CONNECT` (the client side is on in the kernel by default,
    /// `net.ipv4.tcp_fastopen` bit 1). Apple platforms: Network.framework's TCP fast open option.
    ///
    /// On Linux the ClientHello must fit in the SYN's one segment, so with fast open on the TLS key
    /// agreement offers the classical groups (X25519, P-256, P-384) and not the hybrid post-quantum
    /// X25519MLKEM768, whose key share alone is 1,216 bytes: the price of the saved round trip.
    public var tcpFastOpen = false
    /// The monitor's own settings (the app's network identifier at start, NAT64 discovery), given to
    /// it as they are.
    package var monitor = NetworkMonitor.Settings()

    /// Watch the network, any network allowed, no proxy.
    public init() {}
}

/// Active probing: when a name resolves to several addresses, each is connected to in the background,
/// in parallel (TCP, and the TLS handshake for https, with the real hostname and the certificate checked
/// as for a request), and later connects to the name try the fastest first. What a probe measures is
/// what a request's first byte waits for, per network: a network the device returns to keeps its results
/// for `lifetime`.
///
/// Probes run off the request path: a connect never waits for them. The first connect to a name starts
/// them and uses the ranking it already has; `HTTPDNS.preResolve(_:)` waits for them (their `timeout`
/// bounds each), so an app that pre-resolves at launch has its first requests ranked. A probe that cannot
/// connect puts its address last. Not through a proxy (the proxy connects, not the app).
public struct AddressProbing: Sendable, Hashable {
    /// The names to probe, as patterns (`api.example.com`, `*.example.com`); nil (the default) is every
    /// name the app connects to by its addresses.
    public var hosts: [String]?
    /// How long a probe's connect may take, and its TLS handshake again, before its address counts as
    /// unreachable. 2 s by default.
    public var timeout: Duration = .seconds(2)
    /// A name's addresses probed at most, in the order they would be tried. 4 by default.
    public var maxAddresses = 4
    /// How long a result stands for its address on its network before it is probed again. 10 min by
    /// default.
    public var lifetime: Duration = .seconds(600)

    /// Every name, 4 addresses each, 2 s per probe, results kept 10 min.
    ///
    /// - Parameter hosts: The names to probe, as patterns; nil (the default) for every name the app connects to
    ///   by its addresses.
    public init(hosts: [String]? = nil) {
        self.hosts = hosts
    }
}

/// How the app's requests speak HTTP. The resolvers' own connections always let ALPN choose.
public struct HTTPSettings: Sendable, Hashable {
    /// The HTTP versions the app's requests offer to https servers (the CLI's `--http1.1` /
    /// `--http2`).
    public var versions: HTTPVersionPolicy = .automatic
    /// HTTP/1.1 connections to one origin at most; further requests wait for one to be free. An
    /// HTTP/2 origin gets one connection and up to 100 concurrent streams on it. Below 1 counts as 1.
    /// 6 by default, URLSession's `httpMaximumConnectionsPerHost`: URLSession's requests and the
    /// engine's own share connections (a pre-connected one included) unless a session sets it lower.
    public var maxConnectionsPerHost = 6
    /// http:// hosts (patterns such as `api.example.com`, `*.example.com`) whose requests are sent
    /// over https instead, HTTP/2 when the server offers it (URLSession and the proxy).
    public var upgradeToHTTPS: [String] = []
    /// http:// hosts (patterns) kept on http even when known to serve https. Otherwise an http://
    /// request goes straight to https when its host asked for HSTS (RFC 6797: port 80 becomes 443,
    /// another port stays), kept from earlier https responses and saved with the resolver's cache, or
    /// when it has an HTTPS record at hand and the URL is on port 80 (RFC 9460 §9.5): the TCP connect
    /// to port 80 and the redirect the origin would answer are saved. The engine, `fetch` and the
    /// proxy apply it; the URLSession route where the system applies HSTS (Apple platforms).
    public var keepHTTP: [String] = []
    /// HTTP/2 without TLS to http:// URLs (the CLI's `--http2` on http://).
    package var http2PriorKnowledge = false
    /// Ask for an https origin's HTTPS records (RFC 9460) next to its addresses, where a resolver has a
    /// query for them (DoH, JSON DoH, `dns:`), and connect as they say: the endpoint's port, only the
    /// protocols it offers in ALPN, an alias's target's addresses, and its address hints when no
    /// address comes. The records' answer is waited for a little beyond the addresses' (a fifth of
    /// their lookup time, 50 ms at most), never a round trip more. On by default, as in browsers.
    public var usesHTTPSRecords = true

    /// ALPN's choice, 6 connections per host, no upgrade, HTTPS records used.
    public init() {}
}

/// Where spans go (swift-distributed-tracing) and whether requests carry the trace context.
public struct TracingSettings: Sendable {
    /// The tracer: a CLIENT span per request attempt with the lookup and connection in it, and a span
    /// per `HTTPDNSResolver.resolve(_:_:)` and `HTTPDNSResolver.compare(_:_:)` the app calls. Nil
    /// (the default): the tracer bootstrapped in `InstrumentationSystem` when the `HTTPDNS` is made,
    /// so bootstrap first. With none bootstrapped, or `NoOpTracer()` here, there are no spans and
    /// nothing is paid for them.
    public var tracer: (any Tracer)?
    /// Put the request span's trace context into each request's headers (W3C `traceparent` with an
    /// OpenTelemetry tracer), so the server's spans join the app's trace. Off by default: it tells
    /// every origin the app's trace IDs.
    public var propagatesContext = false

    /// The bootstrapped tracer, no context in requests.
    public init() {}
}
