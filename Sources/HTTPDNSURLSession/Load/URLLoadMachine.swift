// The rules of one URLSession load the protocol serves, as a value: events in (the cache's response, a
// response head, the delegate's answers), actions out (serve the cache, send, ask the delegate, report
// or follow a redirect, deliver, fail). The protocol's load loop (HTTPDNSURLProtocol+Load.swift) is its
// executor: it does the I/O each action names and feeds the outcome back. Modelled on AsyncHTTPClient's
// request and redirect state (`RequestBag+StateMachine`, `RedirectState`).
//
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
import NIOHTTP1

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct URLLoadMachine {
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

    enum Action: Equatable {
        /// The cached response is the answer: nothing goes out.
        case serveCached
        /// Send `request` (the first, or again with credentials; a revalidation carries its fields).
        case send(URLRequest)
        /// A 304 to the revalidation: the cached response is the answer.
        case serveRevalidated
        /// Ask the delegate about the 401 just received; answer with `authenticated(_:)`.
        case authenticate(URLRequest, rounds: Int)
        /// Tell the loading system the response redirects to `request`; the load ends there.
        case reportRedirect(URLRequest)
        /// Ask the delegate whether to follow to `request`; answer with `redirectDecided(_:)`.
        case askRedirect(URLRequest)
        /// Follow the redirect: send `request`, with its body as `body` says.
        case follow(URLRequest, body: BodyChange)
        /// The response just received is the answer.
        case deliver
        case fail(URLError)
    }

    /// What every response does besides the action.
    enum Effect: Equatable {
        /// Record the host's Strict-Transport-Security policy.
        case recordStrictTransportSecurity(policy: String, host: String)
        /// Store these Set-Cookie values, received from `url`.
        case storeCookies([String], from: URL)
    }

    /// 401 rounds answered per load at most before the 401 stands (this machine alone counts them), and
    /// proxy 407 rounds per request.
    static let maxAuthenticationRounds = 8

    private(set) var current: URLRequest
    private let redirects: RedirectHandling
    /// Whether the session keeps cookies (a storage, and it sets them); each request says whether it
    /// handles them (`httpShouldHandleCookies`).
    private let keepsCookies: Bool
    private let cookiePolicy: HTTPCookie.AcceptPolicy
    private var revalidating = false
    private var hops = 0
    private var authenticationRounds = 0
    /// The response being decided on, while the delegate is asked about its 401.
    private var pending: (status: Int, headers: HTTPHeaders, url: URL)?
    /// Whether the redirect being asked about keeps the body (307, 308).
    private var redirectKeepsBody = false

    init(
        request: URLRequest,
        redirects: RedirectHandling,
        keepsCookies: Bool,
        cookiePolicy: HTTPCookie.AcceptPolicy
    ) {
        current = request
        self.redirects = redirects
        self.keepsCookies = keepsCookies
        self.cookiePolicy = cookiePolicy
    }

    /// The load starts, with the session cache's response for the request (nil: none) at `now`.
    mutating func start(cached: CacheUse.Cached?, now: Date) -> Action {
        switch CacheUse.decide(
            policy: current.cachePolicy,
            requestHeaders: current.allHTTPHeaderFields ?? [:],
            cached: cached,
            now: now
        ) {
        case .serveCached:
            return .serveCached
        case .revalidate(let fields):
            for (name, value) in fields { current.setValue(value, forHTTPHeaderField: name) }
            revalidating = true
            return .send(current)
        case .load:
            return .send(current)
        }
    }

    /// A response head arrived for the request last sent, which went to `url` (after an upgrade to
    /// https, say).
    mutating func responseArrived(status: Int, headers: HTTPHeaders, from url: URL) -> (effects: [Effect], next: Action)
    {
        if revalidating {
            revalidating = false
            if status == 304 { return ([], .serveRevalidated) }
        }
        var effects: [Effect] = []
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
            pending = (status, headers, url)
            return (effects, .authenticate(current, rounds: authenticationRounds))
        }
        return (effects, afterAuthentication(status: status, headers: headers, url: url))
    }

    /// The delegate's answer to a 401: the request to send again with its credentials, or nil to go on
    /// with the 401 as the response.
    mutating func authenticated(_ again: URLRequest?) -> Action {
        guard let (status, headers, url) = pending else { return .deliver }
        pending = nil
        if let again {
            authenticationRounds += 1
            current = again
            return .send(again)
        }
        return afterAuthentication(status: status, headers: headers, url: url)
    }

    /// The delegate's answer to a redirect followed here: the request to send (nil: refused, the 3xx
    /// is the answer).
    mutating func redirectDecided(_ decided: URLRequest?) -> Action {
        guard let decided else { return .deliver }
        let sameMethod = decided.httpMethod?.uppercased() == current.httpMethod?.uppercased()
        let body: BodyChange
        if decided.httpBody != nil {
            body = .fromRequest
        } else if let stream = decided.httpBodyStream, stream !== current.httpBodyStream {
            body = .fromRequest  // a new stream from the delegate
        } else if !(redirectKeepsBody && sameMethod) {
            body = .none
        } else {
            body = .keep  // the same body again (a stream already sent fails when claimed)
        }
        current = decided
        return .follow(decided, body: body)
    }

    private mutating func afterAuthentication(status: Int, headers: HTTPHeaders, url: URL) -> Action {
        guard
            let (next, keepsBody) = Translation.redirectRequest(
                after: current,
                sentTo: url,
                status: status,
                headers: headers
            )
        else { return .deliver }
        switch redirects {
        case .reportToSystem:
            return .reportRedirect(next)
        case .followHere(let max):
            hops += 1
            guard hops <= max else {
                return .fail(
                    URLError(.httpTooManyRedirects, userInfo: [NSLocalizedDescriptionKey: "more than \(max) redirects"])
                )
            }
            redirectKeepsBody = keepsBody
            return .askRedirect(next)
        }
    }
}
