// The engine's one way to a connection, carried out by the pool whenever its machine asks for one:
// resolve (the address source, at connect time) → rank (how earlier connects to each address went) →
// NAT64 (synthesize where IPv4 has no route) → happy eyeballs over the ranked addresses → TLS with the
// real hostname as SNI and certificate name → learn from the outcome (the ranker).
//
// A connect belongs to the pool, not to one request: it is bounded by the connect and TLS timeouts and
// by the latest deadline among the host's waiters, and it goes on when the request that caused it gives
// up. Its failures say whether a second try may help (`ConnectAttemptFailed.retryMayHelp`).

import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Tracing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One connect the pool asks for: the profile of the waiting request it is for (or of a pre-connect),
/// and what is that request's own: its bound on silence, which also bounds the connect and TLS
/// handshake, and the loop the connection lives on (the requesting caller's own when it runs on one of
/// the engine's loops, so its exchanges cost no thread hop).
struct ConnectJob: Sendable {
    var profile: ConnectionProfile
    var idleTimeout: Duration?
    var eventLoop: any EventLoop
}

/// How a connection's address was found, for the metrics of the first request on it.
struct AddressLookup: Sendable {
    /// `literal`, `system`, or who answered (a resolver's source, the cache, configured addresses).
    var source: ResolutionSource
    /// How long the lookup took; nil when none ran.
    var duration: Duration?
    /// When the lookup started, on the wall clock spans are stamped with (the resolve span's start).
    var startedAt = DefaultTracerClock.now
    /// How long the connect then waited for the origin's HTTPS records (nil: it did not wait).
    var recordsWait: Duration?
    /// Other addresses the connect asked for when these failed or stayed silent (ConnectFailover).
    var reasks: [AddressReask] = []
}

/// A failed connect: the engine's error, and how the address was found before it failed (the request's
/// metrics show the lookup of a connect that then failed).
struct ConnectAttemptFailed: Error {
    var error: any Error
    var lookup: AddressLookup?

    /// Whether trying the same connect again may succeed: a reset, a close or a timeout during the TCP or
    /// TLS handshake, or a connect that ran out of its waiters' time (a waiter that came later, with a
    /// later deadline, gets a connect of its own). Not a certificate or pin verdict, a TLS alert, a name
    /// that did not resolve, a host with no address, or a connection refused at every address (the host
    /// answered: nothing listens there).
    static func retryMayHelp(_ error: any Error) -> Bool {
        guard let error = error as? HTTPEngineError else { return false }
        switch error.code {
        case .connectTimeout, .tlsHandshakeTimeout, .protocolError, .totalTimeout:
            return true
        case .connectFailed:
            if error.underlying is ProxyRefusal { return false }  // the proxy's answer would be the same
            return !refusedEverywhere(error.underlying)
        case .tlsFailed:
            return PlatformTransport.tlsRetryMayHelp(error.underlying)
        default:
            return false
        }
    }

    private static func refusedEverywhere(_ error: (any Error)?) -> Bool {
        func refused(_ error: any Error) -> Bool { (error as? IOError)?.errnoCode == ECONNREFUSED }
        if let multiple = error as? NIOConnectionError {
            return !multiple.connectionErrors.isEmpty && multiple.connectionErrors.allSatisfy { refused($0.error) }
        }
        if let race = error as? HappyEyeballsFailure {
            return !race.errors.isEmpty && race.errors.allSatisfy { refused($0.error) }
        }
        return error.map(refused) ?? false
    }
}

/// Opens connections for the engine's pool (see the file comment), through this platform's transport.
/// Thread-safe.
struct ConnectionFactory: Sendable {
    let configuration: HTTPEngine.Configuration
    /// The stack connections go through, chosen once from the event loop group (ConnectionTransport.swift).
    let transport: any ConnectionTransport
    let addressSource: (any AddressSource)?
    let path: NetworkPath
    let group: any EventLoopGroup
    let ranker = NIOLockedValueBox(AddressRanker())
    /// Hosts whose IPv6 failed lately, per network: their connects start with IPv4.
    let families = NIOLockedValueBox(FamilyMemory())
    /// Active probing, when the configuration turns it on (AddressProber.swift).
    let prober: AddressProber?
    let clock = SystemWallClock()

    /// Sets up the transport once; throws when the trust roots cannot be used.
    init(
        configuration: HTTPEngine.Configuration,
        addressSource: (any AddressSource)?,
        path: NetworkPath,
        group: any EventLoopGroup
    ) throws {
        self.configuration = configuration
        let transport = try PlatformTransport(configuration: configuration)
        self.transport = transport
        self.addressSource = addressSource
        self.path = path
        self.group = group
        self.prober = try configuration.network.probing.map { settings in
            try AddressProber(settings) { url, address in
                await Self.probe(
                    url,
                    at: address,
                    settings: settings,
                    configuration: configuration,
                    transport: transport,
                    group: group
                )
            }
        }
    }

    /// A connection for `job`, given up at `deadline`. Throws `ConnectAttemptFailed`.
    func connect(_ job: ConnectJob, deadline: NIODeadline?) async throws -> Connection {
        var lookup: AddressLookup?
        do {
            let url = job.profile.origin
            let proxy = configuration.network.proxy?.proxy(scheme: url.scheme, host: url.host)?.with(
                job.profile.proxyCredentials
            )
            let proxyResolves = configuration.network.proxy?.proxyResolvesNames == true
            // Through a proxy that resolves, or to an IP literal: the tunnel names the host as given.
            if let proxy, job.profile.given == nil, proxyResolves || IPAddress(url.host) != nil {
                let named = AddressLookup(source: proxyResolves ? .proxy : .literal)
                lookup = named
                let target = formatAuthority(host: url.host, port: url.port)
                return try await connect(
                    job,
                    addresses: nil,
                    lookup: named,
                    deadline: deadline,
                    proxy: (proxy, [target])
                )
            }
            if proxy == nil, let source = recordsSource(for: job) {
                return try await connectByRecords(job, source: source, deadline: deadline, lookup: &lookup)
            }
            let (addresses, found) = try await self.addresses(
                for: url.host,
                given: job.profile.given,
                deadline: deadline,
                probing: proxy == nil ? url : nil
            )
            lookup = found
            guard let proxy else {
                return try await connectFromSource(job, addresses: addresses, lookup: found, deadline: deadline)
            }
            // Through a proxy: a tunnel to each address HTTPDNS gave, the originals rather than their NAT64
            // forms (the proxy connects, from its own network).
            var targets: [String] = []
            for ip in interleavedIPv6First(ipv4: addresses?.ipv4 ?? [], ipv6: addresses?.ipv6 ?? []) {
                let target = formatAuthority(host: (addresses?.synthesized[ip] ?? ip).description, port: url.port)
                if !targets.contains(target) { targets.append(target) }
            }
            guard !targets.isEmpty else {
                throw HTTPEngineError(.noAddresses, "no address to connect to for \(url.host)")
            }
            return try await connect(
                job,
                addresses: addresses,
                lookup: found,
                deadline: deadline,
                proxy: (proxy, targets)
            )
        } catch {
            throw ConnectAttemptFailed(error: error, lookup: lookup)
        }
    }

    /// The source to ask for the origin's HTTPS records, when `job` is one they apply to (see
    /// ServiceEndpoint.swift): an https origin on its default port, by name, its addresses not given.
    private func recordsSource(for job: ConnectJob) -> (any AddressSource)? {
        guard configuration.http.usesHTTPSRecords, job.profile.origin.isTLS, job.profile.origin.port == 443,
            job.profile.given == nil,
            IPAddress(job.profile.origin.host) == nil, let source = addressSource, source.answersServiceBindings
        else { return nil }
        return source
    }

    /// Connects as the origin's HTTPS records say (ServiceEndpoint.swift): they are asked next to the
    /// addresses and waited for a little beyond them; without a usable record, as if there were none.
    private func connectByRecords(
        _ job: ConnectJob,
        source: any AddressSource,
        deadline: NIODeadline?,
        lookup: inout AddressLookup?
    ) async throws -> Connection {
        let url = job.profile.origin
        let cached = source.cachedServiceBindings(for: url.host)
        let records =
            cached == nil ? Task { try? await source.serviceBindings(for: url.host, deadline: deadline) } : nil
        let started = ContinuousClock.now
        let found: Result<(ResolvedAddresses?, AddressLookup), any Error>
        do {
            found = .success(try await addresses(for: url.host, given: nil, deadline: deadline, probing: url))
        } catch {
            found = .failure(error)
        }
        var bindings = cached
        var waited: Duration?
        if let records {
            let source = (try? found.get())?.1.source
            let wait = ServiceEndpoint.recordsWait(addressesFrom: source, lookupTook: .now - started)
            // The records' query runs on when not waited for: its answer is cached for the next connect.
            if wait > .zero {
                let waitStarted = ContinuousClock.now
                bindings = await Self.value(of: records, within: wait)
                waited = .now - waitStarted
            } else {
                bindings = nil
            }
        }
        guard let bindings,
            let endpoint = ServiceEndpoint.choose(bindings, port: url.port, versions: job.profile.versions)
        else {
            var (addresses, own) = try found.get()
            own.recordsWait = waited
            lookup = own
            return try await connectFromSource(job, addresses: addresses, lookup: own, deadline: deadline)
        }
        // An alias's target: its own addresses (a round trip the alias costs).
        let addressed: Result<(ResolvedAddresses?, AddressLookup), any Error>
        if endpoint.addressName == url.host {
            addressed = found
        } else {
            do {
                addressed = .success(try await addresses(for: endpoint.addressName, given: nil, deadline: deadline))
            } catch {
                addressed = .failure(error)
            }
        }
        var (addresses, own): (ResolvedAddresses?, AddressLookup)
        switch addressed {
        case .success(let pair) where pair.0.map { !$0.ipv4.isEmpty || !$0.ipv6.isEmpty } ?? false:
            (addresses, own) = pair
        case _ where !endpoint.hints.isEmpty:
            // No address came (or none at all): the record's hints stand in.
            let hinted = ResolvedAddresses(
                ipv4: endpoint.hints.filter { !$0.isIPv6 },
                ipv6: endpoint.hints.filter(\.isIPv6),
                source: bindings.source
            )
            (addresses, own) = (await path.connectable(hinted), AddressLookup(source: bindings.source))
        default:
            (addresses, own) = try addressed.get()
        }
        own.recordsWait = waited
        lookup = own
        var via = job
        via.profile.versions = endpoint.versions
        // The origin's own endpoint (its addresses on the URL's port) is the fallback (RFC 9460 §3), unless
        // it is the record's endpoint: it joins the race when the record's fails, or has not connected
        // within `recordsFallbackDelay` (a blackholed record port would otherwise cost the connect
        // timeout).
        guard endpoint.port != url.port || endpoint.addressName != url.host,
            case .success((let origin?, var fallen)) = found, !(origin.ipv4.isEmpty && origin.ipv6.isEmpty)
        else {
            return try await connectFromSource(
                via,
                addresses: addresses,
                lookup: own,
                deadline: deadline,
                port: endpoint.port
            )
        }
        fallen.recordsWait = waited
        let (record, originLookup, recordJob, byRecord, recordPort) = (own, fallen, via, addresses, endpoint.port)
        return try await Self.race(after: Self.recordsFallbackDelay) {
            try await self.connectFromSource(
                recordJob,
                addresses: byRecord,
                lookup: record,
                deadline: deadline,
                port: recordPort
            )
        } or: {
            try await self.connectFromSource(job, addresses: origin, lookup: originLookup, deadline: deadline)
        }
    }

    /// How long an HTTPS record's endpoint has to connect before the origin's own joins the race.
    static let recordsFallbackDelay = Duration.seconds(1)

    /// A connection to `addresses`: through ConnectFailover's rules when the address source gave them
    /// (HTTPDNS, its cache), straight otherwise.
    private func connectFromSource(
        _ job: ConnectJob,
        addresses: ResolvedAddresses?,
        lookup: AddressLookup,
        deadline: NIODeadline?,
        port: Int? = nil
    ) async throws -> Connection {
        guard let addresses, let source = addressSource, job.profile.given == nil, lookup.source.isHTTPDNS else {
            return try await connect(job, addresses: addresses, lookup: lookup, deadline: deadline, port: port)
        }
        return try await connectFailingOver(
            job,
            addresses: addresses,
            source: source,
            lookup: lookup,
            deadline: deadline,
            port: port
        )
    }

    /// `task`'s value if it comes within `limit`; nil otherwise, at `limit`, whether or not the task is
    /// done (it runs on: its answer is cached for the next connect). A race on a continuation resumed
    /// once: awaiting an unstructured task's value does not end when the waiter is cancelled, so a task
    /// group would wait for the whole lookup.
    static func value<T: Sendable>(of task: Task<T?, Never>, within limit: Duration) async -> T? {
        let result = NIOLockedValueBox<CheckedContinuation<T?, Never>?>(nil)
        let resume: @Sendable (T?) -> Void = { value in
            result.withLockedValue { continuation in
                continuation?.resume(returning: value)
                continuation = nil
            }
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            result.withLockedValue { $0 = continuation }
            Task { resume(await task.value) }
            Task {
                try? await Task.sleep(for: limit)
                resume(nil)
            }
        }
    }

    /// A plain TCP connection to `host:port` for a CONNECT tunnel: the same lookup, ranking, NAT64 and
    /// happy eyeballs as the engine's own connections, and the ranker learns from it; no TLS (the
    /// client speaks it through the tunnel), and a half-close from the target is passed on. Throws
    /// `HTTPEngineError`.
    func tunnel(host: String, port: Int, on loop: any EventLoop, timeout: Duration) async throws -> any Channel {
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let (addresses, _) = try await self.addresses(for: host, given: nil, deadline: deadline)
        let left = Duration(deadline - .now())
        guard left > .zero else { throw HTTPEngineError(.connectTimeout, "no time left to connect to \(host)") }
        let started = ContinuousClock.now
        do {
            let channel = try await transport.tunnel(
                host: host,
                port: port,
                addresses: addresses,
                access: configuration.network.access,
                on: loop,
                timeout: left
            )
            learn(winner: channel.remoteAddress, after: ContinuousClock.now - started, addresses: addresses, host: host)
            return channel
        } catch let error as HTTPEngineError {
            learn(from: error)
            throw error
        }
    }

    /// `host`'s addresses to connect to, ranked. `probing`: the origin whose addresses these are, for
    /// active probing (its results rank them, and the probes they still need start in the background);
    /// nil when they are not probed (a tunnel's, an alias target's, through a proxy).
    private func addresses(
        for host: String,
        given: ResolvedAddresses?,
        deadline: NIODeadline?,
        probing origin: HTTPURL? = nil
    ) async throws -> (ResolvedAddresses?, AddressLookup) {
        // An IP literal is connected to as it is, unless the caller names the addresses (a resolver
        // endpoint's service list, its literal kept as the TLS name).
        if let literal = IPAddress(host), given == nil {
            let lookup = AddressLookup(source: .literal)
            // An IPv4 literal on a network that reaches IPv4 only through NAT64: its synthesized form.
            guard !literal.isIPv6 else { return (nil, lookup) }
            let mapped = await path.connectable(ResolvedAddresses(ipv4: [literal], ipv6: [], source: .literal))
            return (mapped.synthesized.isEmpty ? nil : mapped, lookup)
        }
        let started = ContinuousClock.now
        let wallStart = DefaultTracerClock.now
        let found: ResolvedAddresses
        if let given {
            found = given
        } else if let addressSource {
            do {
                // The source ends the lookup by the request's deadline itself (the resolver leaves a
                // shared query at it): no timer or Task here.
                found = try await addressSource.addresses(for: host, deadline: deadline)
            } catch {
                var failure: HTTPEngineError
                if let error = error as? HTTPEngineError {
                    failure = error
                } else if let deadline, deadline <= .now() {
                    throw HTTPEngineError(
                        .totalTimeout,
                        "\(host): no address before the request's total timeout",
                        underlying: error
                    )
                } else {
                    // The resolver's text usually starts with the name already: say it once.
                    var reason = "\(error)"
                    if reason.hasPrefix(host + ": ") { reason.removeFirst(host.count + 2) }
                    failure = HTTPEngineError(
                        .nameNotResolved,
                        "could not resolve \(host): \(reason)",
                        underlying: error
                    )
                }
                if failure.code == .nameNotResolved, failure.networkUnavailable == nil {
                    failure.networkUnavailable = NetworkUnavailable.judge(
                        lookupFailure: failure.underlying ?? error,
                        stack: path.state.stack,
                        path: platformPathFacts.withLockedValue { $0 }
                    )
                }
                throw failure
            }
        } else {
            return (nil, AddressLookup(source: .system))  // NIO's getaddrinfo resolver, inside the connect
        }
        let network = path.state.id
        let probed = origin.flatMap { origin in
            prober.flatMap { prober in
                prober.covers(host) && !found.ordered ? (prober, origin) : nil
            }
        }
        let probes = probed.map { $0.outcomes(for: found.ipv4 + found.ipv6, port: $1.port, network: network) } ?? [:]
        let lookup = AddressLookup(
            source: found.source,
            duration: ContinuousClock.now - started,
            startedAt: wallStart
        )
        let connectable = await prepared(found, host: host, probes: probes)
        if let (prober, origin) = probed {
            prober.start(origin, addresses: connectable, network: network)
        }
        return (connectable, lookup)
    }

    /// `found`, `host`'s addresses, as a connect tries them: each family ranked (how earlier connects
    /// and `probes` went), IPv4 first where the host's IPv6 failed lately on this network, and the
    /// NAT64 forms where IPv4 has no route.
    func prepared(
        _ found: ResolvedAddresses,
        host: String,
        probes: [IPAddress: ProbeOutcome] = [:]
    ) async -> ResolvedAddresses {
        let now = clock.now()
        var ranked = found
        ranker.withLockedValue { r in
            ranked.ipv4 = r.rank(found.ipv4, now: now, keepOrder: found.ordered, probes: probes)
            ranked.ipv6 = r.rank(found.ipv6, now: now, keepOrder: found.ordered, probes: probes)
        }
        ranked.ipv4First = families.withLockedValue { $0.prefersIPv4(host, network: path.state.id, now: now) }
        return await path.connectable(ranked)
    }

    /// Resolves `url`'s host and waits for the probes of its addresses (AddressProber.swift), when
    /// probing covers it; at once otherwise, or when the name does not resolve. The probes start here,
    /// once, not in the lookup.
    func probe(_ url: HTTPURL) async {
        guard let prober, prober.covers(url.host),
            configuration.network.proxy?.proxy(scheme: url.scheme, host: url.host) == nil,
            case let (addresses?, _)? = try? await addresses(for: url.host, given: nil, deadline: nil)
        else { return }
        for batch in prober.start(url, addresses: addresses, network: path.state.id) {
            await batch.value
        }
    }

    /// One probe: a connection to `url`'s origin at the single address in `address` through `transport`,
    /// TLS included for https (the real hostname, the certificate checked), timed and closed.
    private static func probe(
        _ url: HTTPURL,
        at address: ResolvedAddresses,
        settings probing: AddressProbing,
        configuration: HTTPEngine.Configuration,
        transport: any ConnectionTransport,
        group: any EventLoopGroup
    ) async -> ProbeOutcome {
        let settings = Connection.Settings(
            versions: configuration.http.versions,
            pins: configuration.tls.pins[url.host],
            h2c: false,
            connectTimeout: probing.timeout,
            tlsTimeout: probing.timeout,
            networkAccess: configuration.network.access
        )
        do {
            let connection = try await Connection.establish(
                url: url,
                addresses: address,
                lookup: AddressLookup(source: address.source),
                settings: settings,
                on: group.any(),
                transport: transport
            )
            connection.channel.close(promise: nil)
            let time = connection.connectDuration + (connection.tlsDuration ?? .zero)
            return time <= probing.timeout ? .reached(time) : .unreachable
        } catch {
            return .unreachable
        }
    }

    func connect(
        _ job: ConnectJob,
        addresses: ResolvedAddresses?,
        lookup: AddressLookup,
        deadline: NIODeadline?,
        proxy: (proxy: HTTPProxy, targets: [String])? = nil,
        port: Int? = nil
    ) async throws -> Connection {
        let url = job.profile.origin
        let requested = job.idleTimeout
        var connectTimeout = requested.map { min($0, configuration.timeouts.connect) } ?? configuration.timeouts.connect
        if let deadline {
            let left = Duration(deadline - .now())
            guard left > .zero else { throw HTTPEngineError(.totalTimeout, "no time left to connect to \(url.host)") }
            connectTimeout = min(connectTimeout, left)
        }
        let settings = Connection.Settings(
            versions: job.profile.versions,
            pins: configuration.tls.pins[url.host],
            h2c: job.profile.h2c,
            connectTimeout: connectTimeout,
            tlsTimeout: requested.map { min($0, configuration.timeouts.tlsHandshake) }
                ?? configuration.timeouts.tlsHandshake,
            proxy: proxy?.proxy,
            tunnelTargets: proxy?.targets ?? [],
            serverTrust: job.profile.serverTrust,
            networkAccess: job.profile.networkAccess,
            tuning: job.profile.tuning,
            port: port
        )
        do {
            let connection = try await Connection.establish(
                url: url,
                addresses: addresses,
                lookup: lookup,
                settings: settings,
                on: job.eventLoop,
                transport: transport
            )
            // Through a proxy the remote is the proxy's address: nothing to learn about the origin's.
            if proxy == nil {
                learn(
                    winner: connection.remote,
                    after: connection.connectDuration,
                    addresses: addresses,
                    host: url.host
                )
            }
            return connection
        } catch let error as HTTPEngineError {
            if proxy == nil { learn(from: error) }
            // When the deadline was the shorter bound, that is the timeout to report.
            if let deadline, error.code == .connectTimeout || error.code == .tlsHandshakeTimeout,
                deadline <= .now()
            {
                throw HTTPEngineError(
                    .totalTimeout,
                    "\(url.host): the request's total timeout passed while connecting (\(error.message))",
                    underlying: error
                )
            }
            // An https URL with an IPv4 literal, reached through NAT64: the TLS library checks the
            // certificate against the address connected to (the synthesized one) and cannot be told
            // another. We fail closed rather than switch its check off; say why.
            if error.code == .certificateNameMismatch, IPAddress(url.host) != nil,
                addresses?.synthesized.isEmpty == false
            {
                throw HTTPEngineError(
                    error.code,
                    error.message
                        + " (reached through NAT64: the certificate is checked against the synthesized address connected to, which it does not name; use the hostname in the URL)",
                    attempts: error.attempts,
                    underlying: error.underlying
                )
            }
            throw error
        }
    }

    /// Feeds connect outcomes back to the ranker. Either transport's race (NIO's connector on Linux,
    /// HappyEyeballsRace on Apple platforms) reports the winner only; the addresses tried before it (in
    /// the same IPv6-first interleaved order) either failed or were too slow, and are counted as failures.
    private func learn(
        winner remote: SocketAddress?,
        after connectTime: Duration,
        addresses: ResolvedAddresses?,
        host: String
    ) {
        guard let addresses, let winner = remote?.httpdnsIP else { return }
        let now = clock.now()
        let before = Array(addresses.connectOrder.prefix(while: { $0 != winner }))
        ranker.withLockedValue { r in
            for ip in before { r.recordFailure(ip, now: now) }
            r.recordSuccess(winner, connectTime: connectTime, now: now)
        }
        families.withLockedValue {
            $0.connected(host, network: path.state.id, winner: winner, triedBefore: before, now: now)
        }
    }

    private func learn(from error: HTTPEngineError) {
        let now = clock.now()
        // Attempts name their address as `ip:port`, IPv6 in brackets.
        let failed = error.attempts.compactMap { splitHostPort($0.address[...]).flatMap { IPAddress($0.host) } }
        ranker.withLockedValue { r in failed.forEach { r.recordFailure($0, now: now) } }
    }
}
