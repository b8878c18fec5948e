// The URLProtocol that serves URLSession requests through the IP-direct engine.
//
// The URL keeps its hostname (TLS SNI, certificate check, Host); only the socket address comes from
// HTTPDNS, at connect time. An `Interception` holds the setup (Interception.swift) and enables the
// protocol on a session configuration: `interception.enable(on: configuration)`.
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
    /// What the loads of one interception use (Interception.swift).
    package struct Setup: Sendable {
        var resolver: HTTPDNSResolver
        package var engine: HTTPEngine
        /// Hosts to intercept; by default the resolver's policy (which selects nothing until configured).
        var intercept: HostPolicy
        /// http:// hosts sent over https instead (HTTP/2 when the server offers it).
        package var upgradeToHTTPS: [HostPattern] = []
        /// Where cookies are kept when a request has `httpShouldHandleCookies`; nil: the session's
        /// storage where it can be found (Linux), else `HTTPCookieStorage.shared`.
        var cookieStorage: HTTPCookieStorage?
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

    /// The interception this class leads to (see Interception.swift); nil when none serves it.
    static var interception: Interception? { ProtocolBindings.binding(of: self)?.interception }

    /// Header marking a request the protocol must leave alone where URLProtocol properties do not
    /// survive (swift-corelibs-foundation drops them): it goes on to the server, which ignores it.
    static let handledHeader = "X-HTTPDNS-Handled"
    /// The URLProtocol property marking such a request on Apple platforms: nothing goes on the wire.
    static let handledProperty = "HTTPDNSHandled"
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
        guard let setup = interception?.setup, let url = request.url,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty,
            !isMarkedHandled(request)
        else { return false }
        // `route` takes the host as URL gives it: an IP literal bracketed or not, a name in any case.
        guard case .httpdns = setup.intercept.lookup(for: host) else { return false }
        // watchOS (TN3135): the system's loading serves every request, as with no SDK.
        guard HandBack.lowLevelNetworkingAllowed else { return false }
        // A proxy the system would use, and none given to HTTPDNS: the system's request (SystemProxy).
        if setup.engine.configuration.network.proxy == nil, SystemProxy.applies(to: url) { return false }
        // Where it really goes (https after an upgrade): what ATS judges.
        let targetScheme = target(of: url, setup: setup).scheme?.lowercased()
        if let reason = HandBack.reason(
            cachePolicy: request.cachePolicy,
            forbidsSomeNetworks: NetworkAccess(of: request) != .unrestricted,
            transportHonoursNetworkRules: HandBack.transportHonoursNetworkRules,
            systemHonoursNetworkRules: HandBack.systemHonoursNetworkRules,
            cleartextForbidden: targetScheme == "http" && !TransportSecurity.current.allowsCleartext(to: host),
            systemTLS: targetScheme == "https" ? TransportSecurity.current.systemOnlyReason(forHTTPSTo: host) : nil,
            waitsWhileOffline: ConfigurationSlots.waitsWhileOffline(protocolClass: self)
        ) {
            setup.logger.info("left to the system's URL loading: \(reason)", metadata: ["host": "\(host)"])
            return false
        }
        return true
    }

    package override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    /// Where a request for `url` really goes: https for the hosts `upgradeToHTTPS` lists and, where the
    /// system applies HSTS (Apple platforms), for the hosts the resolver knows serve https (they asked
    /// for HSTS; on port 80, an HTTPS record), unless the engine keeps them on http.
    static func target(of url: URL, setup: Setup) -> URL {
        Translation.upgraded(url, upgrade: setup.upgradeToHTTPS) { host in
            systemAppliesHSTS && setup.engine.knownHTTPSOrigin(host, port: url.port ?? 80)
        }
    }

    /// Whether the system this route stands in for applies HSTS: Apple's URL loading does;
    /// swift-corelibs-foundation has none, so there the route does not either (the app would see a
    /// difference from the system).
    static var systemAppliesHSTS: Bool {
        #if canImport(Darwin)
            return true
        #else
            return false
        #endif
    }

    /// Whether the loading system suspends a task by `stopLoading` and resumes it by `startLoading` on
    /// the same protocol: swift-corelibs-foundation's `URLSessionTask.suspend()` and `resume()`.
    static var suspendStopsLoading: Bool {
        #if canImport(Darwin)
            return false
        #else
            return true
        #endif
    }

    private struct Loading {
        var gate: ClientGate
        var work: Task<Void, Never>
    }
    private let loading = NIOLockedValueBox<Loading?>(nil)

    package override func startLoading() {
        // Resumed after a suspension (corelibs stops and starts the same protocol): the load goes on
        // where it was and its held calls are made; nothing is sent again (a POST stays one POST).
        if let gate = loading.withLockedValue({ $0?.gate }), gate.isOpen, gate.isSuspended {
            gate.resume()
            return
        }
        guard let client else { return }
        // The class the system instantiated: on Apple platforms a configuration slot's, made at run time
        // (`object_getClass` sees it where `type(of:)` may report the protocol itself).
        #if canImport(ObjectiveC)
            let instantiated: AnyClass = object_getClass(self) ?? type(of: self)
        #else
            let instantiated: AnyClass = type(of: self)
        #endif
        guard let interception = ProtocolBindings.binding(of: instantiated)?.interception,
            let setup = interception.setup
        else {
            client.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        let context = LoadContext(task: task, interception: interception, setup: setup, protocolClass: instantiated)
        let gate = ClientGate(client: client, owner: self, schedule: context.host.clientSchedule)
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

    /// Cancels the load, or, for a task that is suspended (corelibs calls this on `suspend()` and
    /// `startLoading` on the same protocol on `resume()`), holds it: it reads no more and its client
    /// calls wait for the resume. Only where that is known to be the loading system's way: elsewhere a
    /// held load that no `startLoading` resumed would wait for good.
    package override func stopLoading() {
        if Self.suspendStopsLoading, task?.state == .suspended, let gate = loading.withLockedValue({ $0?.gate }),
            gate.isOpen
        {
            gate.suspend()
            return
        }
        loading.withLockedValue { state in
            state?.gate.close()
            state?.work.cancel()
            state = nil
        }
    }
}
