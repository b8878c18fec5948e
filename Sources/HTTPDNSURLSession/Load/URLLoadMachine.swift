// The rules of one URLSession load the protocol serves, as a value: events in (the cache's response, a
// response or a failed send, the delegate's answers), actions out (serve the cache, send, ask the
// delegate, report or follow a redirect, deliver, fail). The protocol's load loop
// (HTTPDNSURLProtocol+Load.swift) is its only executor and holds no decision of its own: it does the I/O
// each action names and feeds the outcome back. The machine is a state enum whose states carry what the
// next action needs (the response being decided on is in the state, and comes back in the action that
// uses it), modelled on AsyncHTTPClient's request and redirect state (`RequestBag+StateMachine`,
// `RedirectState`). `Response` is the executor's received response; the tests use a plain value.
//
// What it decides for a send that failed:
// - our check refused the origin's certificate and the send did not ask the delegate: the same request
//   again, asking it (nothing was sent on the refused connection), and every later send to that host;
// - a proxy wants credentials (407): the delegate is asked, at most `maxAuthenticationRounds` times, and
//   the request goes again with its answer;
// - otherwise the send's error is the load's.
// What it decides, in order, for each response:
// - a 304 to a revalidation: the cached response is the answer;
// - effects every response has: an https response's Strict-Transport-Security is recorded; Set-Cookie
//   is stored where the request handles cookies and the session's policy accepts them from that URL;
// - a 401 with a challenge we speak: the delegate is asked (at most `maxAuthenticationRounds` times);
// - a redirect: reported to the system (Apple, whose loading system asks the delegate and starts a new
//   load) or followed here after asking the delegate (corelibs), at most `max` hops;
// - otherwise the response is delivered.
// The platform difference is one value (`RedirectHandling`), chosen by the load's context; the machine
// has no `#if`. Pure and tested without a session (URLLoadMachineTests).

import Foundation
import HTTPDNSEngine
import NIOHTTP1

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A URL load's vocabulary that does not depend on the executor's response type.
enum URLLoad {
    /// Who follows redirects.
    enum RedirectHandling: Equatable {
        /// The loading system (Apple): the protocol reports the redirect and its load ends.
        case reportToSystem
        /// The protocol itself, asking the delegate (corelibs, which crashes on the report), at most
        /// `max` hops.
        case followHere(max: Int)
    }

    /// What becomes of the body when a redirect is followed.
    enum BodyChange: Equatable {
        /// The same body again (307, 308: method and body kept).
        case keep
        /// No body (303, or 301/302 after a POST).
        case none
        /// The body the delegate's new request carries.
        case fromRequest
    }

    /// One request to send, and what its connection must honour.
    struct Send: Equatable {
        var request: URLRequest
        /// Ask the delegate about the origin's certificate (our check refused this host's in this load);
        /// the session's own policy may ask anyway.
        var asksAboutTrust = false
        /// The delegate's credentials for the proxy, after a 407.
        var proxyCredentials: ProxyCredentials?
        /// A redirect followed here: what becomes of the body (nil for any other send).
        var body: BodyChange?
    }

    /// Why a send failed, as far as the rules care.
    enum SendFailure: Equatable {
        /// Our check refused the origin's certificate (untrusted, another name); `asked`: the send had
        /// already asked the delegate.
        case certificateRefused(host: String, asked: Bool)
        /// The proxy answered 407.
        case proxyWantsCredentials
        /// Anything else: the load fails with it.
        case other
    }

    /// The delegate's answer about the proxy's 407.
    enum ProxyAnswer: Equatable {
        case credentials(ProxyCredentials)
        /// No credential: the 407 stands.
        case none
        case cancelled
    }

    /// What a response does besides the action.
    enum Effect: Equatable {
        /// Record the host's Strict-Transport-Security policy.
        case recordStrictTransportSecurity(policy: String, host: String)
        /// Store these Set-Cookie values, received from `url`.
        case storeCookies([String], from: URL)
        /// The credential the last round sent worked (a response that is no 401 to it): keep it, as its
        /// persistence asks. A credential that never worked is never stored.
        case credentialWorked
    }

    /// 401 rounds answered per load at most before the 401 stands (this machine alone counts them), and
    /// proxy 407 rounds per request.
    static let maxAuthenticationRounds = 8

}

struct URLLoadMachine<Response> {
    typealias RedirectHandling = URLLoad.RedirectHandling
    typealias BodyChange = URLLoad.BodyChange
    typealias Send = URLLoad.Send
    typealias SendFailure = URLLoad.SendFailure
    typealias ProxyAnswer = URLLoad.ProxyAnswer
    typealias Effect = URLLoad.Effect

    static var maxAuthenticationRounds: Int { URLLoad.maxAuthenticationRounds }

    enum Action {
        /// The cached response is the answer: nothing goes out.
        case serveCached
        /// Send this (the first request, again with credentials or asking about trust, or a redirect
        /// followed here after `drop`ping the redirect's response); report `responseArrived` or
        /// `sendFailed`.
        case send(Send, drop: Response?)
        /// A 304 to the revalidation (`response`): the cached response is the answer.
        case serveRevalidated(Response)
        /// Ask the delegate about this 401 (`rounds` answered before); answer with `authenticated(_:)`.
        case authenticate(Response, request: URLRequest, rounds: Int)
        /// Ask the delegate for the proxy's credentials (`rounds` answered before); answer with
        /// `proxyAnswered(_:)`.
        case askProxyCredentials(rounds: Int)
        /// Tell the loading system that `response` redirects to `request`; the load ends there.
        case reportRedirect(Response, to: URLRequest)
        /// Ask the delegate whether to follow `response` to `request`; answer with `redirectDecided(_:)`.
        case askRedirect(Response, to: URLRequest)
        /// `response` is the answer.
        case deliver(Response)
        /// The failed send's own error is the load's.
        case failWithSendError
        case fail(URLError)
    }

    private enum State {
        /// Before `start`.
        case starting
        /// `send` is out; `revalidating`: it asks the origin about the cached response.
        case sending(Send, revalidating: Bool)
        /// The delegate is asked about this 401 (its facts, for what follows if it gives no credential).
        case authenticating(Response, status: Int, headers: HTTPHeaders, url: URL)
        /// The delegate is asked for the proxy's credentials for `send`.
        case askingProxy(Send)
        /// The delegate is asked about a redirect followed here; `keepsBody`: 307 or 308.
        case askingRedirect(Response, keepsBody: Bool)
        /// An answer was given, or the load failed.
        case finished
    }

    private var state = State.starting
    /// The request the load is at (after redirects followed here, with credentials added).
    private(set) var current: URLRequest
    private let redirects: RedirectHandling
    /// Whether the session keeps cookies (a storage, and it sets them); each request says whether it
    /// handles them (`httpShouldHandleCookies`).
    private let keepsCookies: Bool
    private let cookiePolicy: HTTPCookie.AcceptPolicy
    /// Whether the task may have a delegate to ask (about certificates, a proxy's 407).
    private let mayAsk: Bool
    private var hops = 0
    private var authenticationRounds = 0
    /// 407 rounds answered for the request being sent.
    private var proxyRounds = 0
    /// Hosts whose certificate our check refused in this load: their sends ask the delegate.
    private var refusedHosts: Set<String> = []
    /// Which credential the last send carried, until a response says whether it worked.
    private var credentialSent: CredentialKind?

    private enum CredentialKind { case origin, proxy }

    init(
        request: URLRequest,
        redirects: RedirectHandling,
        keepsCookies: Bool,
        cookiePolicy: HTTPCookie.AcceptPolicy,
        mayAsk: Bool = true
    ) {
        current = request
        self.redirects = redirects
        self.keepsCookies = keepsCookies
        self.cookiePolicy = cookiePolicy
        self.mayAsk = mayAsk
    }

    /// The load starts, with the session cache's response for the request (nil: none) at `now`.
    mutating func start(cached: CacheUse.Cached?, now: Date) -> Action {
        guard case .starting = state else { return outOfStep }
        switch CacheUse.decide(
            policy: current.cachePolicy,
            requestHeaders: current.allHTTPHeaderFields ?? [:],
            cached: cached,
            now: now
        ) {
        case .serveCached:
            state = .finished
            return .serveCached
        case .revalidate(let fields):
            for (name, value) in fields { current.setValue(value, forHTTPHeaderField: name) }
            return send(current, revalidating: true)
        case .load:
            return send(current)
        }
    }

    /// `response` arrived for the request last sent, which went to `url` (after an upgrade to https, say).
    mutating func responseArrived(_ response: Response, status: Int, headers: HTTPHeaders, from url: URL)
        -> (effects: [Effect], next: Action)
    {
        guard case .sending(_, let revalidating) = state else { return ([], outOfStep) }
        proxyRounds = 0
        var effects: [Effect] = []
        switch credentialSent {
        case .origin where status != 401, .proxy: effects.append(.credentialWorked)
        default: break
        }
        credentialSent = nil
        if revalidating, status == 304 {
            state = .finished
            return (effects, .serveRevalidated(response))
        }
        if url.scheme?.lowercased() == "https", let host = url.host,
            let policy = headers.first(name: "strict-transport-security")
        {
            effects.append(.recordStrictTransportSecurity(policy: policy, host: host))
        }
        let cookies = headers[canonicalForm: "set-cookie"].map(String.init)
        if keepsCookies, current.httpShouldHandleCookies, !cookies.isEmpty,
            CookieRules.accepts(cookiePolicy, from: url, mainDocumentURL: current.mainDocumentURL)
        {
            effects.append(.storeCookies(cookies, from: url))
        }
        if status == 401, authenticationRounds < Self.maxAuthenticationRounds,
            AuthChallenge.preferred(in: headers) != nil
        {
            state = .authenticating(response, status: status, headers: headers, url: url)
            return (effects, .authenticate(response, request: current, rounds: authenticationRounds))
        }
        return (effects, afterAuthentication(response, status: status, headers: headers, url: url))
    }

    /// The send failed (before any response).
    mutating func sendFailed(_ failure: SendFailure) -> Action {
        guard case .sending(var send, let revalidating) = state else { return outOfStep }
        switch failure {
        case .certificateRefused(let host, let asked) where mayAsk && !asked && !send.asksAboutTrust:
            refusedHosts.insert(host)
            send.asksAboutTrust = true
            state = .sending(send, revalidating: revalidating)
            return .send(send, drop: nil)
        case .proxyWantsCredentials where mayAsk && proxyRounds < Self.maxAuthenticationRounds:
            state = .askingProxy(send)
            return .askProxyCredentials(rounds: proxyRounds)
        default:
            state = .finished
            return .failWithSendError
        }
    }

    /// The delegate's answer about the proxy's 407.
    mutating func proxyAnswered(_ answer: ProxyAnswer) -> Action {
        guard case .askingProxy(var send) = state else { return outOfStep }
        switch answer {
        case .credentials(let credentials):
            proxyRounds += 1
            credentialSent = .proxy
            send.proxyCredentials = credentials
            state = .sending(send, revalidating: false)
            return .send(send, drop: nil)
        case .none:
            state = .finished
            return .failWithSendError
        case .cancelled:
            state = .finished
            return .fail(URLError(.cancelled))
        }
    }

    /// The delegate's answer to a 401: the request to send again with its credentials, or nil to go on
    /// with the 401 as the response.
    mutating func authenticated(_ again: URLRequest?) -> Action {
        guard case .authenticating(let response, let status, let headers, let url) = state else { return outOfStep }
        guard let again else { return afterAuthentication(response, status: status, headers: headers, url: url) }
        authenticationRounds += 1
        credentialSent = .origin
        current = again
        return send(again)
    }

    /// The delegate's answer to a redirect followed here: the request to send (nil: refused, the 3xx
    /// is the answer).
    mutating func redirectDecided(_ decided: URLRequest?) -> Action {
        guard case .askingRedirect(let response, let keepsBody) = state else { return outOfStep }
        guard let decided else {
            state = .finished
            return .deliver(response)
        }
        let sameMethod = decided.httpMethod?.uppercased() == current.httpMethod?.uppercased()
        let body: BodyChange
        if decided.httpBody != nil {
            body = .fromRequest
        } else if let stream = decided.httpBodyStream, stream !== current.httpBodyStream {
            body = .fromRequest  // a new stream from the delegate
        } else if !(keepsBody && sameMethod) {
            body = .none
        } else {
            body = .keep  // the same body again (a stream already sent fails when claimed)
        }
        current = decided
        var follow = Send(request: decided, body: body)
        follow.asksAboutTrust = decided.url?.host.map(refusedHosts.contains) ?? false
        state = .sending(follow, revalidating: false)
        return .send(follow, drop: response)
    }

    /// A send of `request`, asking about trust where this load already saw the host's certificate refused.
    private mutating func send(_ request: URLRequest, revalidating: Bool = false) -> Action {
        let send = Send(request: request, asksAboutTrust: request.url?.host.map(refusedHosts.contains) ?? false)
        state = .sending(send, revalidating: revalidating)
        return .send(send, drop: nil)
    }

    private mutating func afterAuthentication(_ response: Response, status: Int, headers: HTTPHeaders, url: URL)
        -> Action
    {
        guard
            let (next, keepsBody) = Translation.redirectRequest(
                after: current,
                sentTo: url,
                status: status,
                headers: headers
            )
        else {
            state = .finished
            return .deliver(response)
        }
        switch redirects {
        case .reportToSystem:
            state = .finished
            return .reportRedirect(response, to: next)
        case .followHere(let max):
            hops += 1
            guard hops <= max else {
                state = .finished
                return .fail(
                    URLError(.httpTooManyRedirects, userInfo: [NSLocalizedDescriptionKey: "more than \(max) redirects"])
                )
            }
            state = .askingRedirect(response, keepsBody: keepsBody)
            return .askRedirect(response, to: next)
        }
    }

    /// An event the state does not expect: a defect of the executor, which fails the task rather than
    /// leaving it hanging.
    private var outOfStep: Action {
        .fail(URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "HTTPDNS's URL load went out of step"]))
    }
}

extension URLLoadMachine.Action: Equatable where Response: Equatable {}
