// The self-hostable HTTPDNS server: one process speaking every format our clients speak.
//
//   GET  /d?dn=NAME[,NAME…][&type=aaaa|addrs][&ttl=1][&clientip=1][&query=1][&ip=CLIENT]
//                                                                    DNSPod text (single or batch); with
//                                                                    &id=ID&alg=aes|des or &id=ID&token=T,
//                                                                    Tencent Cloud's enterprise forms
//   GET  /resolve?host=NAME[&query=4|6|4,6]                          Alibaba-style JSON
//   GET  /ACCOUNT/d?host=…, /ACCOUNT/sign_d?host=…&t=&s=             Alibaba Cloud EMAS (unsigned, signed)
//   GET  /v2/d?id=ACCOUNT&m=0&dn=NAME&q=4|6|4,6[&exp=&v=&s=]          Alibaba Cloud EMAS v2, plain mode
//   GET  /dns-query?dns=BASE64URL, POST /dns-query                   RFC 8484 wire format
//   GET  /dns-query?name=NAME&type=A|AAAA (or Accept: dns-json)      JSON DoH
//   GET  /healthz                                                    liveness: 200 while the process runs
//   GET  /readyz                                                     readiness: 503 until the upstream
//                                                                    answered once, and while draining
//   GET  /metrics                                                    Prometheus text, when configured
//
// Answers come from a hosts(5) file (re-read when it changes) and, for other names, from an upstream
// DNS server through the project's resolver (its TTL cache makes TTLs count down). A name found nowhere
// is NXDOMAIN / the format's "no answer"; a name with addresses of the other family only is NODATA.
// `ip=` (client subnet) is accepted and ignored: the upstream is asked without ECS.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

package final class HTTPDNSService: Sendable {
    package struct Configuration: Sendable {
        /// Addresses to listen on (`port` 0: any free port).
        package var listen: [(host: String, port: Int)] = [("127.0.0.1", 0)]
        /// Serve HTTPS (ALPN h2 and http/1.1) with this certificate; plain HTTP/1.1 and h2c otherwise.
        package var tls: TLSIdentity?
        /// hosts(5) file answered first, re-read within `hostsReloadInterval` of changing.
        package var hostsFile: String?
        /// How often the hosts file is checked for changes; nil: only when `reloadHosts()` is called
        /// (tests, or an operator's signal handler).
        package var hostsReloadInterval: Duration? = .seconds(1)
        /// Static names (for embedding, e.g. the demo), answered like the hosts file.
        package var staticHosts: [String: [IPAddress]] = [:]
        /// Upstream DNS server for everything else (nil: names outside the hosts are NXDOMAIN).
        package var upstream: ResolverSpec?
        /// TTL of hosts-file answers, seconds.
        package var ttl: UInt32 = 60
        /// Names in one `/d` batch at most.
        package var maxBatch = 50
        package var limits = HTTPListener.Limits()
        /// The accounts of the authenticated forms (Tencent Cloud DNSPod, Alibaba Cloud EMAS).
        package var accounts = VendorAccounts()
        /// Refuse every unauthenticated form (free `/d`, `/resolve`, `/ACCOUNT/d`, unsigned `/v2/d`,
        /// `/dns-query`).
        package var requireAuth = false
        /// Unix seconds now, for signature expiry; tests move it to make signatures expired or early.
        package var unixTime: @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }
        /// What `/metrics` answers (Prometheus text format); nil: no `/metrics` (404), and requests are
        /// not counted.
        package var metricsText: (@Sendable () -> String)?
        /// One JSON line per answered request (ServerOperations.swift).
        package var accessLog: AccessLog?
        /// The name the start-up readiness probe asks the upstream, once a second until it answers
        /// (any DNS answer counts, NXDOMAIN or REFUSED included: the upstream is reachable).
        package var readinessProbeName = "readiness-probe.httpdns.invalid"

        package init() {}
    }

    /// A certificate chain and its key, PEM.
    package struct TLSIdentity: Sendable {
        package var chain: [NIOSSLCertificate]
        package var key: NIOSSLPrivateKey

        package init(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
            self.chain = chain
            self.key = key
        }

        package static func load(certificate: String, key: String) throws -> TLSIdentity {
            TLSIdentity(
                chain: try NIOSSLCertificate.fromPEMFile(certificate),
                key: try NIOSSLPrivateKey(file: key, format: .pem)
            )
        }
    }

    package let listeners: [HTTPListener]
    package let readiness: ServiceReadiness
    let hosts: NIOLockedValueBox<Hosts>
    let resolver: HTTPDNSResolver?
    let configuration: Configuration
    let logger: Logger
    /// The hosts reload poll and the readiness probe.
    let background: [Task<Void, Never>]

    struct Hosts {
        var table: [String: [IPAddress]]
        var stamp: String?
    }

    /// Ports actually bound, in `listen` order.
    package var ports: [Int] { listeners.map(\.port) }

    package static func start(_ configuration: Configuration, logger: Logger = Logger(label: "httpdns.server"))
        async throws -> HTTPDNSService
    {
        var table = configuration.staticHosts
        var stamp: String?
        if let path = configuration.hostsFile {
            let (parsed, s) = try Self.readHosts(path)
            table.merge(parsed) { $1 }
            stamp = s
        }
        var resolver: HTTPDNSResolver?
        if let upstream = configuration.upstream {
            var rc = ResolverConfiguration(providers: [upstream])
            rc.policy = .all
            rc.fallbackToLocalDNS = false
            rc.cache.minTTL = 1
            rc.timeout = .seconds(3)
            resolver = try HTTPDNSResolver(configuration: rc, engine: try HTTPEngine(), logger: logger)
        }
        let tlsContext: NIOSSLContext? = try configuration.tls.map { identity in
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: identity.chain.map { .certificate($0) },
                privateKey: .privateKey(identity.key)
            )
            tls.applicationProtocols = ["h2", "http/1.1"]
            return try NIOSSLContext(configuration: tls)
        }
        let hosts = NIOLockedValueBox(Hosts(table: table, stamp: stamp))
        let readiness = ServiceReadiness(hasUpstream: resolver != nil)
        let service = ServiceCore(
            hosts: hosts,
            resolver: resolver,
            configuration: configuration,
            logger: logger,
            readiness: readiness
        )
        let observer = RequestObserver(accessLog: configuration.accessLog, metered: configuration.metricsText != nil)
        // Answers are observed (metrics, access log) only when asked for: the plain path stays as it was.
        var immediate: HTTPListener.ImmediateHandler = { service.answerAtHand($0) }
        var handler: HTTPListener.Handler = { await service.handle($0) }
        if observer.isActive {
            immediate = { request in
                let started = ContinuousClock.now
                guard let response = service.answerAtHand(request) else { return nil }
                observer.answered(request, response, after: .now - started)
                return response
            }
            handler = { request in
                let started = ContinuousClock.now
                let response = await service.handle(request)
                observer.answered(request, response, after: .now - started)
                return response
            }
        }
        var listeners: [HTTPListener] = []
        do {
            for (host, port) in configuration.listen {
                listeners.append(
                    try await HTTPListener.start(
                        host: host,
                        port: port,
                        tls: tlsContext,
                        limits: configuration.limits,
                        logger: logger,
                        immediate: immediate,
                        handler: handler
                    )
                )
            }
        } catch {
            for l in listeners { await l.stop() }
            throw error
        }
        var background: [Task<Void, Never>] = []
        if let resolver {
            background.append(Task { await service.probeUntilTheUpstreamAnswers(resolver) })
        }
        if let path = configuration.hostsFile, let interval = configuration.hostsReloadInterval {
            background.append(
                Task {
                    // Polling: one stat per interval, the same on every platform, and it sees a file replaced
                    // by rename as well as one edited in place.
                    while (try? await Task.sleep(for: interval)) != nil {
                        do {
                            if try Self.reloadIfChanged(path, hosts: hosts, statics: configuration.staticHosts) {
                                logger.info("hosts file reloaded", metadata: ["path": "\(path)"])
                            }
                        } catch {
                            logger.warning(
                                "hosts file not reloaded, keeping the previous one",
                                metadata: ["error": "\(error)"]
                            )
                        }
                    }
                }
            )
        }
        return HTTPDNSService(
            listeners: listeners,
            readiness: readiness,
            hosts: hosts,
            resolver: resolver,
            configuration: configuration,
            logger: logger,
            background: background
        )
    }

    private init(
        listeners: [HTTPListener],
        readiness: ServiceReadiness,
        hosts: NIOLockedValueBox<Hosts>,
        resolver: HTTPDNSResolver?,
        configuration: Configuration,
        logger: Logger,
        background: [Task<Void, Never>]
    ) {
        self.listeners = listeners
        self.readiness = readiness
        self.hosts = hosts
        self.resolver = resolver
        self.configuration = configuration
        self.logger = logger
        self.background = background
    }

    /// Stops at once: every connection is closed, answers in progress are dropped.
    package func stop() async {
        for task in background { task.cancel() }
        for l in listeners { await l.stop() }
        configuration.accessLog?.flush()
    }

    /// Graceful stop: `/readyz` turns 503 at once; after `delay` (time for a load balancer's health
    /// checks to notice) no new connection is accepted, the requests in progress are answered and
    /// their connections closed; whatever is still open after `timeout` more is closed.
    package func drain(delay: Duration = .zero, within timeout: Duration) async {
        readiness.draining()
        logger.info("draining", metadata: ["delay": "\(delay)", "timeout": "\(timeout)"])
        if delay > .zero { try? await Task.sleep(for: delay) }
        for task in background { task.cancel() }
        await withTaskGroup(of: Void.self) { group in
            for l in listeners { group.addTask { await l.drain(within: timeout) } }
        }
        configuration.accessLog?.flush()
    }

    static func readHosts(_ path: String) throws -> ([String: [IPAddress]], String) {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let stamp = "\(attributes[.modificationDate] ?? "")/\(attributes[.size] ?? "")"
        if let size = attributes[.size] as? Int, size > HostsFile.maxBytes {
            // Refused before reading: a huge file would stall every reload.
            throw HostsFile.ParseError(
                line: 0,
                reason: "\(path): \(size) bytes, over the \(HostsFile.maxBytes >> 20) MiB limit"
            )
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        do {
            return (try HostsFile.parse(text), stamp)
        } catch {
            throw HostsFile.ParseError(line: (error as? HostsFile.ParseError)?.line ?? 0, reason: "\(path): \(error)")
        }
    }

    /// Reads the hosts file again if it changed since it was last read (size or modification time):
    /// true when the table was replaced, false when the file had not changed (or there is none).
    ///
    /// Throws the read or parse error of a changed file that cannot be used; the previous table stays,
    /// and the file is not read again until it changes once more. The polling loop calls this too.
    @discardableResult
    package func reloadHosts() throws -> Bool {
        guard let path = configuration.hostsFile else { return false }
        return try Self.reloadIfChanged(path, hosts: hosts, statics: configuration.staticHosts)
    }

    static func reloadIfChanged(
        _ path: String,
        hosts: NIOLockedValueBox<Hosts>,
        statics: [String: [IPAddress]]
    ) throws -> Bool {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let stamp = attributes.map { "\($0[.modificationDate] ?? "")/\($0[.size] ?? "")" }
        guard stamp != hosts.withLockedValue({ $0.stamp }) else { return false }
        do {
            let (table, newStamp) = try readHosts(path)
            hosts.withLockedValue { $0 = Hosts(table: statics.merging(table) { $1 }, stamp: newStamp) }
            return true
        } catch {
            hosts.withLockedValue { $0.stamp = stamp }  // do not retry a broken file every second
            throw error
        }
    }
}

/// The request handling, shared by every listener.
struct ServiceCore: Sendable {
    let hosts: NIOLockedValueBox<HTTPDNSService.Hosts>
    let resolver: HTTPDNSResolver?
    let configuration: HTTPDNSService.Configuration
    let logger: Logger
    let readiness: ServiceReadiness

    /// Asks the upstream for the probe name once a second until it answers (any answer, NXDOMAIN
    /// included), which makes the server ready; a real lookup's answer does the same sooner.
    func probeUntilTheUpstreamAnswers(_ resolver: HTTPDNSResolver) async {
        while readiness.current == .waitingForUpstream, !Task.isCancelled {
            _ = await lookup(configuration.readinessProbeName)
            if readiness.current == .waitingForUpstream {
                logger.info("not ready: the upstream did not answer the readiness probe; asking again in 1 s")
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    struct BadRequest: Error {
        var reason: String
    }

    /// What we know about one name: NXDOMAIN, or per-family answers (an empty family is NODATA).
    enum Lookup {
        case nxdomain
        case failure
        case found(ipv4: FamilyAnswer, ipv6: FamilyAnswer)
    }

    /// The hosts table's answer, if the name is in it.
    func hostsLookup(_ name: String) -> Lookup? {
        guard let ips = hosts.withLockedValue({ $0.table[name] }) else { return nil }
        return .found(
            ipv4: FamilyAnswer(addresses: ips.filter { !$0.isIPv6 }, ttl: configuration.ttl),
            ipv6: FamilyAnswer(addresses: ips.filter(\.isIPv6), ttl: configuration.ttl)
        )
    }

    func lookup(_ name: String) async -> Lookup {
        if let known = hostsLookup(name) { return known }
        guard let resolver else { return .nxdomain }
        do {
            let r = try await resolver.resolve(name, .both)
            readiness.upstreamAnswered()
            return .found(
                ipv4: FamilyAnswer(addresses: r.ipv4, ttl: r.ttl),
                ipv6: FamilyAnswer(addresses: r.ipv6, ttl: r.ttl)
            )
        } catch let e as ResolverError where e.code == .noAddress {
            readiness.upstreamAnswered()
            return .nxdomain
        } catch {
            // An error code in a DNS answer (REFUSED, SERVFAIL) still shows the upstream is reachable.
            if let e = error as? ResolverError,
                e.failures.contains(where: { ($0.error as? ProviderError)?.rcode != nil })
            {
                readiness.upstreamAnswered()
            }
            // The client is told the upstream failed, not where it is or what it said: that goes to
            // the log, for the operator.
            logger.debug("upstream failed", metadata: ["name": "\(name)", "error": "\(error)"])
            return .failure
        }
    }

    /// Thrown out of `route` (by the lookup `handle` gives it) for a name only the upstream can answer.
    struct NeedsUpstream: Error {
        var name: String
    }

    /// What is known without waiting: the hosts table, or the resolver's cache (positive answers).
    func immediateLookup(_ name: String) -> Lookup? {
        if let known = hostsLookup(name) { return known }
        guard let resolver else { return .nxdomain }
        guard let r = resolver.cached(name, .both) else { return nil }
        return .found(
            ipv4: FamilyAnswer(addresses: r.ipv4, ttl: r.ttl),
            ipv6: FamilyAnswer(addresses: r.ipv6, ttl: r.ttl)
        )
    }

    /// The answer when everything it needs is at hand (the hosts table, the resolver's cache), given on
    /// the connection's event loop without a task; nil when a name needs the upstream (`handle` then
    /// answers it).
    func answerAtHand(_ request: ListenerRequest) -> ListenerResponse? {
        do {
            return try route(request) { name in
                guard let known = immediateLookup(name) else { throw NeedsUpstream(name: name) }
                return known
            }
        } catch is NeedsUpstream {
            return nil
        } catch {
            return ListenerResponse(status: .badRequest, text: "\(error)")
        }
    }

    /// Answers a request, asking the upstream for the names that need it, then routing again with
    /// those answers at hand. Bounded by the number of names in the request.
    func handle(_ request: ListenerRequest) async -> ListenerResponse {
        var known: [String: Lookup] = [:]
        while true {
            do {
                return try route(request) { name in
                    if let k = known[name] ?? immediateLookup(name) { return k }
                    throw NeedsUpstream(name: name)
                }
            } catch let need as NeedsUpstream {
                known[need.name] = await lookup(need.name)
            } catch {
                return ListenerResponse(status: .badRequest, text: "\(error)")
            }
        }
    }

    func route(_ request: ListenerRequest, lookup: (String) throws -> Lookup) throws -> ListenerResponse {
        let (path, query) = split(request.uri)
        do {
            switch path {
            case "/healthz":
                return ListenerResponse(status: .ok, text: "ok")
            case "/readyz":
                return readiness.response
            case "/metrics" where configuration.metricsText != nil:
                try require(request, .GET)
                return ListenerResponse(
                    contentType: "text/plain; version=0.0.4; charset=utf-8",
                    body: Array(configuration.metricsText!().utf8)
                )
            case "/d":
                try require(request, .GET)
                if query["id"] != nil || query["token"] != nil || query["alg"] != nil {
                    return try dnspodAuthenticated(request, query, lookup)
                }
                if let refusal = refuseUnauthenticated("/d without id=") { return refusal }
                return try dnspod(query, names: query["dn"], clientAddress: request.remoteIP, lookup)
            case "/resolve":
                try require(request, .GET)
                if let refusal = refuseUnauthenticated("/resolve") { return refusal }
                return try alibaba(query, lookup, clientAddress: request.remoteIP)
            case "/dns-query":
                if let refusal = refuseUnauthenticated("/dns-query") { return refusal }
                return try doh(request, query, lookup)
            case AlibabaJSONFormat.v2Path:
                try require(request, .GET)
                return try alibabaV2(request, query, lookup)
            default:
                if let (account, signed) = AlibabaJSONFormat.accountPath(path), account.utf8.count <= 64 {
                    try require(request, .GET)
                    return try alibabaAccount(request, account: account, signed: signed, query, lookup)
                }
                return ListenerResponse(
                    status: .notFound,
                    text:
                        "not found: use /d, /resolve, /ACCOUNT/d, /ACCOUNT/sign_d, /v2/d, /dns-query, /healthz or /readyz"
                )
            }
        } catch let e as BadRequest {
            return ListenerResponse(status: .badRequest, text: e.reason)
        } catch let e as MethodNotAllowed {
            return ListenerResponse(
                status: .methodNotAllowed,
                text: "\(e.method) is not allowed here",
                headers: ["allow": e.allowed]
            )
        }
    }

    struct MethodNotAllowed: Error {
        var method: HTTPMethod
        var allowed: String
    }

    func require(_ request: ListenerRequest, _ method: HTTPMethod) throws {
        guard request.method == method || (method == .GET && request.method == .HEAD) else {
            throw MethodNotAllowed(method: request.method, allowed: "GET")
        }
    }

    func split(_ uri: String) -> (String, [String: String]) {
        guard let q = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = formDecoded(kv[0], plusIsSpace: false) ?? String(kv[0])
            let value = kv.count > 1 ? (formDecoded(kv[1], plusIsSpace: true) ?? String(kv[1])) : ""
            query[key] = value
        }
        return (String(uri[..<q]), query)
    }

    func name(_ text: String?, parameter: String) throws -> String {
        guard let text, !text.isEmpty else { throw BadRequest(reason: "missing \(parameter)=NAME") }
        do {
            return try validatedHostname(text)
        } catch {
            throw BadRequest(reason: "\(parameter): \(error)")
        }
    }

    // MARK: formats

    /// The DNSPod answer for the names in `dn` (plain text; the caller encrypts it for the AES and DES
    /// forms). `clientAddress` is appended to every line when the query says `clientip=1`, as the
    /// vendor's SDKs expect.
    func dnspodText(
        _ query: [String: String],
        names dn: String?,
        clientAddress: IPAddress?,
        _ lookup: (String) throws -> Lookup
    ) throws -> String {
        guard let dn, !dn.isEmpty else { throw BadRequest(reason: "missing dn=NAME[,NAME...]") }
        let names = try dn.split(separator: ",", omittingEmptySubsequences: false).map {
            try name(String($0), parameter: "dn")
        }
        guard names.count <= configuration.maxBatch else {
            throw BadRequest(reason: "\(names.count) names in one request; at most \(configuration.maxBatch)")
        }
        let family: AddressQuery
        switch query["type"] {
        case nil, "", "a": family = .ipv4
        case "aaaa": family = .ipv6
        case "addrs": family = .both
        case let other?: throw BadRequest(reason: "type=\(other) is not supported; use aaaa or addrs")
        }
        let withTTL = query["ttl"] == "1"
        let client = query["clientip"] == "1" ? clientAddress : nil
        var lines: [String] = []
        for n in names {
            let text: String
            switch try lookup(n) {
            case .found(let v4, let v6):
                text = DNSPodFormat.format(
                    HostAnswer(ipv4: v4, ipv6: v6),
                    query: family,
                    withTTL: withTTL,
                    clientAddress: client
                )
            case .nxdomain, .failure:
                text = (family == .both ? "0-0" : "0") + (client.map { "|\($0)" } ?? "")
            }
            lines.append(names.count > 1 || query["query"] == "1" ? "\(n).:\(text)" : text)
        }
        return lines.joined(separator: "\n")
    }

    func dnspod(
        _ query: [String: String],
        names: String?,
        clientAddress: IPAddress?,
        _ lookup: (String) throws -> Lookup
    ) throws -> ListenerResponse {
        let text = try dnspodText(query, names: names, clientAddress: clientAddress, lookup)
        return ListenerResponse(body: Array(text.utf8))
    }

    func alibaba(
        _ query: [String: String],
        _ lookup: (String) throws -> Lookup,
        clientAddress: IPAddress? = nil
    ) throws -> ListenerResponse {
        let host = try name(query["host"], parameter: "host")
        let wants = try addressTypes(query["query"], parameter: "query")
        switch try lookup(host) {
        case .found(let v4, let v6):
            let answer = HostAnswer(ipv4: wants.wantsIPv4 ? v4 : nil, ipv6: wants.wantsIPv6 ? v6 : nil)
            return ListenerResponse(
                contentType: "application/json",
                body: AlibabaJSONFormat.format(host: host, answer: answer, clientAddress: clientAddress)
            )
        case .nxdomain:
            return ListenerResponse(
                contentType: "application/json",
                body: AlibabaJSONFormat.format(
                    host: host,
                    answer: HostAnswer(ipv4: .empty, ipv6: .empty),
                    clientAddress: clientAddress
                )
            )
        case .failure:
            return ListenerResponse(status: .badGateway, text: "the upstream DNS server did not answer")
        }
    }

    /// Alibaba's families parameter (`query=` or v2's `q=`): `4` (the default), `6` or `4,6`.
    func addressTypes(_ value: String?, parameter: String) throws -> AddressQuery {
        guard let query = AlibabaJSONFormat.addressQuery(parameter: value) else {
            throw BadRequest(reason: "\(parameter)=\(value ?? "") is not supported; use 4, 6 or 4,6")
        }
        return query
    }

    func doh(_ request: ListenerRequest, _ query: [String: String], _ lookup: (String) throws -> Lookup) throws
        -> ListenerResponse
    {
        let wantsJSON =
            query["name"] != nil || request.headers["accept"].contains { $0.contains("application/dns-json") }
        if wantsJSON && request.method == .GET {
            return try dohJSON(query, lookup)
        }
        let wire: [UInt8]
        switch request.method {
        case .GET, .HEAD:
            guard let dns = query["dns"], !dns.isEmpty else {
                throw BadRequest(reason: "missing dns=BASE64URL (or name= for JSON)")
            }
            guard let bytes = decodeBase64URL(dns) else { throw BadRequest(reason: "dns= is not base64url") }
            wire = bytes
        case .POST:
            guard request.headers["content-type"].first?.lowercased().hasPrefix("application/dns-message") == true
            else {
                throw BadRequest(reason: "POST /dns-query needs content-type: application/dns-message")
            }
            wire = Array(request.body.readableBytesView)
        default:
            throw MethodNotAllowed(method: request.method, allowed: "GET, POST")
        }
        let message: DNSMessage
        do {
            message = try DNSMessage(parsing: wire)
        } catch {
            throw BadRequest(reason: "\(error)")
        }
        guard !message.isResponse, !message.questionName.isEmpty, message.questionName != "." else {
            throw BadRequest(reason: "the message is not a query with one question")
        }
        let qname = normalizeHostname(message.questionName)
        var rcode = DNSResponseCode.noError
        var addresses: [IPAddress] = []
        var ttl: UInt32 = configuration.ttl
        switch try lookup(qname) {
        case .found(let v4, let v6):
            let family = message.questionType == .aaaa ? v6 : message.questionType == .a ? v4 : .empty
            addresses = family.addresses
            ttl = family.ttl ?? configuration.ttl
        case .nxdomain:
            rcode = .nameError
        case .failure:
            rcode = .serverFailure
        }
        let body = try DNSMessage.response(
            to: message,
            rcode: rcode,
            addresses: addresses,
            ttl: ttl,
            negativeTTL: addresses.isEmpty && rcode != .serverFailure ? min(ttl, 30) : nil
        )
        return ListenerResponse(
            contentType: "application/dns-message",
            body: body,
            headers: ["cache-control": "max-age=\(addresses.isEmpty ? min(ttl, 30) : ttl)"]
        )
    }

    func dohJSON(_ query: [String: String], _ lookup: (String) throws -> Lookup) throws -> ListenerResponse {
        let qname = try name(query["name"], parameter: "name")
        let type: DNSRecordType
        switch query["type"]?.uppercased() {
        case nil, "", "A", "1": type = .a
        case "AAAA", "28": type = .aaaa
        case let other?: throw BadRequest(reason: "type=\(other) is not supported; use A or AAAA")
        }
        let body: [UInt8]
        switch try lookup(qname) {
        case .found(let v4, let v6):
            body = DoHJSONFormat.format(name: qname, type: type, rcode: .noError, answer: type == .a ? v4 : v6)
        case .nxdomain:
            body = DoHJSONFormat.format(name: qname, type: type, rcode: .nameError, answer: .empty)
        case .failure:
            body = DoHJSONFormat.format(name: qname, type: type, rcode: .serverFailure, answer: .empty)
        }
        return ListenerResponse(contentType: "application/dns-json", body: body)
    }
}

/// A query-string component with its `%XX` escapes decoded (and `+` as a space when `plusIsSpace`):
/// nil when an escape is malformed or the bytes are not UTF-8. Works on the bytes: no Foundation string
/// search on the DoH server's path.
func formDecoded(_ text: Substring, plusIsSpace: Bool) -> String? {
    let utf8 = text.utf8
    guard utf8.contains(UInt8(ascii: "%")) || (plusIsSpace && utf8.contains(UInt8(ascii: "+"))) else {
        return String(text)
    }
    func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var i = utf8.startIndex
    while i != utf8.endIndex {
        let c = utf8[i]
        i = utf8.index(after: i)
        if c == UInt8(ascii: "%") {
            guard i != utf8.endIndex, let high = hex(utf8[i]) else { return nil }
            i = utf8.index(after: i)
            guard i != utf8.endIndex, let low = hex(utf8[i]) else { return nil }
            i = utf8.index(after: i)
            bytes.append(high << 4 | low)
        } else {
            bytes.append(plusIsSpace && c == UInt8(ascii: "+") ? UInt8(ascii: " ") : c)
        }
    }
    return String(strictUTF8: bytes)
}

/// The bytes of base64url text (RFC 4648 section 5, padding optional), at most 4096 characters.
func decodeBase64URL(_ text: String) -> [UInt8]? {
    guard text.utf8.count <= 4096 else { return nil }
    var standard: [UInt8] = []
    standard.reserveCapacity(text.utf8.count + 3)
    for c in text.utf8 {
        switch c {
        case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
        case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            standard.append(c)
        default: return nil
        }
    }
    while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
    return Data(base64Encoded: Data(standard)).map { Array($0) }
}
