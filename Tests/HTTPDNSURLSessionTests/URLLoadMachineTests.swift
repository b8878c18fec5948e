// The rules of a URLSession load (URLLoadMachine), without a session or a socket: the cache's answer,
// revalidation, cookies and HSTS, 401 rounds, redirects reported (Apple) or followed here (corelibs)
// with their method and body rules and their limit.

import Foundation
import NIOHTTP1
import Testing

@testable import HTTPDNSURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct URLLoadMachineTests {
    let url = URL(string: "https://a.test/start")!

    func machine(
        _ request: URLRequest? = nil,
        redirects: URLLoadMachine.RedirectHandling = .followHere(max: 2),
        keepsCookies: Bool = true
    ) -> URLLoadMachine {
        URLLoadMachine(
            request: request ?? URLRequest(url: url),
            redirects: redirects,
            keepsCookies: keepsCookies,
            cookiePolicy: .always
        )
    }

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
        guard case .send(let request) = stale.start(cached: validated, now: Date()) else {
            Issue.record("a stale response with a validator is revalidated")
            return
        }
        #expect(request.value(forHTTPHeaderField: "If-None-Match") == "\"v1\"")
        #expect(stale.responseArrived(status: 304, headers: [:], from: url).next == .serveRevalidated)

        // A changed resource replaces it: the new response is delivered.
        var changed = machine()
        _ = changed.start(cached: validated, now: Date())
        #expect(changed.responseArrived(status: 200, headers: [:], from: url).next == .deliver)
    }

    @Test func cookiesAndHSTSAreEffectsOfEveryResponseWhereTheyApply() {
        var load = machine()
        _ = load.start(cached: nil, now: Date())
        let headers: HTTPHeaders = [
            "Set-Cookie": "a=1", "set-cookie": "b=2", "Strict-Transport-Security": "max-age=60",
        ]
        let (effects, next) = load.responseArrived(status: 200, headers: headers, from: url)
        #expect(next == .deliver)
        #expect(effects.contains(.recordStrictTransportSecurity(policy: "max-age=60", host: "a.test")))
        #expect(effects.contains(.storeCookies(["a=1", "b=2"], from: url)))
        // Plain http never records HSTS; a request that does not handle cookies stores none.
        var request = URLRequest(url: URL(string: "http://a.test/")!)
        request.httpShouldHandleCookies = false
        var plain = machine(request)
        _ = plain.start(cached: nil, now: Date())
        #expect(plain.responseArrived(status: 200, headers: headers, from: request.url!).effects.isEmpty)
        // Nor does a session without a cookie storage.
        var none = machine(keepsCookies: false)
        _ = none.start(cached: nil, now: Date())
        #expect(
            !none.responseArrived(status: 200, headers: headers, from: url).effects.contains {
                $0 != .recordStrictTransportSecurity(policy: "max-age=60", host: "a.test")
            }
        )
    }

    @Test func a401AsksTheDelegateABoundedNumberOfTimes() {
        var load = machine()
        _ = load.start(cached: nil, now: Date())
        let challenge: HTTPHeaders = ["WWW-Authenticate": "Basic realm=\"r\""]
        guard case .authenticate(_, rounds: 0) = load.responseArrived(status: 401, headers: challenge, from: url).next
        else {
            Issue.record("a 401 with a Basic challenge asks the delegate")
            return
        }
        var again = URLRequest(url: url)
        again.setValue("Basic YTpi", forHTTPHeaderField: "Authorization")
        #expect(load.authenticated(again) == .send(again))
        // Rounds are counted: after the last one the 401 is the answer.
        for round in 1..<URLLoadMachine.maxAuthenticationRounds {
            #expect(
                load.responseArrived(status: 401, headers: challenge, from: url).next
                    == .authenticate(again, rounds: round)
            )
            _ = load.authenticated(again)
        }
        #expect(load.responseArrived(status: 401, headers: challenge, from: url).next == .deliver)
        // No credential from the delegate: the 401 is delivered.
        var declined = machine()
        _ = declined.start(cached: nil, now: Date())
        _ = declined.responseArrived(status: 401, headers: challenge, from: url)
        #expect(declined.authenticated(nil) == .deliver)
        // A challenge we do not speak is delivered without asking.
        var bearer = machine()
        _ = bearer.start(cached: nil, now: Date())
        #expect(
            bearer.responseArrived(status: 401, headers: ["WWW-Authenticate": "Bearer"], from: url).next == .deliver
        )
    }

    @Test func appleReportsARedirectToTheLoadingSystem() {
        var load = machine(redirects: .reportToSystem)
        _ = load.start(cached: nil, now: Date())
        guard
            case .reportRedirect(let next) = load.responseArrived(status: 302, headers: ["Location": "/two"], from: url)
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
            case .askRedirect(let next) = load.responseArrived(status: 303, headers: ["Location": "/r"], from: url).next
        else {
            Issue.record("the delegate is asked about a redirect")
            return
        }
        #expect(next.httpMethod == "GET")
        #expect(load.redirectDecided(next) == .follow(next, body: .none))
        // 307: the same method and body (the request's own data again; a stream sent once is kept, and
        // fails when claimed a second time unless it was read ahead).
        var keep = machine(post())
        _ = keep.start(cached: nil, now: Date())
        guard
            case .askRedirect(let same) = keep.responseArrived(status: 307, headers: ["Location": "/r"], from: url).next
        else { return }
        #expect(same.httpMethod == "POST" && same.httpBody == Data("a=1".utf8))
        #expect(keep.redirectDecided(same) == .follow(same, body: .fromRequest))
        var streamed = URLRequest(url: url)
        streamed.httpMethod = "POST"
        streamed.httpBodyStream = InputStream(data: Data("a=1".utf8))
        var kept = machine(streamed)
        _ = kept.start(cached: nil, now: Date())
        guard
            case .askRedirect(let again) = kept.responseArrived(status: 308, headers: ["Location": "/r"], from: url)
                .next
        else { return }
        #expect(kept.redirectDecided(again) == .follow(again, body: .keep))
        // The delegate's own request with a body of its own.
        var own = machine(post())
        _ = own.start(cached: nil, now: Date())
        _ = own.responseArrived(status: 307, headers: ["Location": "/r"], from: url)
        var replaced = URLRequest(url: URL(string: "https://a.test/other")!)
        replaced.httpMethod = "PUT"
        replaced.httpBody = Data("new".utf8)
        #expect(own.redirectDecided(replaced) == .follow(replaced, body: .fromRequest))
        // Refused: the 3xx is the answer.
        var refused = machine()
        _ = refused.start(cached: nil, now: Date())
        _ = refused.responseArrived(status: 302, headers: ["Location": "/r"], from: url)
        #expect(refused.redirectDecided(nil) == .deliver)
        // The limit: the third hop of two fails the load.
        var loop = machine()
        _ = loop.start(cached: nil, now: Date())
        for _ in 0..<2 {
            guard
                case .askRedirect(let next) = loop.responseArrived(
                    status: 302,
                    headers: ["Location": "/loop"],
                    from: url
                ).next
            else { return }
            _ = loop.redirectDecided(next)
        }
        guard case .fail(let error) = loop.responseArrived(status: 302, headers: ["Location": "/loop"], from: url).next
        else {
            Issue.record("too many redirects fail the load")
            return
        }
        #expect(error.code == .httpTooManyRedirects)
    }
}
