// The rules of a URLSession load (URLLoadMachine), without a session or a socket: the cache's answer,
// revalidation, cookies and HSTS, 401 rounds, redirects reported (Apple) or followed here (corelibs)
// with their method and body rules and their limit.

import Foundation
import HTTPDNSEngine
import NIOHTTP1
import Testing

@testable import HTTPDNSURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct URLLoadMachineTests {
    let url = URL(string: "https://a.test/start")!

    typealias Machine = URLLoadMachine<String>

    func machine(
        _ request: URLRequest? = nil,
        redirects: URLLoad.RedirectHandling = .followHere(max: 2),
        keepsCookies: Bool = true,
        mayAsk: Bool = true
    ) -> Machine {
        Machine(
            request: request ?? URLRequest(url: url),
            redirects: redirects,
            keepsCookies: keepsCookies,
            cookiePolicy: .always,
            mayAsk: mayAsk
        )
    }

    /// A plain send of `request`.
    func send(_ request: URLRequest) -> Machine.Action { .send(URLLoad.Send(request: request), drop: nil) }

    func post() -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = Data("a=1".utf8)
        return request
    }

    @Test func aFreshCachedResponseAnswersAndAStaleOneIsRevalidated() {
        var fresh = machine()
        let cached = CacheUse.Cached(headers: ["Cache-Control": "max-age=600", "Date": "x"], storedAt: Date())
        #expect(fresh.start(cached: cached, now: Date()) == .serveCached)

        var stale = machine()
        let validated = CacheUse.Cached(headers: ["ETag": "\"v1\"", "Cache-Control": "no-cache"], storedAt: Date())
        guard case .send(let send, nil) = stale.start(cached: validated, now: Date()) else {
            Issue.record("a stale response with a validator is revalidated")
            return
        }
        #expect(send.request.value(forHTTPHeaderField: "If-None-Match") == "\"v1\"")
        #expect(stale.responseArrived("r", status: 304, headers: [:], from: url).next == .serveRevalidated("r"))

        // A changed resource replaces it: the new response is delivered.
        var changed = machine()
        _ = changed.start(cached: validated, now: Date())
        #expect(changed.responseArrived("r", status: 200, headers: [:], from: url).next == .deliver("r"))
    }

    @Test func cookiesAndHSTSAreEffectsOfEveryResponseWhereTheyApply() {
        var load = machine()
        _ = load.start(cached: nil, now: Date())
        let headers: HTTPHeaders = [
            "Set-Cookie": "a=1", "set-cookie": "b=2", "Strict-Transport-Security": "max-age=60",
        ]
        let (effects, next) = load.responseArrived("r", status: 200, headers: headers, from: url)
        #expect(next == .deliver("r"))
        #expect(effects.contains(.recordStrictTransportSecurity(policy: "max-age=60", host: "a.test")))
        #expect(effects.contains(.storeCookies(["a=1", "b=2"], from: url)))
        // Plain http never records HSTS; a request that does not handle cookies stores none.
        var request = URLRequest(url: URL(string: "http://a.test/")!)
        request.httpShouldHandleCookies = false
        var plain = machine(request)
        _ = plain.start(cached: nil, now: Date())
        #expect(plain.responseArrived("r", status: 200, headers: headers, from: request.url!).effects.isEmpty)
        // Nor does a session without a cookie storage.
        var none = machine(keepsCookies: false)
        _ = none.start(cached: nil, now: Date())
        #expect(
            !none.responseArrived("r", status: 200, headers: headers, from: url).effects.contains {
                $0 != .recordStrictTransportSecurity(policy: "max-age=60", host: "a.test")
            }
        )
    }

    @Test func a401AsksTheDelegateABoundedNumberOfTimes() {
        var load = machine()
        _ = load.start(cached: nil, now: Date())
        let challenge: HTTPHeaders = ["WWW-Authenticate": "Basic realm=\"r\""]
        guard
            case .authenticate("r", _, rounds: 0) = load.responseArrived(
                "r",
                status: 401,
                headers: challenge,
                from: url
            ).next
        else {
            Issue.record("a 401 with a Basic challenge asks the delegate")
            return
        }
        var again = URLRequest(url: url)
        again.setValue("Basic YTpi", forHTTPHeaderField: "Authorization")
        #expect(load.authenticated(again) == send(again))
        // Rounds are counted: after the last one the 401 is the answer.
        for round in 1..<URLLoad.maxAuthenticationRounds {
            #expect(
                load.responseArrived("r", status: 401, headers: challenge, from: url).next
                    == .authenticate("r", request: again, rounds: round)
            )
            _ = load.authenticated(again)
        }
        #expect(load.responseArrived("r", status: 401, headers: challenge, from: url).next == .deliver("r"))
        // No credential from the delegate: the 401 is delivered.
        var declined = machine()
        _ = declined.start(cached: nil, now: Date())
        _ = declined.responseArrived("r", status: 401, headers: challenge, from: url)
        #expect(declined.authenticated(nil) == .deliver("r"))
        // A challenge we do not speak is delivered without asking.
        var bearer = machine()
        _ = bearer.start(cached: nil, now: Date())
        #expect(
            bearer.responseArrived("r", status: 401, headers: ["WWW-Authenticate": "Bearer"], from: url).next
                == .deliver("r")
        )
    }

    @Test func appleReportsARedirectToTheLoadingSystem() {
        var load = machine(redirects: .reportToSystem)
        _ = load.start(cached: nil, now: Date())
        guard
            case .reportRedirect("r", let next) = load.responseArrived(
                "r",
                status: 302,
                headers: ["Location": "/two"],
                from: url
            )
            .next
        else {
            Issue.record("a redirect is reported on Apple platforms")
            return
        }
        #expect(next.url?.absoluteString == "https://a.test/two")
    }

    @Test func corelibsFollowsHereWithTheMethodAndBodyRulesAndALimit() {
        // 303 after a POST: GET, no body.
        var load = machine(post())
        _ = load.start(cached: nil, now: Date())
        guard
            case .askRedirect("r", let next) = load.responseArrived(
                "r",
                status: 303,
                headers: ["Location": "/r"],
                from: url
            ).next
        else {
            Issue.record("the delegate is asked about a redirect")
            return
        }
        #expect(next.httpMethod == "GET")
        #expect(
            load.redirectDecided(next) == .send(URLLoad.Send(request: next, body: URLLoad.BodyChange.none), drop: "r")
        )
        // 307: the same method and body (the request's own data again; a stream sent once is kept, and
        // fails when claimed a second time unless it was read ahead).
        var keep = machine(post())
        _ = keep.start(cached: nil, now: Date())
        guard
            case .askRedirect(_, let same) = keep.responseArrived(
                "r",
                status: 307,
                headers: ["Location": "/r"],
                from: url
            ).next
        else { return }
        #expect(same.httpMethod == "POST" && same.httpBody == Data("a=1".utf8))
        #expect(keep.redirectDecided(same) == .send(URLLoad.Send(request: same, body: .fromRequest), drop: "r"))
        var streamed = URLRequest(url: url)
        streamed.httpMethod = "POST"
        streamed.httpBodyStream = InputStream(data: Data("a=1".utf8))
        var kept = machine(streamed)
        _ = kept.start(cached: nil, now: Date())
        guard
            case .askRedirect(_, let again) = kept.responseArrived(
                "r",
                status: 308,
                headers: ["Location": "/r"],
                from: url
            )
            .next
        else { return }
        #expect(kept.redirectDecided(again) == .send(URLLoad.Send(request: again, body: .keep), drop: "r"))
        // The delegate's own request with a body of its own.
        var own = machine(post())
        _ = own.start(cached: nil, now: Date())
        _ = own.responseArrived("r", status: 307, headers: ["Location": "/r"], from: url)
        var replaced = URLRequest(url: URL(string: "https://a.test/other")!)
        replaced.httpMethod = "PUT"
        replaced.httpBody = Data("new".utf8)
        #expect(own.redirectDecided(replaced) == .send(URLLoad.Send(request: replaced, body: .fromRequest), drop: "r"))
        // Refused: the 3xx is the answer.
        var refused = machine()
        _ = refused.start(cached: nil, now: Date())
        _ = refused.responseArrived("r", status: 302, headers: ["Location": "/r"], from: url)
        #expect(refused.redirectDecided(nil) == .deliver("r"))
        // The limit: the third hop of two fails the load.
        var loop = machine()
        _ = loop.start(cached: nil, now: Date())
        for _ in 0..<2 {
            guard
                case .askRedirect(_, let next) = loop.responseArrived(
                    "r",
                    status: 302,
                    headers: ["Location": "/loop"],
                    from: url
                ).next
            else { return }
            _ = loop.redirectDecided(next)
        }
        guard
            case .fail(let error) = loop.responseArrived("r", status: 302, headers: ["Location": "/loop"], from: url)
                .next
        else {
            Issue.record("too many redirects fail the load")
            return
        }
        #expect(error.code == .httpTooManyRedirects)
    }
    @Test func aCertificateOurCheckRefusedIsSentAgainAskingTheDelegateOnce() {
        var load = machine()
        #expect(load.start(cached: nil, now: Date()) == send(URLRequest(url: url)))
        // Nothing went out on the refused connection: the same request, now asking the delegate.
        let asking = URLLoad.Send(request: URLRequest(url: url), asksAboutTrust: true)
        #expect(load.sendFailed(.certificateRefused(host: "a.test", asked: false)) == .send(asking, drop: nil))
        // Refused again, with the delegate asked: the send's error is the load's.
        #expect(load.sendFailed(.certificateRefused(host: "a.test", asked: true)) == .failWithSendError)
        // Never a second re-ask of one send, whatever the executor reports: no loop.
        var once = machine()
        _ = once.start(cached: nil, now: Date())
        _ = once.sendFailed(.certificateRefused(host: "a.test", asked: false))
        #expect(once.sendFailed(.certificateRefused(host: "a.test", asked: false)) == .failWithSendError)
        // Later sends of the load to that host ask from the start (a redirect back to it, say).
        var hops = machine()
        _ = hops.start(cached: nil, now: Date())
        _ = hops.sendFailed(.certificateRefused(host: "a.test", asked: false))
        guard
            case .askRedirect(_, let next) = hops.responseArrived(
                "r",
                status: 302,
                headers: ["Location": "/b"],
                from: url
            ).next
        else {
            Issue.record("a redirect is asked about")
            return
        }
        guard case .send(let follow, drop: "r") = hops.redirectDecided(next) else { return }
        #expect(follow.asksAboutTrust)
        // A task with no delegate to ask: the refusal stands at once.
        var alone = machine(mayAsk: false)
        _ = alone.start(cached: nil, now: Date())
        #expect(alone.sendFailed(.certificateRefused(host: "a.test", asked: false)) == .failWithSendError)
    }

    @Test func aProxysCredentialsAreAskedForABoundedNumberOfTimesAndKeptOnceTheyWorked() {
        var load = machine()
        _ = load.start(cached: nil, now: Date())
        let credentials = ProxyCredentials(user: "alice", password: "wonderland")
        var with = URLLoad.Send(request: URLRequest(url: url))
        with.proxyCredentials = credentials
        for round in 0..<URLLoad.maxAuthenticationRounds {
            #expect(load.sendFailed(.proxyWantsCredentials) == .askProxyCredentials(rounds: round))
            #expect(load.proxyAnswered(.credentials(credentials)) == .send(with, drop: nil))
        }
        #expect(load.sendFailed(.proxyWantsCredentials) == .failWithSendError)
        // The credential worked once a response came through the proxy.
        var worked = machine()
        _ = worked.start(cached: nil, now: Date())
        _ = worked.sendFailed(.proxyWantsCredentials)
        _ = worked.proxyAnswered(.credentials(credentials))
        #expect(worked.responseArrived("r", status: 200, headers: [:], from: url).effects == [.credentialWorked])
        // No credential: the 407 stands; cancelled: the load is.
        var none = machine()
        _ = none.start(cached: nil, now: Date())
        _ = none.sendFailed(.proxyWantsCredentials)
        #expect(none.proxyAnswered(.none) == .failWithSendError)
        var cancelled = machine()
        _ = cancelled.start(cached: nil, now: Date())
        _ = cancelled.sendFailed(.proxyWantsCredentials)
        #expect(cancelled.proxyAnswered(.cancelled) == .fail(URLError(.cancelled)))
        // Nobody to ask: the 407 is the load's error.
        var alone = machine(mayAsk: false)
        _ = alone.start(cached: nil, now: Date())
        #expect(alone.sendFailed(.proxyWantsCredentials) == .failWithSendError)
    }

    @Test func anOriginCredentialIsKeptOnlyWhenTheNextResponseIsNoFurther401() {
        let challenge: HTTPHeaders = ["WWW-Authenticate": "Basic realm=\"r\""]
        var load = machine()
        _ = load.start(cached: nil, now: Date())
        _ = load.responseArrived("r", status: 401, headers: challenge, from: url)
        _ = load.authenticated(URLRequest(url: url))
        #expect(
            !load.responseArrived("r", status: 401, headers: challenge, from: url).effects.contains(.credentialWorked)
        )
        _ = load.authenticated(URLRequest(url: url))
        #expect(load.responseArrived("r", status: 200, headers: [:], from: url).effects == [.credentialWorked])
    }

    @Test func anEventTheStateDoesNotExpectFailsTheLoadInsteadOfHangingIt() {
        var load = machine()
        guard case .fail(let error) = load.authenticated(nil) else {
            Issue.record("an answer nobody asked for fails the load")
            return
        }
        #expect(error.code == .unknown)
        _ = load.start(cached: nil, now: Date())
        #expect(load.responseArrived("r", status: 200, headers: [:], from: url).next == .deliver("r"))
        // Finished: a second response is out of step too.
        guard case .fail = load.responseArrived("r", status: 200, headers: [:], from: url).next else {
            Issue.record("a response after the answer fails the load")
            return
        }
    }
}
