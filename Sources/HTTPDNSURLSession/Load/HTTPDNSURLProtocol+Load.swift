// The load loop: the one loop of a URL load, the executor of `URLLoadMachine`. Each action is I/O (send
// through the engine, ask the delegate, hand the answer to the client); its outcome goes back to the
// machine, which names the next. The rules (cache, revalidation, cookies, HSTS, 401 and 407 rounds, the
// trust re-ask, redirects, their limits) are the machine's, and the response an action needs comes with
// it; the platform's say is in the load's context (`LoadContext.redirectHandling`), so there is no `#if`
// here.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension HTTPDNSURLProtocol {
    /// A response the load received: the engine's, where its request went, and the app's view of it.
    struct Received {
        var response: HTTPEngineResponse
        var url: URL
        var urlResponse: HTTPURLResponse
    }

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
            var machine = URLLoadMachine<Received>(
                request: original,
                redirects: context.delivery.redirectHandling(maxRedirects: setup.maxRedirects),
                keepsCookies: context.cookieStorage != nil,
                cookiePolicy: context.cookieAcceptPolicy,
                mayAsk: context.host.mayHaveDelegate
            )
            var body = context.body(of: original)
            if case .stream(let reader) = body, InputStreamReader.readsAhead {
                body = try await reader.buffered(upTo: InputStreamReader.replayLimit)
            }
            // The credential the last 401 or 407 round sent: kept once the machine says it worked.
            var unconfirmed: (URLCredential, URLProtectionSpace)?
            // The send that failed last: its error (the load's, when the machine says so) and its URL.
            var failedSend: (error: any Error, url: HTTPURL)?
            var action = machine.start(cached: cached?.facts, now: Date())
            while true {
                switch action {
                case .serveCached:
                    guard let cached else { throw URLError(.unknown) }
                    setup.onMetrics?(metrics)
                    deliverCached(cached, gate: gate)
                    return

                case .send(let send, let drop):
                    // A suspended task sends nothing until it is resumed.
                    await gate.waitWhileSuspended()
                    if let drop {
                        // The redirect's body is read and dropped; its request goes on with its own body.
                        _ = try? await drop.response.body.collect(upTo: 1 << 16)
                        metrics.hops.append(drop.response.metrics)
                        context.delivery.followedRedirect(to: send.request)
                    }
                    if let change = send.body { body = changed(body, by: change, to: send.request) }
                    let (made, url) = try makeEngineRequest(send.request, body: body, setup: setup, context: context)
                    let (engineRequest, terms) = try prepared(
                        made,
                        as: send,
                        setup: setup,
                        context: context,
                        gate: gate
                    )
                    let response: HTTPEngineResponse
                    do {
                        response = try await setup.engine.execute(engineRequest, terms: terms)
                    } catch {
                        failedSend = (error, engineRequest.url)
                        let failure = sendFailure(
                            error,
                            of: engineRequest,
                            asked: terms.serverTrust != nil
                        )
                        if case .certificateRefused(let host, asked: false) = failure, context.host.mayHaveDelegate {
                            context.delivery.rememberCertificateNeedsDelegate(host)
                        }
                        action = machine.sendFailed(failure)
                        continue
                    }
                    let received = Received(
                        response: response,
                        url: url,
                        urlResponse: Translation.urlResponse(response, url: url)
                    )
                    let (effects, next) = machine.responseArrived(
                        received,
                        status: Int(response.status.code),
                        headers: response.headers,
                        from: url
                    )
                    apply(effects, credential: unconfirmed, setup: setup, context: context)
                    unconfirmed = nil
                    action = next

                case .serveRevalidated(let received):
                    // Not modified: the cached response is the answer, refreshed by the 304's fields.
                    guard let cached else { throw URLError(.unknown) }
                    _ = try? await received.response.body.collect(upTo: 1 << 16)
                    metrics.hops.append(received.response.metrics)
                    setup.onMetrics?(metrics)
                    deliverRevalidated(cached, notModified: received.response.headers, context: context, gate: gate)
                    return

                case .authenticate(let received, let request, let rounds):
                    metrics.hops.append(received.response.metrics)
                    let again = try await authenticate(
                        after: received,
                        request: request,
                        body: body,
                        failures: rounds,
                        unconfirmed: &unconfirmed,
                        context: context,
                        gate: gate
                    )
                    action = machine.authenticated(again)

                case .askProxyCredentials(let rounds):
                    let (answer, credential) = await askProxyCredentials(
                        for: failedSend,
                        rounds: rounds,
                        setup: setup,
                        context: context,
                        gate: gate
                    )
                    unconfirmed = credential
                    action = machine.proxyAnswered(answer)

                case .reportRedirect(let received, let next):
                    // The loading system (Apple) asks the delegate and starts a new load for the next hop,
                    // stopping this one. When the delegate refuses, the redirect response is the task's
                    // answer: the load finishes (an error here would fail the task instead), with the 3xx
                    // as its response and no body.
                    _ = try? await received.response.body.collect(upTo: 1 << 16)
                    metrics.hops.append(received.response.metrics)
                    setup.onMetrics?(metrics)
                    let urlResponse = received.urlResponse
                    gate.send { $0.urlProtocol($1, wasRedirectedTo: next, redirectResponse: urlResponse) }
                    gate.finish { $0.urlProtocolDidFinishLoading($1) }
                    return

                case .askRedirect(let received, let next):
                    action = machine.redirectDecided(
                        await context.delivery.redirectDecision(response: received.urlResponse, newRequest: next)
                    )

                case .deliver(let received):
                    try await deliver(
                        received.response,
                        as: received.urlResponse,
                        request: machine.current,
                        context: context,
                        gate: gate
                    ) {
                        metrics.hops.append(received.response.metrics)
                        setup.onMetrics?(metrics)
                    }
                    return

                case .failWithSendError:
                    throw failedSend?.error ?? URLError(.unknown)

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

    /// The body a followed redirect sends.
    private static func changed(_ body: BodySource, by change: URLLoad.BodyChange, to request: URLRequest)
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

    /// What a response does besides the machine's action: HSTS recorded, cookies stored, the credential
    /// the last round sent kept once it worked.
    private static func apply(
        _ effects: [URLLoad.Effect],
        credential: (URLCredential, URLProtectionSpace)?,
        setup: Setup,
        context: LoadContext
    ) {
        for effect in effects {
            switch effect {
            case .recordStrictTransportSecurity(let policy, let host):
                // Kept by the resolver, saved with its cache (the engine records what it sees itself,
                // but not for a connection the app's delegate decided on).
                if systemAppliesHSTS { setup.resolver.strictTransportSecurity(policy, from: host) }
            case .storeCookies(let values, let url):
                if let storage = context.cookieStorage { CookieRules.store(values, from: url, in: storage) }
            case .credentialWorked:
                if let (credential, space) = credential { context.store(credential, for: space) }
            }
        }
    }
}
