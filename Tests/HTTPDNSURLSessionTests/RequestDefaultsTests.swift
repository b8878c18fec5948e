import Foundation
import Testing

@testable import HTTPDNSURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the system's HTTP stack adds to a request, and which Cookie header goes out: the rules the
/// protocol applies so an app sends what it sent before it enabled HTTPDNS (the conformance suite
/// compares the result with the system's own requests).
@Suite struct RequestDefaultsTests {
    let defaults = SystemRequestDefaults(
        userAgent: "App/7 CFNetwork/1410 Darwin/22.5.0",
        acceptLanguage: "en-US,zh-Hans;q=0.9"
    )

    @Test func aBareGETGetsUserAgentAcceptAndLanguage() {
        let added = defaults.missingFields(present: [], method: "GET", hasBody: false)
        #expect(added.map(\.name) == ["User-Agent", "Accept", "Accept-Language"])
        #expect(added.first { $0.name == "Accept" }?.value == "*/*")
    }

    @Test func whatTheAppOrSessionSetIsNeverReplaced() {
        let added = defaults.missingFields(
            present: ["user-agent", "ACCEPT", "Accept-Language", "content-type"],
            method: "POST",
            hasBody: true
        )
        #expect(added.isEmpty)
    }

    @Test func onlyAPOSTWithABodyGetsTheFormContentType() {
        func contentType(_ method: String, _ body: Bool) -> String? {
            defaults.missingFields(present: [], method: method, hasBody: body).first { $0.name == "Content-Type" }?
                .value
        }
        #expect(contentType("POST", true) == "application/x-www-form-urlencoded")
        #expect(contentType("post", true) == "application/x-www-form-urlencoded")
        #expect(contentType("POST", false) == nil)
        #expect(contentType("PUT", true) == nil)
    }

    @Test func theAppsCookieHeaderGoesWhenTheStoreHasNothing() {
        #expect(SystemRequestDefaults.cookieHeader(setByApp: "x=1", stored: nil, handlesCookies: true) == "x=1")
        #expect(SystemRequestDefaults.cookieHeader(setByApp: "x=1", stored: "a=1", handlesCookies: true) == "a=1")
        #expect(SystemRequestDefaults.cookieHeader(setByApp: nil, stored: "a=1", handlesCookies: false) == nil)
        #expect(SystemRequestDefaults.cookieHeader(setByApp: "x=1", stored: "a=1", handlesCookies: false) == "x=1")
    }

    @Test func userAgentsAreSpelledAsEachPlatformSpellsThem() {
        #expect(
            SystemRequestDefaults.corelibsUserAgent(processName: "myapp", curlVersion: "7.88.1")
                == "myapp (unknown version) curl/7.88.1"
        )
        #expect(
            SystemRequestDefaults.appleUserAgent(
                bundleName: "My%20App",
                bundleVersion: "42",
                cfNetwork: "1410.0.3",
                darwin: "22.5.0"
            )
                == "My%20App/42 CFNetwork/1410.0.3 Darwin/22.5.0"
        )
        #expect(
            SystemRequestDefaults.curlVersion(fromVersionText: "libcurl/7.88.1 OpenSSL/3.0.15 zlib/1.2.13") == "7.88.1"
        )
        #expect(SystemRequestDefaults.curlVersion(fromVersionText: "something else") == nil)
    }

    @Test func appleWeighsEachLaterLanguageLower() {
        #expect(SystemRequestDefaults.appleAcceptLanguage([]) == nil)
        #expect(SystemRequestDefaults.appleAcceptLanguage(["en-US"]) == "en-US")
        #expect(
            SystemRequestDefaults.appleAcceptLanguage(["zh-Hans-CN", "en-US", "ja"])
                == "zh-Hans-CN,en-US;q=0.9,ja;q=0.8"
        )
    }

    @Test func theRunningPlatformsUserAgentIsTheSystems() {
        #if !canImport(Darwin)
            #expect(
                SystemRequestDefaults.current.userAgent.hasPrefix(
                    "\(ProcessInfo.processInfo.processName) (unknown version) curl/"
                )
            )
            #expect(!SystemRequestDefaults.current.userAgent.hasSuffix("curl/0.0.0"))
        #endif
    }

    @Test func theAcceptPolicyDecidesWhoMaySetCookies() {
        let url = URL(string: "https://api.example.com/x")!
        #expect(CookieRules.accepts(.always, from: url, mainDocumentURL: nil))
        #expect(!CookieRules.accepts(.never, from: url, mainDocumentURL: nil))
        #expect(CookieRules.accepts(.onlyFromMainDocumentDomain, from: url, mainDocumentURL: nil))
        #expect(
            CookieRules.accepts(
                .onlyFromMainDocumentDomain,
                from: url,
                mainDocumentURL: URL(string: "https://api.example.com/")!
            )
        )
        #expect(
            !CookieRules.accepts(
                .onlyFromMainDocumentDomain,
                from: url,
                mainDocumentURL: URL(string: "https://other.test/")!
            )
        )
    }
}
