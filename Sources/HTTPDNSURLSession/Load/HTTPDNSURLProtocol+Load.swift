// The load loop: the executor of `URLLoadMachine`. Each action is I/O (send through the engine, ask the
// delegate, hand the answer to the client); its outcome goes back to the machine, which names the next.
// The rules (cache, revalidation, cookies, HSTS, 401, redirects, their limits) are the machine's; the
// platform's say is in the load's context (`LoadContext.redirectHandling`), so there is no `#if` here.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension HTTPDNSURLProtocol {
    static func load(
        _ original: URLRequest,
        cached: UncheckedCachedResponse?,
        setup: Setup,
        context: LoadContext,
        gate: ClientGate
    ) async {
        // Metrics go to the app before the last client call, so they are there when the task completes.
        var metrics = HTTPDNSTaskMetrics(taskIdentifier: context.taskIdentifier, url: original.url, hops: [])
        do {
            var machine = URLLoadMachine(
                request: original,
                redirects: context.redirectHandling(maxRedirects: setup.maxRedirects),
                keepsCookies: context.cookieStorage != nil,
                cookiePolicy: context.cookieAcceptPolicy
            )
            var body = context.body(of: original)
            if case .stream(let reader) = body, InputStreamReader.readsAhead {
                body = try await reader.buffered(upTo: InputStreamReader.replayLimit)
            }
            // The response the machine is deciding on, and where its request went.
            var last: (response: HTTPEngineResponse, url: URL, urlResponse: HTTPURLResponse)?
            // The credential a 401 round sent, kept once a response shows it worked (not another 401).
            var unconfirmed: (URLCredential, URLProtectionSpace)?
            var action = machine.start(cached: cached?.facts, now: Date())
            while true {
                switch action {
                case .serveCached:
                    guard let cached else { throw outOfStep }
                    setup.onMetrics?(metrics)
                    deliverCached(cached, gate: gate)
                    return

                case .send(let request), .follow(let request, _):
                    // A suspended task sends nothing until it is resumed.
                    await gate.waitWhileSuspended()
                    if case .follow(_, let change) = action {
                        body = changed(body, by: change, to: request)
                        context.followedRedirect(to: request)
                    }
                    if let (response, _, _) = last {
                        // The response before is not the answer: a redirect's body is read and dropped
                        // (`authenticate` has done so with a 401's).
                        if case .follow = action { _ = try? await response.body.collect(upTo: 1 << 16) }
                        metrics.hops.append(response.metrics)
                    }
                    let (engineRequest, url) = try makeEngineRequest(
                        request,
                        body: body,
                        setup: setup,
                        context: context
                    )
                    let response = try await send(engineRequest, setup: setup, context: context, gate: gate)
                    last = (response, url, Translation.urlResponse(response, url: url))
                    if let (credential, space) = unconfirmed, response.status.code != 401 {
                        context.store(credential, for: space)
                    }
                    unconfirmed = nil
                    let (effects, next) = machine.responseArrived(
                        status: Int(response.status.code),
                        headers: response.headers,
                        from: url
                    )
                    apply(effects, setup: setup, context: context)
                    action = next

                case .serveRevalidated:
                    guard let cached, let (response, _, _) = last else { throw outOfStep }
                    // Not modified: the cached response is the answer, refreshed by the 304's fields.
                    _ = try? await response.body.collect(upTo: 1 << 16)
                    metrics.hops.append(response.metrics)
                    setup.onMetrics?(metrics)
                    deliverRevalidated(cached, notModified: response.headers, context: context, gate: gate)
                    return

                case .authenticate(let request, let rounds):
                    guard let (response, url, urlResponse) = last else { throw outOfStep }
                    var failures = rounds
                    let again = try await authenticate(
                        after: response,
                        as: urlResponse,
                        request: request,
                        url: url,
                        body: body,
                        failures: &failures,
                        unconfirmed: &unconfirmed,
                        context: context,
                        gate: gate
                    )
                    action = machine.authenticated(again)

                case .reportRedirect(let next):
                    // The loading system (Apple) asks the delegate and starts a new load for the next hop,
                    // stopping this one. When the delegate refuses, the redirect response is the task's
                    // answer: the load finishes (an error here would fail the task instead), with the 3xx
                    // as its response and no body.
                    guard let (response, _, urlResponse) = last else { throw outOfStep }
                    _ = try? await response.body.collect(upTo: 1 << 16)
                    metrics.hops.append(response.metrics)
                    setup.onMetrics?(metrics)
                    gate.send { $0.urlProtocol($1, wasRedirectedTo: next, redirectResponse: urlResponse) }
                    gate.finish { $0.urlProtocolDidFinishLoading($1) }
                    return

                case .askRedirect(let next):
                    guard let (_, _, urlResponse) = last else { throw outOfStep }
                    action = machine.redirectDecided(
                        await context.redirectDecision(response: urlResponse, newRequest: next)
                    )

                case .deliver:
                    guard let (response, _, urlResponse) = last else { throw outOfStep }
                    try await deliver(response, as: urlResponse, request: machine.current, context: context, gate: gate)
                    {
                        metrics.hops.append(response.metrics)
                        setup.onMetrics?(metrics)
                    }
                    return

                case .fail(let error):
                    throw error
                }
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

    /// An action that needs a response (or a cached one) came without it: a defect of the machine, which
    /// fails the task rather than leaving it hanging.
    private static var outOfStep: URLError {
        URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "HTTPDNS's URL load went out of step"])
    }

    /// The body a followed redirect sends.
    private static func changed(_ body: BodySource, by change: URLLoadMachine.BodyChange, to request: URLRequest)
        -> BodySource
    {
        switch change {
        case .keep: return body
        case .none: return .none
        case .fromRequest:
            if let data = request.httpBody { return .data(data) }
            if let stream = request.httpBodyStream { return .stream(InputStreamReader(stream)) }
            return .none
        }
    }

    /// What every response does besides the machine's action: HSTS recorded, cookies stored.
    private static func apply(_ effects: [URLLoadMachine.Effect], setup: Setup, context: LoadContext) {
        for effect in effects {
            switch effect {
            case .recordStrictTransportSecurity(let policy, let host):
                // Kept by the resolver, saved with its cache (the engine records what it sees itself,
                // but not for a connection the app's delegate decided on).
                if systemAppliesHSTS { setup.resolver.strictTransportSecurity(policy, from: host) }
            case .storeCookies(let values, let url):
                if let storage = context.cookieStorage { CookieRules.store(values, from: url, in: storage) }
            }
        }
    }
}
