// The transport where there is no system TLS (Linux): BSD sockets through NIOPosix, NIO's
// happy-eyeballs connector over the addresses we give it (RFC 8305: IPv6 and IPv4 interleaved, the next
// attempt 250 ms after the last or at once on failure), TLS by BoringSSL through NIOSSL.
//
// After BoringSSL has verified the chain, the certificate's DNS names are checked strictly against the
// hostname (see verifyIdentity) and pins are applied. TLS failures get their code from error values,
// never from error text: BoringSSL's verdict on the chain is observed through its per-certificate
// callback (ChainVerdict), our own identity checks throw an IdentityFailure with a kind, and NIOSSL's
// hostname check has its own error value.

#if !canImport(Network)
    import HTTPDNSCore
    import NIOConcurrencyHelpers
    import NIOCore
    import NIOPosix
    import NIOSSL
    import NIOTLS

    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    /// BSD sockets and BoringSSL (see the file comment).
    struct PosixTransport: ConnectionTransport {
        static var kind: ConnectionTransportKind { .posixBoringSSL }
        static var defaultEventLoopGroup: any EventLoopGroup { MultiThreadedEventLoopGroup.singleton }

        /// One context per ALPN offer, built once, that check names (under fast open, that do not: see
        /// `deferringContexts`).
        private let contexts: [HTTPVersionPolicy: NIOSSLContext]
        /// Without NIOSSL's name check (ours, `verifyIdentity`, runs on every connection), for connections
        /// whose failures the app decides on (made when first needed: most engines never need them).
        /// Under fast open every context is one of these, built at once: a deferred connect has no
        /// peer address when the handshake ends, which NIOSSL's check needs.
        private let deferringContexts = NIOLockedValueBox<[HTTPVersionPolicy: NIOSSLContext]>([:])
        private let configuration: HTTPEngine.Configuration

        init(configuration: HTTPEngine.Configuration) throws {
            var contexts: [HTTPVersionPolicy: NIOSSLContext] = [:]
            for policy in [HTTPVersionPolicy.automatic, .http1Only, .http2Only] {
                contexts[policy] = try Self.makeContext(
                    policy,
                    configuration: configuration,
                    checksNames: !configuration.network.tcpFastOpen
                )
            }
            self.contexts = contexts
            self.configuration = configuration
        }

        private static func makeContext(
            _ policy: HTTPVersionPolicy,
            configuration: HTTPEngine.Configuration,
            checksNames: Bool
        ) throws -> NIOSSLContext {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.minimumTLSVersion = .tlsv12
            if !checksNames { tls.certificateVerification = .noHostnameVerification }
            if !configuration.tls.additionalTrustRoots.isEmpty {
                let roots = try configuration.tls.additionalTrustRoots.map {
                    try NIOSSLCertificate(bytes: $0.der, format: .der)
                }
                tls.additionalTrustRoots = [.certificates(roots)]
            }
            tls.applicationProtocols = policy.alpn
            if configuration.network.tcpFastOpen {
                // Fast open saves its round trip only when the whole ClientHello rides in the SYN, whose
                // room is one segment (about 1,400 bytes). The hybrid post-quantum key share NIOSSL sends
                // by default (X25519MLKEM768, 1,216 bytes of it) makes the ClientHello about 1,500: the
                // server then waits a round trip for its rest. With fast open on, the classical groups
                // (a 32-byte X25519 share, a ClientHello of about 300 bytes): the trade the app opts
                // into, documented on `NetworkSettings.tcpFastOpen`.
                tls.curves = [.x25519, .secp256r1, .secp384r1]
            }
            return try NIOSSLContext(configuration: tls)
        }

        /// The TLS context for `url` (nil: no TLS): NIOSSL checks names unless the app decides on
        /// failures (then the connection's own check does, so that a mismatch reaches the app).
        private func context(for url: HTTPURL, settings: Connection.Settings) throws -> NIOSSLContext? {
            guard url.isTLS else { return nil }
            guard settings.serverTrust != nil, !configuration.network.tcpFastOpen else {
                return contexts[settings.versions]
            }
            return try deferringContexts.withLockedValue { made in
                if let context = made[settings.versions] { return context }
                let context = try Self.makeContext(settings.versions, configuration: configuration, checksNames: false)
                made[settings.versions] = context
                return context
            }
        }

        func tunnel(
            host: String,
            port: Int,
            addresses: ResolvedAddresses?,
            access: NetworkAccess,
            on loop: any EventLoop,
            timeout: Duration
        ) async throws -> any Channel {
            let bootstrap = ClientBootstrap(group: loop)
                .connectTimeout(TimeAmount(timeout))
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelOption(.allowRemoteHalfClosure, value: true)
            return try await Self.connectTCP(
                bootstrap,
                on: loop,
                host: host,
                port: port,
                addresses: addresses,
                timeout: timeout
            )
        }

        /// `bootstrap` with TCP Fast Open asked for when `on` (Linux's `TCP_FASTOPEN_CONNECT`: `connect()`
        /// returns at once when a cookie for the server is kept, and the first write, the ClientHello,
        /// goes in the SYN; without a cookie it is an ordinary connect that asks for one). Elsewhere,
        /// and when off, `bootstrap` as it is.
        static func fastOpen(_ on: Bool, _ bootstrap: ClientBootstrap) -> ClientBootstrap {
            #if canImport(Glibc) || canImport(Musl)
                guard on else { return bootstrap }
                let option = ChannelOptions.Types.SocketOption(
                    level: .tcp,
                    name: NIOBSDSocket.Option(rawValue: CInt(TCP_FASTOPEN_CONNECT))
                )
                return bootstrap.channelOption(option, value: 1)
            #else
                return bootstrap
            #endif
        }

        static func describeTLSError(_ error: any Error, host: String, address: String, chainRejected: Bool)
            -> HTTPEngineError?
        {
            if let e = error as? NIOSSLExtraError, e == .failedToValidateHostname {
                return HTTPEngineError(
                    .certificateNameMismatch,
                    "the certificate presented at \(address) is not valid for \(host)",
                    underlying: error
                )
            }
            if let e = error as? NIOSSLError, case .handshakeFailed(let inner) = e {
                if chainRejected { return untrustedCertificate(host: host, address: address, underlying: error) }
                // BoringSSL's text ends with the source file it came from: keep the reason, drop the path.
                // (Wording only: the code was decided above, from values.)
                let text = "\(inner)"
                let reason =
                    text.range(of: "OPENSSL_internal:").map { String(text[$0.upperBound...].prefix { $0 != " " }) }
                    ?? text
                return HTTPEngineError(
                    .tlsFailed,
                    "TLS handshake with \(host) at \(address) failed: \(reason)",
                    underlying: error
                )
            }
            return nil
        }

        static func tlsRetryMayHelp(_ underlying: (any Error)?) -> Bool {
            // BoringSSL's own verdict (an alert, no shared cipher) would come again; the peer vanishing
            // mid-handshake (EOF, a reset, a failed system call) may not.
            guard let ssl = underlying as? NIOSSLError, case .handshakeFailed(let inner) = ssl else {
                return true
            }
            switch inner {
            case .syscallError: return true
            case .sslError(let stack): return stack.contains(.eofDuringHandshake)
            default: return false
            }
        }

        /// One connection: straight to `url`'s host, or through `via`'s proxy by a tunnel to its target.
        func attempt(
            url: HTTPURL,
            addresses: ResolvedAddresses?,
            lookup: AddressLookup,
            settings: Connection.Settings,
            on eventLoop: any EventLoop,
            via: (proxy: HTTPProxy, target: String)?
        ) async throws -> Connection {
            let readyPromise = eventLoop.makePromise(of: Connection.Ready.self)
            let tunnelPromise = eventLoop.makePromise(of: Void.self)
            // The peer's address as seen when each attempt connected: a server that closes at once (after a
            // failed handshake) leaves a channel with no remote address by the time we look.
            let remotes = NIOLockedValueBox<[ObjectIdentifier: SocketAddress]>([:])
            // Never an IP as SNI: for an IP-literal host no SNI is sent and the certificate is checked
            // against the IP, as NIOSSL does by itself.
            let sni: String? = url.hostIsIP ? nil : url.host
            let checks = HandshakeChecks(
                host: url.host,
                port: url.port,
                serverTrust: settings.serverTrust,
                pins: settings.pins
            )
            let sslContext = try context(for: url, settings: settings)
            let h2c = settings.h2c
            let serverTrust = settings.serverTrust
            let verdict = ChainVerdict(deferring: serverTrust != nil)
            let bootstrap = Self.fastOpen(configuration.network.tcpFastOpen, ClientBootstrap(group: eventLoop))
                .connectTimeout(TimeAmount(settings.connectTimeout))
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(ConnectionAbandoner())
                        try sync.addHandler(RemoteAddressRecorder(remotes: remotes))
                        if let via {
                            try sync.addHandler(
                                ProxyConnectHandler(target: via.target, proxy: via.proxy, promise: tunnelPromise)
                            )
                        }
                        guard let sslContext else {
                            readyPromise.succeed(try Connection.configure(channel, version: h2c ? .http2 : .http1))
                            return
                        }
                        try sync.addHandler(
                            try verdict.makeClientHandler(context: sslContext, serverHostname: sni)
                        )
                        try sync.addHandler(
                            ApplicationProtocolNegotiationHandler { result, channel in
                                // The handshake is over; reads are held back until the returned future completes.
                                let peer = try? channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
                                    .peerCertificate
                                let address = channel.remoteAddress.map(describe) ?? url.host
                                var chain = verdict.chain.compactMap { try? $0.toDERBytes() }
                                if chain.isEmpty, let leaf = try? peer?.toDERBytes() { chain = [leaf] }
                                let presented = chain
                                let checked = channel.eventLoop.makeFutureWithTask {
                                    try await checks.run(chain: presented) {
                                        if verdict.rejected {
                                            throw untrustedCertificate(host: url.host, address: address)
                                        }
                                        do {
                                            // An IP-literal host is checked against its IP here too: under
                                            // fast open NIOSSL has no peer address to check it against.
                                            try await verifyIdentity(
                                                hostname: sni,
                                                ip: sni == nil ? url.host : nil,
                                                peer: peer,
                                                pins: nil
                                            )
                                        } catch {
                                            throw describeTLSFailure(
                                                error,
                                                host: url.host,
                                                address: address,
                                                chainRejected: false
                                            )
                                        }
                                    }
                                    return HandshakeShown(chain: presented)
                                }
                                return Connection.finishSetup(
                                    channel,
                                    alpn: result,
                                    after: checked,
                                    ready: readyPromise
                                )
                            }
                        )
                        try sync.addHandler(SetupWatcher(promise: readyPromise))
                    }
                }
            let started = ContinuousClock.now
            let channel: any Channel
            do {
                // Through a proxy: to the proxy itself, which the system resolves when it is named.
                channel = try await Self.connectTCP(
                    bootstrap,
                    on: eventLoop,
                    host: via?.proxy.host ?? url.host,
                    port: via?.proxy.port ?? settings.port ?? url.port,
                    addresses: via == nil ? addresses : nil,
                    timeout: settings.connectTimeout,
                    via: via == nil ? .literalOnly : .proxyByName
                )
            } catch {
                readyPromise.fail(error)
                tunnelPromise.fail(error)
                throw error
            }
            if let via {
                let left = settings.connectTimeout - (ContinuousClock.now - started)
                let timer = eventLoop.scheduleTask(in: TimeAmount(max(left, .zero))) {
                    tunnelPromise.fail(
                        HTTPEngineError(
                            .connectTimeout,
                            "proxy \(via.proxy) did not open the tunnel to \(via.target) within \(settings.connectTimeout)"
                        )
                    )
                }
                do {
                    try await tunnelPromise.futureResult.get()
                    timer.cancel()
                } catch {
                    timer.cancel()
                    readyPromise.fail(error)
                    channel.close(promise: nil)
                    throw error
                }
            } else {
                tunnelPromise.succeed(())
            }
            let connected = ContinuousClock.now
            // Read now: a channel the server closed at once (a failed handshake) has no remote address later.
            let remote = channel.remoteAddress ?? remotes.withLockedValue { $0[ObjectIdentifier(channel)] }
            let remoteText = remote.map(describe) ?? formatAuthority(host: url.host, port: url.port)
            let timeout = eventLoop.scheduleTask(in: TimeAmount(settings.tlsTimeout)) {
                readyPromise.fail(
                    HTTPEngineError(
                        .tlsHandshakeTimeout,
                        "TLS handshake with \(url.host) at \(remoteText) took longer than \(settings.tlsTimeout)"
                    )
                )
            }
            do {
                let ready = try await readyPromise.futureResult.get()
                timeout.cancel()
                guard let remote else {
                    throw HTTPEngineError(.protocolError, "connection to \(remoteText) closed at once")
                }
                let tls: Duration? = sslContext == nil ? nil : ContinuousClock.now - connected
                return Connection(
                    channel: channel,
                    ready: ready,
                    remote: remote,
                    synthesizedFrom: remote.httpdnsIP.flatMap { addresses?.synthesized[$0] },
                    lookup: lookup,
                    connect: connected - started,
                    tls: tls
                )
            } catch {
                timeout.cancel()
                channel.close(promise: nil)
                if let e = error as? HTTPEngineError { throw e }
                throw describeTLSFailure(
                    error,
                    host: url.host,
                    address: remoteText,
                    chainRejected: verdict.rejected
                )
            }
        }

        /// How `connectTCP` may reach a host it has no addresses for.
        enum Reach {
            /// Only an IP literal, else it fails (`.noAddresses`): the engine never resolves by itself.
            case literalOnly
            /// Through the system's resolver: an HTTP proxy named by hostname.
            case proxyByName
        }

        /// TCP to `host:port` through `bootstrap` (made for `loop`): at `addresses` in their order (NIO's
        /// happy eyeballs), or, given no addresses, to an IP-literal host itself (or, `via: .proxyByName`,
        /// to a proxy's name through the system's resolver). Throws `HTTPEngineError`.
        static func connectTCP(
            _ bootstrap: ClientBootstrap,
            on loop: any EventLoop,
            host: String,
            port: Int,
            addresses: ResolvedAddresses?,
            timeout: Duration,
            via: Reach = .literalOnly
        ) async throws -> any Channel {
            do {
                if addresses == nil, let ip = IPAddress(host) {
                    return try await bootstrap.connect(to: try SocketAddress(ip, port: port)).get()
                }
                if addresses == nil, via == .proxyByName {
                    // A proxy named by hostname: the system resolves it (it is the local network's own).
                    return try await bootstrap.connect(host: host, port: port).get()
                }
                guard let addresses, !(addresses.ipv4.isEmpty && addresses.ipv6.isEmpty) else {
                    throw HTTPEngineError(.noAddresses, "no address to connect to for \(host)")
                }
                let ranked = RankedResolver(
                    ipv4: try addresses.ipv4.map { try SocketAddress($0, port: port) },
                    ipv6: try addresses.ipv6.map { try SocketAddress($0, port: port) },
                    eventLoop: loop,
                    ipv6Later: addresses.ipv4First
                )
                return try await bootstrap.resolver(ranked).connect(host: host, port: port).get()
            } catch let error as HTTPEngineError {
                throw error
            } catch {
                throw describeConnectFailure(error, host: host, port: port, timeout: timeout)
            }
        }

    }
#endif
