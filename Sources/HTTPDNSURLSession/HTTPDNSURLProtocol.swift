// The URLProtocol that serves URLSession requests through the IP-direct engine.
//
// The URL keeps its hostname (TLS SNI, certificate check, Host); only the socket address comes from
// HTTPDNS, at connect time. Set up once: `HTTPDNSURLProtocol.install(Setup(...))`, then enable it on a
// session configuration with `configuration.enableHTTPDNS()`.
//
// What it intercepts: http(s) requests whose host the policy selects (the resolver's policy unless the
// setup gives another; the library default selects nothing). IP literals, other schemes, requests
// marked with `markHandled` and the ones HandBack.swift names (cache-only loads, among others) go to
// URLSession's own loading.
//
// The rule for everything else: the app sees what the system's own loading would show it
// (`swift run httpdns-conformance` compares the two, case by case). The request gets the system's
// default fields (RequestDefaults.swift); the session's own storages, extra headers, timeouts,
// connection limit and network rules apply (LoadContext, ConfigurationSlots.swift); the URL cache is
// read (CacheUse.swift); bodies can be sent again (a body stream is read ahead, up to a limit).
//
// How a load runs: `startLoading` only starts a Swift task and returns (nothing blocks in the instance
// methods); the task resolves, connects, streams the body up from `httpBody`, `httpBodyStream` or the
// upload task's data or file, and calls the client back. `stopLoading` cancels the task, which resets
// the HTTP/2 stream or closes the HTTP/1.1 connection, and no client call is made after it.
//
// Redirects are not followed by the engine. On Apple platforms they are reported with
// `wasRedirectedTo` (the session asks its delegate and starts a new load, intercepted and resolved
// again). swift-corelibs-foundation crashes on that call, so there the protocol asks the session's
// delegate itself (`urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)` on the
// delegate queue), follows the answer with a new resolution, or delivers the redirect response when the
// delegate refuses. Without a delegate, redirects are followed, up to `maxRedirects`.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Metrics of one URLSession task served by the protocol, one entry per request sent (a redirect
/// followed inside the protocol adds one).
public struct HTTPDNSTaskMetrics: Sendable {
    /// The URLSession task's identifier, when the load belongs to a task.
    public var taskIdentifier: Int?
    /// The URL the load started with.
    public var url: URL?
    /// One entry per request sent: the first, then each redirect hop followed.
    public var hops: [RequestMetrics]
    /// Why the task failed (an `HTTPEngineError` with its code, or the resolver's error), nil on success
    /// or when the app cancelled it. The task itself fails with the `URLError` made from it.
    public var error: (any Error)?
}

package class HTTPDNSURLProtocol: URLProtocol {
    /// What the app configures once.
    package struct Setup: Sendable {
        package var resolver: HTTPDNSResolver
        package var engine: HTTPEngine
        /// Hosts to intercept; by default the resolver's policy (which selects nothing until configured).
        package var intercept: HostPolicy
        /// http:// hosts sent over https instead (HTTP/2 when the server offers it).
        package var upgradeToHTTPS: [HostPattern] = []
        /// Where cookies are kept when a request has `httpShouldHandleCookies`; nil: the session's
        /// storage where it can be found (Linux), else `HTTPCookieStorage.shared`.
        package var cookieStorage: HTTPCookieStorage?
        /// Redirects followed inside the protocol (Linux) before failing with `.httpTooManyRedirects`.
        package var maxRedirects = 16
        /// When the task's delegate is asked about the origin's certificate (see Challenges.swift).
        package var serverTrustChallenges = ServerTrustChallenges.always
        /// Called once per load, just before the task completes (so the figures are there when the app
        /// sees the result), on no particular thread; keep it short.
        package var onMetrics: (@Sendable (HTTPDNSTaskMetrics) -> Void)?
        /// Where the requests handed back to the system are told, with the reason.
        package var logger = Logger(label: "httpdns.urlsession")

        /// Uses `engine` (which should resolve through `resolver`) for the intercepted requests.
        package init(resolver: HTTPDNSResolver, engine: HTTPEngine, intercept: HostPolicy? = nil) {
            self.resolver = resolver
            self.engine = engine
            self.intercept = intercept ?? resolver.configuration.policy
        }

        /// - Parameters:
        ///   - engineConfiguration: TLS trust and pins, versions, timeouts of the engine built here.
        package init(
            resolver: HTTPDNSResolver,
            engineConfiguration: HTTPEngine.Configuration = .init(),
            intercept: HostPolicy? = nil
        ) throws {
            self.resolver = resolver
            self.engine = try HTTPEngine(
                configuration: engineConfiguration,
                addressSource: resolver,
                path: resolver.path
            )
            self.intercept = intercept ?? resolver.configuration.policy
        }
    }

    private static let installed = NIOLockedValueBox<Setup?>(nil)

    /// Makes `setup` the one every intercepted request uses (replacing an earlier one, whose engine
    /// the app shuts down when its loads are over).
    package static func install(_ setup: Setup) {
        installed.withLockedValue { $0 = setup }
    }

    /// Stops intercepting: `canInit` answers false from now on. Loads already running finish.
    package static func uninstall() {
        installed.withLockedValue { $0 = nil }
    }

    package static var current: Setup? { installed.withLockedValue { $0 } }

    /// Header marking a request the protocol must leave alone where URLProtocol properties do not
    /// survive (swift-corelibs-foundation drops them): it goes on to the server, which ignores it.
    package static let handledHeader = "X-HTTPDNS-Handled"
    /// The URLProtocol property marking such a request on Apple platforms: nothing goes on the wire.
    package static let handledProperty = "HTTPDNSHandled"
    /// Key of the engine's own error in the userInfo of the URLErrors the protocol reports.
    package static let engineErrorKey = "HTTPDNSEngineError"

    /// Marks `request` as not to be intercepted: a URLProtocol property on Apple platforms, a header on
    /// swift-corelibs-foundation.
    package static func markHandled(_ request: inout URLRequest) {
        #if canImport(Darwin)
            // COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.
            guard let mutable = (request as NSURLRequest).mutableCopy() as? NSMutableURLRequest else { return }
            URLProtocol.setProperty(true, forKey: handledProperty, in: mutable)
            request = mutable as URLRequest
        #else
            request.setValue("1", forHTTPHeaderField: handledHeader)
        #endif
    }

    /// Whether `request` was marked with `markHandled` (the header is honoured on every platform).
    static func isMarkedHandled(_ request: URLRequest) -> Bool {
        request.value(forHTTPHeaderField: handledHeader) != nil
            || URLProtocol.property(forKey: handledProperty, in: request) != nil
    }

    /// Whether the protocol would serve `request` now.
    package override class func canInit(with request: URLRequest) -> Bool {
        guard let setup = current, let url = request.url,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty,
            !isMarkedHandled(request)
        else { return false }
        // `route` takes the host as URL gives it: an IP literal bracketed or not, a name in any case.
        guard case .httpdns = setup.intercept.route(for: host) else { return false }
        // A proxy the system would use, and none given to HTTPDNS: the system's request (SystemProxy).
        if setup.engine.configuration.network.proxy == nil, SystemProxy.applies(to: url) { return false }
        if let reason = HandBack.reason(
            cachePolicy: request.cachePolicy,
            forbidsSomeNetworks: NetworkAccess(of: request) != .unrestricted,
            transportHonoursNetworkRules: HandBack.transportHonoursNetworkRules,
            systemHonoursNetworkRules: HandBack.systemHonoursNetworkRules,
            cleartextForbidden: target(of: url, setup: setup).scheme?.lowercased() == "http"
                && !TransportSecurity.current.allowsCleartext(to: host)
        ) {
            setup.logger.info("left to the system's URL loading: \(reason)", metadata: ["host": "\(host)"])
            return false
        }
        return true
    }

    package override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    /// Where a request for `url` really goes: https for the hosts `upgradeToHTTPS` lists and, where the
    /// system applies HSTS, for the hosts that asked for it.
    static func target(of url: URL, setup: Setup) -> URL {
        Translation.upgraded(url, upgrade: setup.upgradeToHTTPS) { host in
            StrictTransportSecurity.shared?.withLockedValue { $0.upgrades(host, now: Date()) } ?? false
        }
    }

    private struct Loading {
        var gate: ClientGate
        var work: Task<Void, Never>
    }
    private let loading = NIOLockedValueBox<Loading?>(nil)

    package override func startLoading() {
        guard let client else { return }
        guard let setup = Self.current else {
            client.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        // The class the system instantiated: on Apple platforms a configuration slot's, made at run time
        // (`object_getClass` sees it where `type(of:)` may report the protocol itself).
        #if canImport(ObjectiveC)
            let instantiated: AnyClass = object_getClass(self) ?? type(of: self)
        #else
            let instantiated: AnyClass = type(of: self)
        #endif
        let context = LoadContext(task: task, setup: setup, protocolClass: instantiated)
        let gate = ClientGate(client: client, owner: self, schedule: context.clientSchedule)
        let request = self.request
        // On the concurrency pool, not on the caller's queue: corelibs calls this on the session's serial
        // work queue, and the loads of one session should run in parallel. (`Task.immediate` measured
        // no faster here.)
        let cached = cachedResponse.map(UncheckedCachedResponse.init)
        let operation: @Sendable () async -> Void = {
            await Self.load(request, cached: cached, setup: setup, context: context, gate: gate)
        }
        let work = Task(operation: operation)
        loading.withLockedValue { state in
            state?.gate.close()
            state?.work.cancel()
            state = Loading(gate: gate, work: work)
        }
    }

    /// Cancels the load. corelibs also calls this when the task is suspended and `startLoading` again on
    /// resume: the request then starts over (a delegate may see the response twice).
    package override func stopLoading() {
        loading.withLockedValue { state in
            state?.gate.close()
            state?.work.cancel()
            state = nil
        }
    }

    // MARK: The load

    private static func load(
        _ original: URLRequest,
        cached: UncheckedCachedResponse?,
        setup: Setup,
        context: LoadContext,
        gate: ClientGate
    ) async {
        // Metrics go to the app before the last client call, so they are there when the task completes.
        var metrics = HTTPDNSTaskMetrics(taskIdentifier: context.taskIdentifier, url: original.url, hops: [])
        do {
            var current = original
            // The session cache's response for the request, as the loading system handed it over.
            var revalidating: UncheckedCachedResponse?
            if let cached, let facts = cached.facts {
                switch CacheUse.decide(
                    policy: original.cachePolicy,
                    requestHeaders: original.allHTTPHeaderFields ?? [:],
                    cached: facts,
                    now: Date()
                ) {
                case .serveCached:
                    setup.onMetrics?(metrics)
                    deliverCached(cached, gate: gate)
                    return
                case .revalidate(let fields):
                    for (name, value) in fields { current.setValue(value, forHTTPHeaderField: name) }
                    revalidating = cached
                case .load:
                    break
                }
            }
            var body = context.body(of: original)
            if case .stream(let reader) = body, InputStreamReader.readsAhead {
                body = try await reader.buffered(upTo: InputStreamReader.replayLimit)
            }
            var redirects = 0
            var authenticationRounds = 0
            while true {
                let (engineRequest, url) = try makeEngineRequest(current, body: body, setup: setup, context: context)
                let response = try await send(engineRequest, setup: setup, context: context, gate: gate)
                if let still = revalidating, response.status.code == 304 {
                    // Not modified: the cached response is the answer.
                    _ = try? await response.body.collect(upTo: 1 << 16)
                    metrics.hops.append(response.metrics)
                    setup.onMetrics?(metrics)
                    deliverCached(still, gate: gate)
                    return
                }
                revalidating = nil
                if url.scheme?.lowercased() == "https", let host = url.host,
                    let policy = response.headers.first(name: "strict-transport-security")
                {
                    StrictTransportSecurity.shared?.withLockedValue { $0.record(policy, from: host, now: Date()) }
                }
                if current.httpShouldHandleCookies, let storage = context.cookieStorage,
                    CookieRules.accepts(context.cookieAcceptPolicy, from: url, mainDocumentURL: current.mainDocumentURL)
                {
                    CookieRules.store(
                        response.headers[canonicalForm: "set-cookie"].map(String.init),
                        from: url,
                        in: storage
                    )
                }
                let urlResponse = Translation.urlResponse(response, url: url)
                if let again = try await authenticate(
                    after: response,
                    as: urlResponse,
                    request: current,
                    url: url,
                    body: body,
                    failures: &authenticationRounds,
                    context: context,
                    gate: gate
                ) {
                    metrics.hops.append(response.metrics)
                    current = again
                    continue
                }
                if let (next, keepsBody) = Translation.redirectRequest(
                    after: current,
                    sentTo: url,
                    status: Int(response.status.code),
                    headers: response.headers
                ) {
                    #if canImport(Darwin)
                        // Apple's loading system asks the delegate and starts a new load for the next hop,
                        // stopping this one. When the delegate refuses, the redirect response is the task's
                        // answer: the load finishes (an error here would fail the task instead), with the
                        // 3xx as its response and no body. COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK,
                        // NEVER RUN HERE.
                        _ = try? await response.body.collect(upTo: 1 << 16)
                        metrics.hops.append(response.metrics)
                        setup.onMetrics?(metrics)
                        gate.send { $0.urlProtocol($1, wasRedirectedTo: next, redirectResponse: urlResponse) }
                        gate.finish { $0.urlProtocolDidFinishLoading($1) }
                        return
                    #else
                        redirects += 1
                        guard redirects <= setup.maxRedirects else {
                            throw URLError(
                                .httpTooManyRedirects,
                                userInfo: [NSLocalizedDescriptionKey: "more than \(setup.maxRedirects) redirects"]
                            )
                        }
                        if let decided = await context.redirectDecision(response: urlResponse, newRequest: next) {
                            _ = try? await response.body.collect(upTo: 1 << 16)
                            metrics.hops.append(response.metrics)
                            let sameMethod = decided.httpMethod?.uppercased() == current.httpMethod?.uppercased()
                            if let data = decided.httpBody {
                                body = .data(data)
                            } else if let stream = decided.httpBodyStream, stream !== current.httpBodyStream {
                                body = .stream(InputStreamReader(stream))  // a new stream from the delegate
                            } else if !(keepsBody && sameMethod) {
                                body = .none
                            }  // else the same body again (a stream already sent fails when claimed)
                            current = decided
                            context.followedRedirect(to: decided)
                            continue
                        }
                    // Refused: the redirect response is the answer.
                    #endif
                }
                try await deliver(response, as: urlResponse, request: current, context: context, gate: gate) {
                    metrics.hops.append(response.metrics)
                    setup.onMetrics?(metrics)
                }
                return
            }
        } catch {
            // Stopped (cancelled by the app): the session reports the cancel itself.
            let stopped = !gate.isOpen || Task.isCancelled
            if !stopped { metrics.error = error }
            setup.onMetrics?(metrics)
            guard !stopped else { return }
            let urlError = Translation.urlError(error, url: original.url)
            gate.finish { $0.urlProtocol($1, didFailWithError: urlError) }
        }
    }

    /// Hands the response and its body to the client: every chunk as it comes where the task's
    /// delegate receives them, else (corelibs' completion handlers keep only the last chunk) all at
    /// the end, in one call to the client queue. `beforeFinishing` runs before the last client call.
    private static func deliver(
        _ response: HTTPEngineResponse,
        as urlResponse: HTTPURLResponse,
        request: URLRequest,
        context: LoadContext,
        gate: ClientGate,
        beforeFinishing: () -> Void
    ) async throws {
        let policy = Translation.cacheStoragePolicy(
            method: request.httpMethod ?? "GET",
            requestHeaders: request.allHTTPHeaderFields ?? [:],
            status: Int(response.status.code),
            headers: response.headers
        )
        let clientPolicy = context.storagePolicy(policy)
        context.responseArrived(expectedLength: urlResponse.expectedContentLength)
        // Where the loading system does not keep a URLProtocol's responses in the session's cache
        // (corelibs), the protocol does, as the system's own protocol would.
        var cacheable = policy == .allowed ? context.cacheCapacity.map { CacheableBody(capacity: $0) } : nil
        if context.isCorelibsDownload {
            try await deliverDownload(
                response,
                as: urlResponse,
                context: context,
                gate: gate,
                beforeFinishing: beforeFinishing
            )
        } else if context.deliversEveryChunk {
            gate.send { $0.urlProtocol($1, didReceive: urlResponse, cacheStoragePolicy: clientPolicy) }
            // Back-pressure: past 1 MiB handed over, wait for the delegate queue to catch up, so a slow
            // delegate slows the server down instead of piling data up in queued operations.
            var handedOver = 0
            for try await chunk in response.body {
                let data = Data(chunk.readableBytesView)
                guard gate.send({ $0.urlProtocol($1, didLoad: data) }) else { return }
                cacheable?.append(data)
                handedOver += data.count
                if handedOver >= 1 << 20 {
                    await context.delegateQueueCaughtUp()
                    handedOver = 0
                }
            }
            beforeFinishing()
            let kept = cacheable?.data
            gate.finish { client, me in
                client.urlProtocolDidFinishLoading(me)
                if let kept { context.storeInCache(urlResponse, data: kept) }
            }
        } else {
            var all = Data()
            for try await chunk in response.body {
                all.append(contentsOf: chunk.readableBytesView)
                guard gate.isOpen else { return }
            }
            cacheable?.append(all)
            beforeFinishing()
            let body = all
            let kept = cacheable?.data
            gate.finish { client, me in
                client.urlProtocol(me, didReceive: urlResponse, cacheStoragePolicy: clientPolicy)
                if !body.isEmpty { client.urlProtocol(me, didLoad: body) }
                client.urlProtocolDidFinishLoading(me)
                if let kept { context.storeInCache(urlResponse, data: kept) }
            }
        }
    }

    /// Answers from the URL cache: the system is told the cached response holds, then it is handed over
    /// as a load would (corelibs' own protocol does the same).
    private static func deliverCached(_ cached: UncheckedCachedResponse, gate: ClientGate) {
        gate.finish { client, me in
            client.urlProtocol(me, cachedResponseIsValid: cached.response)
            client.urlProtocol(me, didReceive: cached.response.response, cacheStoragePolicy: .notAllowed)
            if !cached.response.data.isEmpty { client.urlProtocol(me, didLoad: cached.response.data) }
            client.urlProtocolDidFinishLoading(me)
        }
    }

    /// A download task on swift-corelibs-foundation: the body goes to a file, as corelibs' own protocol
    /// writes it, and corelibs is told where it is (it hands that file to the delegate or the completion
    /// handler); the file is removed once the delegate queue has run them.
    private static func deliverDownload(
        _ response: HTTPEngineResponse,
        as urlResponse: HTTPURLResponse,
        context: LoadContext,
        gate: ClientGate,
        beforeFinishing: () -> Void
    ) async throws {
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("CFNetworkDownload_\(UUID().uuidString).tmp")
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw URLError(.cannotCreateFile, userInfo: [NSLocalizedDescriptionKey: "cannot create \(file.path)"])
        }
        let handle = try FileHandle(forWritingTo: file)
        var kept = false
        defer {
            try? handle.close()
            if !kept { try? FileManager.default.removeItem(at: file) }
        }
        gate.send { $0.urlProtocol($1, didReceive: urlResponse, cacheStoragePolicy: .notAllowed) }
        var total: Int64 = 0
        for try await chunk in response.body {
            try handle.write(contentsOf: Data(chunk.readableBytesView))
            total += Int64(chunk.readableBytes)
            context.downloadProgress(
                written: Int64(chunk.readableBytes),
                total: total,
                expected: urlResponse.expectedContentLength
            )
            guard gate.isOpen else { return }
        }
        try handle.synchronize()
        beforeFinishing()
        kept = true
        gate.finish { client, me in
            if context.setDownloadedFile(file, of: me) {
                client.urlProtocolDidFinishLoading(me)
            } else {
                client.urlProtocol(
                    me,
                    didFailWithError: URLError(
                        .cannotCreateFile,
                        userInfo: [
                            NSLocalizedDescriptionKey:
                                "this Foundation gives a URLProtocol no way to hand over a download"
                        ]
                    )
                )
            }
            context.afterDelegateQueue { try? FileManager.default.removeItem(at: file) }
        }
    }

    private static func makeEngineRequest(_ request: URLRequest, body: BodySource, setup: Setup, context: LoadContext)
        throws
        -> (HTTPEngineRequest, URL)
    {
        guard let original = request.url else { throw URLError(.badURL) }
        let url = target(of: original, setup: setup)
        let target: HTTPURL
        do {
            target = try HTTPURL(url.absoluteString)
        } catch {
            throw URLError(
                .badURL,
                userInfo: [NSLocalizedDescriptionKey: "\(error)", NSURLErrorFailingURLErrorKey: original]
            )
        }
        var headers = HTTPHeaders()
        for (name, value) in context.headersSetByTheApp(request) { headers.add(name: name, value: value) }
        for (name, value) in context.additionalHeaders where !headers.contains(name: name) {
            headers.add(name: name, value: value)
        }
        // What the system's HTTP stack adds to a request without them (User-Agent, Accept, ...).
        let method = request.httpMethod ?? "GET"
        // The form Content-Type goes with a body the request itself carries (httpBody or a stream), not
        // with an upload task's data or file: the system adds it in the same cases.
        var hasBody = request.httpBody?.isEmpty == false || request.httpBodyStream != nil
        if case .stream = body { hasBody = true }
        for field in SystemRequestDefaults.current.missingFields(
            present: headers.map(\.name),
            method: method,
            hasBody: hasBody
        ) {
            headers.add(name: field.name, value: field.value)
        }
        let cookie = SystemRequestDefaults.cookieHeader(
            setByApp: headers.first(name: "cookie"),
            stored: context.cookieStorage.flatMap { CookieRules.header(for: url, in: $0) },
            handlesCookies: request.httpShouldHandleCookies && context.cookieStorage != nil
        )
        headers.remove(name: "cookie")
        if let cookie { headers.add(name: "Cookie", value: cookie) }
        var engineRequest = HTTPEngineRequest(
            method: HTTPMethod(rawValue: method),
            url: target,
            headers: headers,
            body: try body.engineBody(
                declaredLength: BodyLength.declared(
                    contentLength: headers.first(name: "content-length"),
                    taskExpects: context.expectedUploadLength
                )
            )
        )
        // URLSession decodes a gzip or deflate body whoever asked for it (an app's own Accept-Encoding
        // is sent as it is, and the body still arrives decoded).
        engineRequest.decompress = true
        engineRequest.networkAccess = NetworkAccess.forLoad(session: context.sessionConfiguration, request: request)
        engineRequest.tuning = ConnectionTuning.forLoad(session: context.sessionConfiguration, request: request)
        engineRequest.connectionLimit = context.sessionConfiguration?.httpMaximumConnectionsPerHost
        if let body = engineRequest.body { engineRequest.onBodySent = context.uploadProgress(expected: body.length) }
        let idle = context.requestTimeout(request)
        if idle > 0 { engineRequest.idleTimeout = .milliseconds(Int64(idle * 1000)) }
        if let total = context.resourceTimeout, total > 0 { engineRequest.timeout = .milliseconds(Int64(total * 1000)) }
        return (engineRequest, url)
    }
}

/// Serializes calls to the URL loading system's client and stops them for good once the load has
/// finished, failed or been stopped: corelibs crashes on a client call for a finished task.
///
/// One rule on every platform: each call is made where the loading system wants it, in order, through
/// `schedule` (`LoadContext.clientSchedule`): corelibs, the task's serial work queue, where
/// `stopLoading` also runs and where the session's unsynchronized task registry lives; Apple, the run
/// loop of the thread that called `startLoading`, where `stopLoading` is called too. That is what keeps
/// a call and `stopLoading` apart; the lock only guards the gate's own state and is never held during a
/// call, so the loading system may call back into the protocol (`stopLoading`) from inside one. Without a
/// schedule (a load with no task) the call is made on the calling thread.
///
/// `@unchecked Sendable`: the client and the protocol are not Sendable; they and `open` are read and
/// written only under `lock`, and `schedule` is a `let`. A plain `NIOLock`, not a `NIOLockedValueBox`:
/// the box is `Sendable` only for `Sendable` state.
final class ClientGate: @unchecked Sendable {
    private let lock = NIOLock()
    private var open = true
    // Dropped when the gate closes: the protocol holds its gate (`loading`) and the gate its protocol,
    // and corelibs never calls `stopLoading` after a load that finished, so a gate that kept these
    // would keep every finished protocol, its request body and its client alive (the soak found it:
    // about 20 KiB per URLSession request, for good).
    private var client: (any URLProtocolClient)?
    private var owner: URLProtocol?
    private let schedule: ClientSchedule?

    init(client: any URLProtocolClient, owner: URLProtocol, schedule: ClientSchedule?) {
        self.client = client
        self.owner = owner
        self.schedule = schedule
    }

    var isOpen: Bool { lock.withLock { open } }

    /// The client and protocol while the gate is open; with `closing`, the gate closes as they are
    /// taken (the last call).
    private func take(closing: Bool) -> (any URLProtocolClient, URLProtocol)? {
        lock.withLock {
            guard open, let client, let owner else { return nil }
            if closing { (open, self.client, self.owner) = (false, nil, nil) }
            return (client, owner)
        }
    }

    /// Makes one client call unless the gate is closed by then; false when it already is.
    @discardableResult
    func send(_ call: @escaping @Sendable (any URLProtocolClient, URLProtocol) -> Void) -> Bool {
        let attempt: @Sendable () -> Bool = {
            guard let (client, owner) = self.take(closing: false) else { return false }
            call(client, owner)
            return true
        }
        guard let schedule else { return attempt() }
        schedule { _ = attempt() }
        return isOpen
    }

    /// The last client call (finished or failed), then closed. The protocol is released after the
    /// call, outside the lock (its deinit may run then).
    func finish(_ call: @escaping @Sendable (any URLProtocolClient, URLProtocol) -> Void) {
        let last: @Sendable () -> Void = {
            guard let (client, owner) = self.take(closing: true) else { return }
            call(client, owner)
        }
        if let schedule { schedule(last) } else { last() }
    }

    func close() {
        let released = take(closing: true)
        _ = released
    }
}

/// Runs a client call on the loading system's own thread or queue, after the calls scheduled before it.
typealias ClientSchedule = @Sendable (@escaping @Sendable () -> Void) -> Void

/// A response from the URL cache, handed to the load's task: the loading system made it and nothing
/// changes it after.
struct UncheckedCachedResponse: @unchecked Sendable {
    let response: CachedURLResponse

    init(_ response: CachedURLResponse) { self.response = response }

    /// What the cache rules need to know; nil for a response that is not HTTP.
    var facts: CacheUse.Cached? {
        guard let http = response.response as? HTTPURLResponse else { return nil }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields { headers["\(name)"] = "\(value)" }
        return CacheUse.Cached(headers: headers, storedAt: nil)
    }
}

/// A response body kept for the URL cache while it is delivered, dropped once it outgrows what the
/// cache would keep (`CacheUse.fits`).
struct CacheableBody {
    let capacity: Int
    private(set) var data: Data? = Data()

    init(capacity: Int) { self.capacity = capacity }

    mutating func append(_ more: Data) {
        guard var kept = data else { return }
        kept.append(more)
        data = CacheUse.fits(size: kept.count, capacity: capacity) ? kept : nil
    }
}
