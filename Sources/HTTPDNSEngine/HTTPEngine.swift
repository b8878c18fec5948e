// The HTTP engine: every HTTP exchange of the project goes through this type, the resolver's own DoH
// and JSON queries included (`HTTPDNS` owns two instances of it: one for the app's requests, resolving
// through HTTPDNS, and one for the resolver's queries, which connect to configured addresses).
//
// "Who we talk to" and "where we connect" are kept apart: the request URL keeps the real host (TLS SNI,
// certificate check, Host / :authority); the socket address comes from an AddressSource (the resolver)
// at connect time, ranked by how earlier connects to each address went. Verification is never off.
//
// A request: lease a connection from the pool (an idle one of the same key is reused with no lookup; a
// new one asks the AddressSource for addresses at connect time and races them) → run the exchange on it
// (HTTP/1.1) or on a new stream (HTTP/2) → hand back the response with its body still streaming. The
// connection returns to the pool when the body has been read to the end.

import HTTPDNSCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// Sends HTTP requests to addresses from an `AddressSource` while speaking to the real hostname.
///
/// Thread-safe; share one instance. Call `shutdown()` to close pooled connections.
public final class HTTPEngine: Sendable {
    package let configuration: Configuration
    package let group: any EventLoopGroup
    let logger: Logger
    let addressSource: (any AddressSource)?
    /// `configuration.http.keepHTTP`, parsed.
    let keepHTTP: [HostPattern]
    /// The address source keeps HSTS (asked once: a request then pays one load for it).
    let keepsStrictTransportSecurity: Bool
    let pool: ConnectionPool
    let factory: ConnectionFactory
    let metrics = EngineMetrics()
    /// Whether requests are traced (`configuration.tracing`), as a flag: the request path tests it, as
    /// copying the optional tracer out to test it cost every request a little.
    let isTraced: Bool
    /// The network path: where IPv4 is reached through NAT64, IPv4 addresses are connected to through
    /// their synthesized IPv6 form; when it changes, pooled connections are retired.
    package let path: NetworkPath

    /// - Parameters:
    ///   - addressSource: where host names are resolved at connect time (the HTTPDNS resolver). Without
    ///     one, names go to getaddrinfo; IP-literal URLs never need one.
    ///   - path: the network path to connect on (the one the resolver's monitor keeps current); by
    ///     default one that stays unprobed (addresses used as they are).
    package init(
        configuration: Configuration = Configuration(),
        addressSource: (any AddressSource)? = nil,
        path: NetworkPath? = nil,
        eventLoopGroup: any EventLoopGroup = HTTPEngine.defaultEventLoopGroup,
        logger: Logger = Logger(label: "httpdns.engine")
    ) throws {
        self.configuration = configuration
        self.isTraced = configuration.tracing != nil
        self.addressSource = addressSource
        self.path = path ?? NetworkPath()
        self.group = eventLoopGroup
        self.logger = logger
        let factory = try ConnectionFactory(
            configuration: configuration,
            addressSource: addressSource,
            path: self.path,
            group: eventLoopGroup
        )
        let limits = PoolStateMachine.Limits(
            maxConnectionsPerHost: configuration.http.maxConnectionsPerHost,
            maxConcurrentStreams: configuration.maxConcurrentStreams,
            idleTimeout: TimeAmount(configuration.idleConnectionTimeout)
        )
        self.keepHTTP = try configuration.http.keepHTTP.map(HostPattern.init)
        self.keepsStrictTransportSecurity = addressSource?.keepsStrictTransportSecurity ?? false
        self.factory = factory
        self.pool = ConnectionPool(limits: limits, group: eventLoopGroup) { job, deadline in
            try await factory.connect(job, deadline: deadline)
        }
        self.path.onChange { [weak pool] in pool?.retireConnections() }
        addressSource?.onAnswerChanged { [weak pool] host, family, addresses in
            pool?.answerChanged(host: host, family: family, addresses: addresses)
        }
    }

    /// An engine with default settings and extra trust roots.
    convenience init(
        tls: HTTPEngineTLS,
        addressSource: (any AddressSource)? = nil,
        logger: Logger = Logger(label: "httpdns.engine")
    ) throws {
        var configuration = Configuration()
        configuration.tls = tls
        try self.init(configuration: configuration, addressSource: addressSource, logger: logger)
    }

    /// A plain TCP connection to `host:port` for a CONNECT tunnel, made the way the engine makes its own
    /// (lookup through the address source, ranking, NAT64, happy eyeballs), on `loop`, within
    /// `timeout`. The proxy's tunnels use it. Throws `HTTPEngineError`.
    package func openTunnel(host: String, port: Int, on loop: any EventLoop, timeout: Duration) async throws
        -> any Channel
    {
        try await factory.tunnel(host: host, port: port, on: loop, timeout: timeout)
    }

    /// Closes every pooled connection. Requests started afterwards fail.
    package func shutdown() {
        pool.shutdown()
    }

    /// Connections open now.
    var openConnections: Int { pool.openConnections }

    /// One of the engine's event loops (the next, in turn). A task that prefers it through
    /// `EventLoopTaskExecutor` (`Task(executorPreference:)`, `withTaskExecutorPreference`; macOS 15 /
    /// iOS 18) sends its requests on connections of that loop and is resumed there when their answers
    /// arrive: no thread hop per request. Only for work that never blocks.
    package func nextEventLoop() -> any EventLoop {
        group.next()
    }

    // MARK: Requests

    /// Runs `operation` (one exchange) on `connection`'s event loop when the caller is elsewhere (Swift's
    /// default pool, the main actor): every future of the exchange completes on that loop, so the caller
    /// crosses threads twice, there and back, where waiting from the pool crossed at each step (issue
    /// 30: 5.3 context switches a request on the pool, 1.0 on the loop). Not with a request body that
    /// streams from the app (`HTTPRequestBody.stream`): that sequence is the app's code and may block,
    /// which must never happen on an event loop. Where the system has no task executors (before macOS 15
    /// / iOS 18) it runs where it was called.
    func onLoop<T>(
        of connection: Connection,
        unless body: HTTPRequestBody?,
        _ operation: () async throws -> T
    ) async throws -> T {
        let loop = connection.channel.eventLoop
        let appStream = if case .stream = body?.storage { true } else { false }
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), !appStream, !loop.inEventLoop {
            return try await withTaskExecutorPreference(EventLoopTaskExecutor(loop), operation: operation)
        }
        return try await operation()
    }

    /// Sends `request` and returns as soon as the response head has arrived; read `response.body` for
    /// the rest. Redirects are returned as they are (see `send(_:followRedirects:)`).
    ///
    /// - Parameters:
    ///   - terms: what the request's session narrows for its connections (a URLSession's, made by its
    ///     one factory, `Terms.forLoad`); the engine's defaults when empty.
    ///   - addresses: where to connect, instead of asking the address source (e.g. a resolver
    ///     endpoint's bootstrap IPs).
    package func execute(
        _ request: HTTPEngineRequest,
        terms: ConnectionProfile.Terms = .init(),
        addresses: ResolvedAddresses? = nil
    ) async throws -> HTTPEngineResponse {
        if addresses == nil, request.upgradesKnownHTTPSOrigins, let upgraded = httpsUpgrade(of: request.url) {
            var upgradedRequest = request
            upgradedRequest.url = upgraded
            return try await execute(upgradedRequest, terms: terms, addresses: nil)
        }
        let recorder = MetricsRecorder(url: request.url, traced: isTraced)
        var retries = ExchangeRetry.limit
        while true {
            do {
                let response =
                    isTraced
                    ? try await tracedAttempt(
                        request,
                        terms: terms,
                        addresses: addresses,
                        recorder: recorder,
                        retries: retries
                    )
                    : try await attempt(
                        request,
                        terms: terms,
                        addresses: addresses,
                        recorder: recorder,
                        retries: retries,
                        span: nil
                    )
                noteStrictTransportSecurity(of: response, under: terms)
                return response
            } catch let again as SendAgain {
                logger.debug("\(again.reason)", metadata: ["host": "\(request.url.host)"])
                retries -= 1
            } catch {
                recorder.finish(error: error)
                throw error
            }
        }
    }

    /// `url` on https when it is an http:// URL to a known https origin (HSTS, or an HTTPS record on
    /// port 80: `HTTPSettings.keepHTTP`); nil otherwise.
    func httpsUpgrade(of url: HTTPURL) -> HTTPURL? {
        guard keepsStrictTransportSecurity, url.scheme == "http", !url.hostIsIP,
            knownHTTPSOrigin(url.host, port: url.port)
        else { return nil }
        return HTTPURL(scheme: "https", host: url.host, port: url.port == 80 ? 443 : url.port, target: url.target)
    }

    /// Whether an http:// request to `host` on `port` goes to https: the host asked for HSTS, or it has
    /// an HTTPS record at hand and the port is 80, and `HTTPSettings.keepHTTP` does not keep it on http.
    package func knownHTTPSOrigin(_ host: String, port: Int) -> Bool {
        guard keepsStrictTransportSecurity, let source = addressSource else { return false }
        let name = normalizeHostname(host)
        return !keepHTTP.contains(where: { $0.matches(name) })
            && source.knownHTTPSOrigin(name, byRecords: port == 80 && configuration.http.usesHTTPSRecords)
    }

    /// Hands the source a Strict-Transport-Security policy an https response carried, unless the app's
    /// own trust decision let the connection through (RFC 6797 §8.1: only from a connection without
    /// certificate errors).
    private func noteStrictTransportSecurity(of response: HTTPEngineResponse, under terms: ConnectionProfile.Terms) {
        guard keepsStrictTransportSecurity, response.url.isTLS, terms.serverTrust == nil,
            let source = addressSource,
            let policy = response.headers.first(name: "strict-transport-security")
        else { return }
        source.strictTransportSecurity(policy, from: response.url.host)
    }

    /// `attempt` inside a CLIENT span of its own, which ends with the response's body or the failure.
    private func tracedAttempt(
        _ request: HTTPEngineRequest,
        terms: ConnectionProfile.Terms,
        addresses given: ResolvedAddresses?,
        recorder: MetricsRecorder,
        retries: Int
    ) async throws -> HTTPEngineResponse {
        var sent = request
        let span = AttemptSpan(configuration.tracing!, &sent)
        do {
            let response = try await attempt(
                sent,
                terms: terms,
                addresses: given,
                recorder: recorder,
                retries: retries,
                span: span
            )
            span.responded(response.status)
            recorder.endSpanWithBody(span)
            return response
        } catch let again as SendAgain {
            span.failed(again.cause)
            throw again
        } catch {
            span.failed(error)
            throw error
        }
    }

    /// One attempt at `request` on a leased connection; `span` is its span when traced. It throws
    /// `SendAgain` when the retry rule sends the request again on a new connection: `execute` makes
    /// that a new attempt, with a span of its own.
    private func attempt(
        _ request: HTTPEngineRequest,
        terms: ConnectionProfile.Terms,
        addresses given: ResolvedAddresses?,
        recorder: MetricsRecorder,
        retries: Int,
        span: AttemptSpan?
    ) async throws -> HTTPEngineResponse {
        let url = request.url
        let key = ConnectionProfile(of: request, terms: terms, given: given, configuration: configuration)
        let deadline = (request.timeout ?? configuration.timeouts.request).map {
            NIODeadline.now() + TimeAmount($0)
        }

        // The caller's loop when it runs on one of ours: a connection made for it is made there.
        let loop = group.any()
        let connection: Connection
        let reused: Bool
        let leaseStarted = ContinuousClock.now
        do {
            (connection, reused) = try await pool.lease(
                key,
                job: ConnectJob(profile: key, idleTimeout: request.idleTimeout, eventLoop: loop),
                deadline: deadline,
                eventLoop: loop
            )
        } catch let failed as ConnectAttemptFailed {
            if let lookup = failed.lookup {
                recorder.update {
                    $0.dnsSource = lookup.source
                    $0.dns = lookup.duration
                    $0.recordsWait = lookup.recordsWait
                }
            }
            throw failed.error
        }
        recorder.update {
            $0.reused = reused
            $0.ip = connection.remote.ipAddress
            $0.synthesizedFrom = connection.synthesizedFrom?.description
            $0.port = connection.remote.port
            $0.httpVersion = connection.version
            let leased = ContinuousClock.now - leaseStarted
            if reused {
                $0.stalled = leased
            } else {
                let lookup = connection.lookup
                $0.dnsSource = lookup.source
                $0.dns = lookup.duration
                $0.recordsWait = lookup.recordsWait
                $0.reasks = lookup.reasks
                $0.connect = connection.connectDuration
                $0.tls = connection.tlsDuration
                let phases = [lookup.duration, lookup.recordsWait, connection.connectDuration, connection.tlsDuration]
                $0.stalled = max(.zero, leased - phases.reduce(.zero) { $0 + ($1 ?? .zero) })
            }
        }
        if !reused { metrics.connected(connect: connection.connectDuration, tls: connection.tlsDuration) }
        if isTraced, let span, let tracer = configuration.tracing?.tracer {
            span.connected(connection, reused: reused, host: url.host, tracer: tracer)
        }
        // What the retry rule needs to know, read when the exchange has failed (a GOAWAY may have come
        // in meanwhile).
        func attempt() -> ExchangeRetry.Attempt {
            ExchangeRetry.Attempt(
                request: request,
                reused: reused,
                version: connection.version,
                goAwayReceived: connection.goAway?.wasReceived == true,
                retriesLeft: retries
            )
        }
        do {
            return try await onLoop(of: connection, unless: request.body) {
                try await exchange(request, on: connection, key: key, deadline: deadline, recorder: recorder)
            }
        } catch let error as HTTPEngineError
            where error.code == .protocolError && ExchangeRetry.sendAgain(after: .broken, attempt())
        {
            throw SendAgain(cause: error, reason: "retrying on a new connection")
        } catch let refused as StreamNotProcessed {
            guard ExchangeRetry.sendAgain(after: .neverProcessed, attempt()) else { throw refused.error }
            throw SendAgain(cause: refused.error, reason: "retrying a stream the server never processed")
        }
    }
}

extension HTTPEngine {
    /// Opens a connection to `url`'s origin (scheme, host, port) and completes its TLS handshake ahead of
    /// the first request, which then runs on it: the app pays the lookup, TCP and TLS round trips before
    /// the user waits. The connection is pooled like any other (closed by the idle timeout if no request
    /// comes, opened again after a network change while it is in use). It serves requests with the
    /// engine's defaults: not one whose app evaluates the server's certificate itself, sends its own
    /// proxy credentials or narrows the network rules. Returns at once when a connection to the origin is
    /// open or on its way. `given`: the addresses to connect to, as a request sent with them names them
    /// (a resolver's bootstrap addresses): the connection is the one such requests use. Throws the
    /// connect's `HTTPEngineError`.
    package func preconnect(_ url: HTTPURL, addresses given: ResolvedAddresses? = nil) async throws {
        let key = ConnectionProfile(
            of: HTTPEngineRequest(url: url),
            terms: .init(),
            given: given,
            configuration: configuration
        )
        try await pool.preconnect(key, job: ConnectJob(profile: key, idleTimeout: nil, eventLoop: group.any()))
    }
}

extension HTTPEngine {
    /// Resolves `url`'s host and waits for active probes of its addresses (`NetworkSettings.probing`),
    /// so the next connect to it tries the fastest first. Returns at once when probing is off or does not
    /// cover the host, or the name does not resolve.
    package func probe(_ url: HTTPURL) async {
        await factory.probe(url)
    }
}

/// An attempt's answer when the retry rule (`ExchangeRetry`) sends the request again on a new
/// connection: the attempt has ended with `cause`, and `execute` makes the next one.
private struct SendAgain: Error {
    var cause: any Error
    var reason: String
}
