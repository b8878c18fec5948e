import Foundation
@testable import HTTPDNSURLSession
import NIOHTTP1
import HTTPDNSCore
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing

/// The protocol's pure rules, without peers.
@Suite struct URLProtocolRuleTests {
    @Test func cacheStoragePolicyFollowsTheResponse() {
        func policy(_ method: String, _ status: Int, _ cc: String?, auth: Bool = false) -> URLCache.StoragePolicy {
            var headers = HTTPHeaders()
            if let cc { headers.add(name: "Cache-Control", value: cc) }
            return Translation.cacheStoragePolicy(
                method: method,
                requestHeaders: auth ? ["Authorization": "Bearer x"] : [:],
                status: status,
                headers: headers
            )
        }
        #expect(policy("GET", 200, nil) == .allowed)
        #expect(policy("GET", 200, "private, no-store") == .notAllowed)
        #expect(policy("POST", 200, nil) == .notAllowed)
        #expect(policy("GET", 500, nil) == .notAllowed)
        #expect(policy("GET", 200, nil, auth: true) == .notAllowed)
        #expect(policy("GET", 200, "public", auth: true) == .allowed)
    }

    @Test func cookieDomainsMatchByLabelAndPathsBySegment() {
        #expect(CookieRules.domainMatches(host: "a.test", domain: "a.test"))
        #expect(CookieRules.domainMatches(host: "sub.a.test", domain: "a.test"))
        #expect(!CookieRules.domainMatches(host: "evila.test", domain: "a.test"))
        #expect(!CookieRules.domainMatches(host: "a.test.evil", domain: "a.test"))
        #expect(!CookieRules.domainMatches(host: "10.0.0.1", domain: "0.0.1"))
        #expect(CookieRules.pathMatches(requestPath: "/cookie/only/x", cookiePath: "/cookie/only"))
        #expect(CookieRules.pathMatches(requestPath: "/cookie/only", cookiePath: "/cookie/only"))
        #expect(!CookieRules.pathMatches(requestPath: "/cookie/onlyx", cookiePath: "/cookie/only"))
        #expect(CookieRules.pathMatches(requestPath: "/a/b", cookiePath: "/"))
        let from = URL(string: "http://a.test/x")!
        func cookie(_ header: String) -> HTTPCookie {
            HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": header], for: from)[0]
        }
        #expect(CookieRules.mayStore(cookie("k=v"), from: from))
        #expect(CookieRules.mayStore(cookie("k=v; Domain=a.test"), from: from))
        #expect(!CookieRules.mayStore(cookie("k=v; Domain=b.test"), from: from))
        #expect(!CookieRules.mayStore(cookie("k=v; Domain=test"), from: from))
        #expect(!CookieRules.shouldSend(cookie("k=v; Secure"), to: URL(string: "http://a.test/")!))
        #expect(CookieRules.shouldSend(cookie("k=v; Secure"), to: URL(string: "https://a.test/")!))
        #expect(!CookieRules.shouldSend(cookie("k=v"), to: URL(string: "http://sub.a.test/")!))
        #expect(CookieRules.maxAge(in: "k=v; Path=/; max-age=0") == 0)
    }

    @Test func redirectRequestsFollowTheMethodRules() throws {
        func next(_ status: UInt, _ method: String, to location: String = "/next") -> URLRequest? {
            var request = URLRequest(url: URL(string: "https://a.test/start")!)
            request.httpMethod = method
            request.httpBody = Data("body".utf8)
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
            request.setValue("Bearer t", forHTTPHeaderField: "Authorization")
            var headers = HTTPHeaders()
            headers.add(name: "Location", value: location)
            return Translation.redirectRequest(
                after: request,
                sentTo: request.url!,
                status: Int(status),
                headers: headers
            )?.request
        }
        for status: UInt in [301, 302] {
            #expect(next(status, "POST")?.httpMethod == "GET")
            #expect(next(status, "POST")?.httpBody == nil)
            #expect(next(status, "PUT")?.httpMethod == "PUT")
        }
        #expect(next(303, "PUT")?.httpMethod == "GET")
        #expect(next(303, "HEAD")?.httpMethod == "HEAD")
        for status: UInt in [307, 308] {
            let kept = try #require(next(status, "POST"))
            #expect(kept.httpMethod == "POST" && kept.httpBody == Data("body".utf8))
            #expect(kept.value(forHTTPHeaderField: "Authorization") == "Bearer t")
        }
        let cross = try #require(next(307, "POST", to: "https://b.test/x"))
        #expect(cross.value(forHTTPHeaderField: "Authorization") == nil && cross.httpBody != nil)
        #expect(next(302, "GET", to: "ftp://a.test/") == nil)
        #expect(next(200, "GET") == nil)
        #expect(
            Translation.upgraded(URL(string: "http://a.test/x")!, upgrade: [try HostPattern("*.test")]).absoluteString
                == "https://a.test/x"
        )
        #expect(
            Translation.upgraded(URL(string: "http://b.com/x")!, upgrade: [try HostPattern("*.test")]).scheme == "http"
        )
    }
}
