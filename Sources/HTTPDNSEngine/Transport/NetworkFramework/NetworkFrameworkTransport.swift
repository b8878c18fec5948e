// The transport on Apple platforms: Network.framework through NIOTransportServices, TLS by the system.
// COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE. The rules it follows are the ones the
// Linux tests prove: the race over our addresses (HappyEyeballsSchedule/Race, HappyEyeballsTests), the
// Security framework's verdict as our error codes and the question to the app (SystemTrustVerdict,
// ServerTrustEvaluation, PlatformTrustRulesTests), pins from the certificate's DER (PublicKeyPin), the
// network rules (NetworkAccess, NetworkAccessTests).
//
// IP-direct as on Linux: each attempt is an NWConnection to one address our resolver chose, raced in
// our ranked order. TLS: SNI is the hostname (never an IP), ALPN h2 and http/1.1, and the chain is judged
// in the handshake's verify block by a SecTrust with the SSL policy for the hostname and the configured
// extra anchors (ApplePlatformTrust.judge). A rejection fails the handshake and becomes our error code
// from the Security framework's status, unless the app decides on failures (a URLSession delegate):
// then the handshake completes and the app is asked right after it, before any request byte, as on
// Linux. NWParameters carry the network rules; `waitForActivity` is off, so an attempt with no usable
// path fails and the next address is tried instead of waiting for connectivity.
//
// Not here: https through an HTTP proxy of `HTTPDNS.Configuration.network.proxy`. The system runs TLS beneath
// NIO's pipeline, so it cannot start inside a CONNECT tunnel the pipeline opened; such a request fails
// with a clear error (plain http through the proxy works). A proxy in the system's settings never gets
// here: the URLSession integration leaves those requests to the system.

#if canImport(Network)
    import Dispatch
    import Foundation
    import HTTPDNSCore
    import Network
    import NIOConcurrencyHelpers
    import NIOCore
    import NIOTLS
    import NIOTransportServices
    @preconcurrency import Security

    /// Network.framework and the system's TLS (see the file comment).
    struct NetworkFrameworkTransport: ConnectionTransport {
        static var kind: ConnectionTransportKind { .networkFramework }
        static var defaultEventLoopGroup: any EventLoopGroup { NIOTSEventLoopGroup.singleton }

        private let additionalRoots: [[UInt8]]
        /// `NetworkSettings.tcpFastOpen`.
        private let tcpFastOpen: Bool
        /// Where the verify blocks run (the Security framework calls back on it).
        private let verifyQueue = DispatchQueue(label: "httpdns.tls-verify")
        /// Which origins' connections may resume a TLS session (TLSResumption).
        private let resumption = NIOLockedValueBox(TLSResumption())

        init(configuration: HTTPEngine.Configuration) throws {
            additionalRoots = configuration.tls.additionalTrustRoots.map(\.der)
            tcpFastOpen = configuration.network.tcpFastOpen
        }

        func attempt(
            url: HTTPURL,
            addresses: ResolvedAddresses?,
            lookup: AddressLookup,
            settings: Connection.Settings,
            on eventLoop: any EventLoop,
            via: (proxy: HTTPProxy, target: String)?
        ) async throws -> Connection {
            if let via, url.isTLS {
                throw HTTPEngineError(
                    .connectFailed,
                    "https to \(url.host) through the HTTP proxy \(via.proxy) is not available on Apple platforms: the system runs TLS and cannot start it inside a CONNECT tunnel; leave HTTPDNS.Configuration.network.proxy unset for https hosts (the system's own proxy settings are honoured by leaving such requests to URLSession)"
                )
            }
            let tls = url.isTLS
            let timeout = settings.connectTimeout + (tls ? settings.tlsTimeout : .zero)
            let targets = try Self.targets(url: url, port: settings.port ?? url.port, addresses: addresses, via: via)
            let started = ContinuousClock.now
            let opened = NIOLockedValueBox<[Int: any Channel]>([:])
            let probes = NIOLockedValueBox<[Int: any Channel]>([:])
            // TCP and TLS are one step here: TCP races TCP (probes beside and before whole attempts), so
            // a second TLS handshake starts only once its TCP has won (HappyEyeballsSchedule.probesFirst).
            let probe: (@Sendable (Int) -> EventLoopFuture<Void>)? =
                tls && targets.count > 1
                ? { @Sendable index in
                    Self.probe(
                        targets[index],
                        access: settings.networkAccess,
                        timeout: timeout,
                        on: eventLoop
                    ) { channel in probes.withLockedValue { $0[index] = channel } }
                }
                : nil
            let established = try await Self.race(
                count: targets.count,
                timeout: timeout,
                on: eventLoop,
                probe: probe,
                attempt: { index in
                    self.openResuming(
                        targets[index],
                        url: url,
                        settings: settings,
                        via: via,
                        timeout: timeout,
                        on: eventLoop
                    ) { channel in opened.withLockedValue { $0[index] = channel } }
                },
                cancel: { index in
                    opened.withLockedValue { $0[index] }?.close(promise: nil)
                    probes.withLockedValue { $0[index] }?.close(promise: nil)
                },
                explain: {
                    Self.lostRace(
                        $0,
                        targets: targets,
                        host: url.host,
                        port: settings.port ?? url.port,
                        timeout: timeout,
                        access: settings.networkAccess
                    )
                }
            )
            guard let ready = established.ready else {  // an attempt of `open` always has one
                established.channel.close(promise: nil)
                throw HTTPEngineError(.protocolError, "connection to \(url.host) was set up without its HTTP handlers")
            }
            return Connection(
                channel: established.channel,
                ready: ready,
                remote: established.remote,
                synthesizedFrom: established.remote.httpdnsIP.flatMap { addresses?.synthesized[$0] },
                lookup: lookup,
                // The system does TCP and TLS as one step: the time to the first usable byte.
                connect: established.at - started,
                tls: nil
            )
        }

        func tunnel(
            host: String,
            port: Int,
            addresses: ResolvedAddresses?,
            access: NetworkAccess,
            on loop: any EventLoop,
            timeout: Duration
        ) async throws -> any Channel {
            let url = HTTPURL(scheme: "http", host: host, port: port)
            let targets = try Self.targets(url: url, port: port, addresses: addresses, via: nil)
            let opened = NIOLockedValueBox<[Int: any Channel]>([:])
            let established = try await Self.race(
                count: targets.count,
                timeout: timeout,
                on: loop,
                attempt: { index in
                    Self.connectTCP(
                        targets[index],
                        access: access,
                        timeout: timeout,
                        on: loop,
                        halfClosure: true
                    ) { channel in opened.withLockedValue { $0[index] = channel } }
                    .map { Established(channel: $0.channel, ready: nil, remote: $0.remote, at: .now) }
                },
                cancel: { index in opened.withLockedValue { $0[index] }?.close(promise: nil) },
                explain: {
                    Self.lostRace($0, targets: targets, host: host, port: port, timeout: timeout, access: access)
                }
            )
            return established.channel
        }

        static func tlsRetryMayHelp(_ underlying: (any Error)?) -> Bool {
            // The system's own verdict (an alert, a refused chain) would come again; a reset or a close
            // mid-handshake may not.
            guard let error = underlying as? NWError else { return true }
            if case .tls = error { return false }
            return true
        }

        static func describeTLSError(_ error: any Error, host: String, address: String, chainRejected: Bool)
            -> HTTPEngineError?
        {
            guard let error = error as? NWError, case .tls(let status) = error else { return nil }
            if chainRejected { return untrustedCertificate(host: host, address: address, underlying: error) }
            return HTTPEngineError(
                .tlsFailed,
                "TLS handshake with \(host) at \(address) failed: Security framework status \(status)",
                underlying: error
            )
        }

        // MARK: one attempt

        /// Where one attempt goes: an address, or a proxy named by hostname (the system resolves it).
        private enum Target: Sendable {
            case address(SocketAddress)
            case name(String, Int)

            /// As attempts are named in errors (`ip:port`, IPv6 in brackets).
            var text: String {
                switch self {
                case .address(let address): describe(address)
                case .name(let host, let port): formatAuthority(host: host, port: port)
                }
            }
        }

        private struct Established: Sendable {
            var channel: any Channel
            var ready: Connection.Ready?
            var remote: SocketAddress
            var at: ContinuousClock.Instant
        }

        private static func targets(
            url: HTTPURL,
            port: Int,
            addresses: ResolvedAddresses?,
            via: (proxy: HTTPProxy, target: String)?
        ) throws -> [Target] {
            if let via {
                if let ip = IPAddress(via.proxy.host) { return [.address(try SocketAddress(ip, port: via.proxy.port))] }
                return [.name(via.proxy.host, via.proxy.port)]
            }
            guard let addresses else {
                guard let ip = IPAddress(url.host) else {
                    throw HTTPEngineError(.noAddresses, "no address to connect to for \(url.host)")
                }
                return [.address(try SocketAddress(ip, port: port))]
            }
            let ordered = addresses.connectOrder
            guard !ordered.isEmpty else {
                throw HTTPEngineError(.noAddresses, "no address to connect to for \(url.host)")
            }
            return try ordered.map { .address(try SocketAddress($0, port: port)) }
        }

        /// `open`, with TLS session resumption as `TLSResumption` allows for the origin, and made again
        /// at once with a full handshake when a resumed session had no chain to judge.
        private func openResuming(
            _ target: Target,
            url: HTTPURL,
            settings: Connection.Settings,
            via: (proxy: HTTPProxy, target: String)?,
            timeout: Duration,
            on loop: any EventLoop,
            noteChannel: @escaping @Sendable (any Channel) -> Void
        ) -> EventLoopFuture<Established> {
            let origin = "\(url.host):\(url.port)"
            let resumption = self.resumption
            @Sendable func attempt(resuming: Bool) -> EventLoopFuture<Established> {
                self.open(
                    target,
                    url: url,
                    settings: settings,
                    via: via,
                    timeout: timeout,
                    resuming: resuming,
                    on: loop,
                    noteChannel: noteChannel
                )
            }
            guard url.isTLS else { return attempt(resuming: false) }
            let allowed = resumption.withLockedValue { $0.allowsResumption(origin) }
            return attempt(resuming: allowed).map { established in
                _ = resumption.withLockedValue { $0.ended(origin, .passed) }
                return established
            }.flatMapError { error in
                let again = resumption.withLockedValue { $0.ended(origin, TLSResumption.outcome(of: error)) }
                guard again else { return loop.makeFailedFuture(error) }
                return attempt(resuming: false).map { established in
                    _ = resumption.withLockedValue { $0.ended(origin, .passed) }
                    return established
                }
            }
        }

        /// Opens one attempt: the NWConnection (and TLS), the tunnel when through a proxy, the checks
        /// after the handshake, the HTTP handlers. `noteChannel` learns the channel before it connects.
        /// `resuming`: whether the TLS handshake may resume a session the system kept.
        private func open(
            _ target: Target,
            url: HTTPURL,
            settings: Connection.Settings,
            via: (proxy: HTTPProxy, target: String)?,
            timeout: Duration,
            resuming: Bool,
            on loop: any EventLoop,
            noteChannel: @escaping @Sendable (any Channel) -> Void
        ) -> EventLoopFuture<Established> {
            guard let base = NIOTSConnectionBootstrap(validatingGroup: loop) else {
                return loop.makeFailedFuture(Self.notTransportServicesLoop())
            }
            let readyPromise = loop.makePromise(of: Connection.Ready.self)
            let tunnelPromise = loop.makePromise(of: Void.self)
            let verdict = HandshakeVerdict()
            let checks = HandshakeChecks(
                host: url.host,
                port: url.port,
                serverTrust: settings.serverTrust,
                pins: settings.pins
            )
            let roots = additionalRoots
            var bootstrap = Self.configured(
                base,
                access: settings.networkAccess,
                tuning: settings.tuning,
                fastOpen: tcpFastOpen,
                timeout: timeout
            )
            if url.isTLS {
                bootstrap = bootstrap.tlsOptions(
                    makeTLSOptions(
                        // Never an IP as SNI: an IP-literal host sends none and is checked as an IP.
                        serverName: url.hostIsIP ? nil : url.host,
                        checkedName: url.host,
                        alpn: settings.versions.alpn,
                        tuning: settings.tuning,
                        deferring: settings.serverTrust != nil,
                        resuming: resuming,
                        verdict: verdict
                    )
                )
            }
            bootstrap = bootstrap.channelInitializer { channel in
                noteChannel(channel)
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(ConnectionAbandoner())
                    if let via {
                        try sync.addHandler(
                            ProxyConnectHandler(target: via.target, proxy: via.proxy, promise: tunnelPromise)
                        )
                    } else {
                        tunnelPromise.succeed(())
                    }
                    guard url.isTLS else {
                        readyPromise.succeed(try Connection.configure(channel, version: settings.h2c ? .http2 : .http1))
                        return
                    }
                    try sync.addHandler(
                        ApplicationProtocolNegotiationHandler { result, channel in
                            let checked = Self.check(channel, verdict: verdict, checks: checks, roots: roots)
                            return Connection.finishSetup(channel, alpn: result, after: checked, ready: readyPromise)
                        }
                    )
                    try sync.addHandler(SetupWatcher(promise: readyPromise))
                }
            }
            let connected: EventLoopFuture<any Channel>
            switch target {
            case .address(let address): connected = bootstrap.connect(to: address)
            case .name(let host, let port): connected = bootstrap.connect(host: host, port: port)
            }
            return Self.established(connected, target: target, tunnel: tunnelPromise, ready: readyPromise)
                .flatMapErrorThrowing { error in
                    readyPromise.fail(error)
                    tunnelPromise.fail(error)
                    throw Self.failure(error, verdict: verdict, host: url.host, address: target.text)
                }
        }

        /// The connection once its tunnel (if any) and its setup are done; a connection that fails after
        /// connecting is closed.
        private static func established(
            _ connected: EventLoopFuture<any Channel>,
            target: Target,
            tunnel: EventLoopPromise<Void>,
            ready: EventLoopPromise<Connection.Ready>
        ) -> EventLoopFuture<Established> {
            connected.flatMap { channel in
                tunnel.futureResult.flatMap { ready.futureResult }.flatMapThrowing { ready in
                    var remote = channel.remoteAddress
                    if case .address(let address) = target { remote = address }
                    guard let remote else {
                        throw HTTPEngineError(.protocolError, "connection to \(target.text) closed at once")
                    }
                    return Established(channel: channel, ready: ready, remote: remote, at: .now)
                }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
        }

        /// The checks of a handshake that is over (`HandshakeChecks`), before the HTTP handlers, on the
        /// evidence it left: the verify
        /// block's verdict and chain, or for a resumed session (no verify block) the chain in its
        /// metadata, judged now; neither: nothing to check, refused.
        private static func check(
            _ channel: any Channel,
            verdict: HandshakeVerdict,
            checks: HandshakeChecks,
            roots: [[UInt8]]
        ) -> EventLoopFuture<HandshakeShown> {
            let host = checks.host
            let address = channel.remoteAddress.map(describe) ?? host
            let evidence = HandshakeEvidence.choose(
                verifyBlock: verdict.value,
                metadataChain: verdict.value == nil ? peerChain(of: channel) : []
            )
            return channel.eventLoop.makeFutureWithTask {
                let judged: SystemTrustVerdict
                var chain: [[UInt8]] = []
                var handshakeTrust = verdict.trust
                switch evidence {
                case .judged(let verdict, let seen):
                    judged = verdict
                    chain = seen
                case .judgeNow(let seen):
                    let (verdict, trust) = await ApplePlatformTrust.judge(
                        chain: seen,
                        host: host,
                        additionalRoots: roots
                    )
                    judged = verdict
                    chain = seen
                    handshakeTrust = trust.map(PlatformTrust.init)
                case .none:
                    // Never accepted unchecked: made again with a full handshake (TLSResumption).
                    throw ResumedWithoutChain(host: host)
                }
                try await checks.run(chain: chain, platformTrust: handshakeTrust) {
                    if let error = judged.engineError(host: host, address: address) { throw error }
                }
                return HandshakeShown(chain: chain, platformTrust: handshakeTrust)
            }
        }

        /// The engine's error for a connect or handshake that failed: a chain the verify block refused
        /// says why from the verdict; our own check (a pin) or the system's TLS refusing is a TLS failure;
        /// a connect failure (refused, unreachable, timed out) stays one, so the race tries the next
        /// address.
        private static func failure(
            _ error: any Error,
            verdict: HandshakeVerdict,
            host: String,
            address: String
        ) -> any Error {
            if let judged = verdict.value?.0, let refused = judged.engineError(host: host, address: address) {
                return refused
            }
            if error is IdentityFailure {
                return describeTLSFailure(error, host: host, address: address, chainRejected: false)
            }
            if let failure = error as? NWError, case .tls = failure {
                return describeTLSFailure(error, host: host, address: address, chainRejected: false)
            }
            return error
        }

        /// The bootstrap's settings every attempt shares: no waiting for a path, Nagle off, the rules on
        /// which networks to use, the service class and multipath mode, the bound on connecting (TLS
        /// included: the system does both as one). `fastOpen`: TCP Fast Open at the TCP level only, so
        /// the ClientHello may ride in the SYN; never the parameters' fast open, which would send TLS
        /// early data (replayable).
        private static func configured(
            _ bootstrap: NIOTSConnectionBootstrap,
            access: NetworkAccess,
            tuning: ConnectionTuning,
            fastOpen: Bool = false,
            timeout: Duration
        ) -> NIOTSConnectionBootstrap {
            var bootstrap = bootstrap
            if fastOpen {
                let tcp = NWProtocolTCP.Options()  // a class: its properties are set on the one object
                tcp.noDelay = true
                tcp.enableFastOpen = true
                bootstrap = bootstrap.tcpOptions(tcp)
            }
            return
                bootstrap
                .connectTimeout(TimeAmount(timeout))
                .channelOption(NIOTSChannelOptions.waitForActivity, value: false)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .configureNWParameters { parameters in
                    if !access.allowsCellular { parameters.prohibitedInterfaceTypes = [.cellular] }
                    parameters.prohibitExpensivePaths = !access.allowsExpensive
                    parameters.prohibitConstrainedPaths = !access.allowsConstrained
                    parameters.serviceClass = serviceClass(tuning.serviceClass)
                    switch tuning.multipath {
                    case .none: parameters.multipathServiceType = .disabled
                    case .handover: parameters.multipathServiceType = .handover
                    case .interactive: parameters.multipathServiceType = .interactive
                    case .aggregate: parameters.multipathServiceType = .aggregate
                    }
                }
        }

        private static func serviceClass(_ kind: ConnectionTuning.ServiceClass) -> NWParameters.ServiceClass {
            switch kind {
            case .bestEffort: .bestEffort
            case .background: .background
            case .interactiveVideo: .interactiveVideo
            case .interactiveVoice: .interactiveVoice
            case .responsiveData: .responsiveData
            case .signaling: .signaling
            }
        }

        /// The system's TLS options for one attempt: SNI, ALPN, TLS 1.2 at least (or the session's higher
        /// floor, and its ceiling), and the verify block
        /// that judges the chain for `checkedName` (see the file comment).
        private func makeTLSOptions(
            serverName: String?,
            checkedName: String,
            alpn: [String],
            tuning: ConnectionTuning,
            deferring: Bool,
            resuming: Bool,
            verdict: HandshakeVerdict
        ) -> NWProtocolTLS.Options {
            let options = NWProtocolTLS.Options()
            let security = options.securityProtocolOptions
            if let serverName { sec_protocol_options_set_tls_server_name(security, serverName) }
            if let minimum = tls_protocol_version_t(rawValue: tuning.effectiveTLSMinimum) {
                sec_protocol_options_set_min_tls_protocol_version(security, minimum)
            } else {
                sec_protocol_options_set_min_tls_protocol_version(security, .TLSv12)
            }
            if let raw = tuning.tlsMaximum, let maximum = tls_protocol_version_t(rawValue: raw) {
                sec_protocol_options_set_max_tls_protocol_version(security, maximum)
            }
            for name in alpn { sec_protocol_options_add_tls_application_protocol(security, name) }
            // Session tickets and resumption, said rather than left to the defaults: a connection made
            // again to a server seen in this process (the resolver after its idle close, an origin)
            // resumes its TLS session, unless TLSResumption says this origin's next handshake is full (a
            // refused one may have left a ticket). A resumed handshake runs no verify block;
            // HandshakeEvidence judges it from the connection's certificate chain. Early data stays off
            // (replayable).
            sec_protocol_options_set_tls_tickets_enabled(security, true)
            sec_protocol_options_set_tls_resumption_enabled(security, resuming)
            let roots = additionalRoots
            sec_protocol_options_set_verify_block(
                security,
                { _, trust, complete in
                    let secTrust = sec_trust_copy_ref(trust).takeRetainedValue()
                    let complete = VerifyCompletion(complete)
                    let handshakeTrust = PlatformTrust(secTrust)
                    ApplePlatformTrust.judge(secTrust, host: checkedName, additionalRoots: roots) { judged, chain in
                        verdict.record(judged, chain: chain, trust: handshakeTrust)
                        // Deferring: the handshake completes, and the app is asked right after it.
                        complete.call(judged == .trusted || deferring)
                    }
                },
                verifyQueue
            )
            return options
        }

        /// A TCP connect alone to `target`, closed as soon as it is up: the probe of an address whose
        /// whole attempt (TCP and TLS) waits for it to win its TCP race. `noteChannel` learns the channel,
        /// so the race can cancel it.
        private static func probe(
            _ target: Target,
            access: NetworkAccess,
            timeout: Duration,
            on loop: any EventLoop,
            noteChannel: @escaping @Sendable (any Channel) -> Void
        ) -> EventLoopFuture<Void> {
            connectTCP(target, access: access, timeout: timeout, on: loop, halfClosure: false, noteChannel: noteChannel)
                .flatMap { $0.channel.close() }
        }

        /// A plain TCP connection (no TLS, no handlers) to `target`, an address: a tunnel's attempt or a
        /// probe. `halfClosure`: a half-close from the peer is passed on (a tunnel's). `noteChannel`
        /// learns the channel before it connects.
        private static func connectTCP(
            _ target: Target,
            access: NetworkAccess,
            timeout: Duration,
            on loop: any EventLoop,
            halfClosure: Bool,
            noteChannel: @escaping @Sendable (any Channel) -> Void
        ) -> EventLoopFuture<(channel: any Channel, remote: SocketAddress)> {
            guard case .address(let address) = target, let bootstrap = NIOTSConnectionBootstrap(validatingGroup: loop)
            else { return loop.makeFailedFuture(Self.notTransportServicesLoop()) }
            return configured(bootstrap, access: access, tuning: .standard, timeout: timeout)
                .channelOption(.allowRemoteHalfClosure, value: halfClosure)
                .channelInitializer { channel in
                    noteChannel(channel)
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
                .connect(to: address)
                .map { (channel: $0, remote: address) }
        }

        // MARK: the race

        /// Races `count` attempts in order (HappyEyeballsRace); a refused certificate ends the race at
        /// once (every address would show the same), as does the deadline `timeout` from now.
        private static func race(
            count: Int,
            timeout: Duration,
            on loop: any EventLoop,
            probe: (@Sendable (Int) -> EventLoopFuture<Void>)? = nil,
            attempt: @escaping @Sendable (Int) -> EventLoopFuture<Established>,
            cancel: @escaping @Sendable (Int) -> Void,
            explain: @escaping @Sendable (HappyEyeballsFailure) -> HTTPEngineError
        ) async throws -> Established {
            do {
                return try await HappyEyeballsRace.run(
                    count: count,
                    deadline: .now() + TimeAmount(timeout),
                    on: loop,
                    isFinal: { error in
                        guard let error = error as? HTTPEngineError else { return false }
                        return ![.connectFailed, .connectTimeout, .protocolError].contains(error.code)
                    },
                    probe: probe,
                    attempt: attempt,
                    cancel: cancel,
                    discard: { $0.channel.close(promise: nil) }
                ).get()
            } catch let failure as HappyEyeballsFailure {
                throw explain(failure)
            }
        }

        /// The engine's error for a lost race: a final verdict as it is (a certificate refused), else
        /// the attempts' socket errors, one per address.
        private static func lostRace(
            _ failure: HappyEyeballsFailure,
            targets: [Target],
            host: String,
            port: Int,
            timeout: Duration,
            access: NetworkAccess
        ) -> HTTPEngineError {
            if let final = failure.errors.lazy.compactMap({ $0.error as? HTTPEngineError }).first(where: {
                ![.connectFailed, .connectTimeout].contains($0.code)
            }) {
                return final
            }
            if failure.timedOut || failure.errors.allSatisfy({ Self.isTimeout($0.error) }) {
                return HTTPEngineError(
                    .connectTimeout,
                    "connecting to \(formatAuthority(host: host, port: port)) took longer than \(timeout)",
                    underlying: failure
                )
            }
            // The POSIX codes as NIO's errors, so a refusal everywhere is told apart as on Linux, and
            // worded the same (`connection refused`).
            var posix = failure
            posix.errors = failure.errors.map { index, error in
                if let nw = error as? NWError, case .posix(let code) = nw {
                    return (index, IOError(errnoCode: code.rawValue, reason: "connect"))
                }
                return (index, error)
            }
            let attempts = posix.errors.map { index, error in
                HTTPEngineError.Attempt(
                    address: targets[index].text,
                    stage: "connect",
                    reason: describeSocketError(error)
                )
            }
            var lost = HTTPEngineError(
                .connectFailed,
                attempts.count == 1
                    ? "could not connect to \(formatAuthority(host: host, port: port)): \(attempts[0].reason)"
                    : "could not connect to \(host) at any address",
                attempts: attempts,
                underlying: posix
            )
            // No network, or one the request may not use: "not connected to the Internet", with why.
            lost.networkUnavailable = NetworkUnavailable.judge(
                errnos: posix.errors.compactMap { ($0.error as? IOError)?.errnoCode },
                path: platformPathFacts.withLockedValue { $0 },
                access: access
            )
            return lost
        }

        private static func isTimeout(_ error: any Error) -> Bool {
            if case ChannelError.connectTimeout = error { return true }
            if let error = error as? NWError, case .posix(.ETIMEDOUT) = error { return true }
            return false
        }

        private static func notTransportServicesLoop() -> HTTPEngineError {
            HTTPEngineError(
                .connectFailed,
                "on Apple platforms the engine connects through Network.framework and needs a NIOTSEventLoopGroup; leave the event loop group at its default"
            )
        }
    }

    /// The verify block's completion handler, called once from the Security framework's callback queue.
    /// `@unchecked Sendable`: the SDK's block type is not marked Sendable; it is called once, never stored.
    private struct VerifyCompletion: @unchecked Sendable {
        let call: (Bool) -> Void

        init(_ complete: @escaping (Bool) -> Void) {
            call = complete
        }
    }

    /// What the verify block concluded about one handshake's chain, for the checks after it.
    private final class HandshakeVerdict: Sendable {
        private struct Recorded {
            var verdict: SystemTrustVerdict
            var chain: [[UInt8]]
            var trust: PlatformTrust
        }
        private let state = NIOLockedValueBox<Recorded?>(nil)

        /// The verify block's verdict and chain; nil when it did not run (a resumed session).
        var value: (SystemTrustVerdict, [[UInt8]])? { state.withLockedValue { $0.map { ($0.verdict, $0.chain) } } }
        /// The handshake's own trust object, for the app's delegate.
        var trust: PlatformTrust? { state.withLockedValue { $0?.trust } }

        func record(_ verdict: SystemTrustVerdict, chain: [[UInt8]], trust: PlatformTrust) {
            state.withLockedValue { $0 = Recorded(verdict: verdict, chain: chain, trust: trust) }
        }
    }

    /// The peer's certificates from the connection's TLS metadata (DER, leaf first): what a resumed
    /// session, whose handshake ran no verify block, has to show. On the channel's event loop.
    private func peerChain(of channel: any Channel) -> [[UInt8]] {
        guard
            let metadata = try? channel.getMetadataSync(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata
        else { return [] }
        var chain: [[UInt8]] = []
        sec_protocol_metadata_access_peer_certificate_chain(metadata.securityProtocolMetadata) { certificate in
            let reference = sec_certificate_copy_ref(certificate).takeRetainedValue()
            chain.append([UInt8](SecCertificateCopyData(reference) as Data))
        }
        return chain
    }
#endif
