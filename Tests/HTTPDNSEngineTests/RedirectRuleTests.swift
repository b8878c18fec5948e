@testable import HTTPDNSEngine
@testable import HTTPDNSTestTools
import HTTPDNSCore
import NIOCore
import NIOHTTP1
import Testing

@Suite struct RedirectRuleTests {
    func response(_ status: HTTPResponseStatus, _ location: String) throws -> HTTPEngineResponse {
        let url = try HTTPURL("https://a.test/start")
        return HTTPEngineResponse(
            status: status,
            headers: ["location": location],
            version: .http1,
            url: url,
            body: .empty,
            recorder: MetricsRecorder(url: url)
        )
    }

    func post() throws -> HTTPEngineRequest {
        try HTTPEngineRequest(
            method: .POST,
            url: "https://a.test/start",
            headers: ["content-type": "text/plain", "authorization": "secret", "cookie": "k=v"],
            body: .bytes([1, 2, 3])
        )
    }

    @Test(arguments: [(301, "GET"), (302, "GET"), (303, "GET"), (307, "POST"), (308, "POST")])
    func methodRules(_ code: Int, _ method: String) throws {
        let next = try #require(
            try HTTPEngine.redirect(from: post(), response: response(.init(statusCode: code), "/next"))
        )
        #expect(next.method.rawValue == method)
        #expect((next.body != nil) == (method == "POST"))
        #expect(next.headers.contains(name: "content-type") == (method == "POST"))
        #expect(next.url.description == "https://a.test/next")
    }

    @Test func credentialsAreNotCarriedToAnotherHost() throws {
        let same = try #require(try HTTPEngine.redirect(from: post(), response: response(.temporaryRedirect, "/x")))
        #expect(same.headers.contains(name: "authorization"))
        let other = try #require(
            try HTTPEngine.redirect(from: post(), response: response(.temporaryRedirect, "https://b.test:8443/x"))
        )
        #expect(!other.headers.contains(name: "authorization"))
        #expect(!other.headers.contains(name: "cookie"))
        #expect(other.url.host == "b.test")
        #expect(other.url.port == 8443)
    }

    @Test func streamedBodyCannotBeReplayedBy307() throws {
        var request = try post()
        request.body = .stream(length: nil) { AsyncThrowingStream { $0.finish() } }
        #expect(throws: HTTPEngineError.self) {
            try HTTPEngine.redirect(from: request, response: response(.temporaryRedirect, "/x"))
        }
        #expect(try HTTPEngine.redirect(from: request, response: response(.seeOther, "/x"))?.method == .GET)
    }

    @Test func nonRedirectsAndMissingLocationAreNotFollowed() throws {
        #expect(try HTTPEngine.redirect(from: post(), response: response(.ok, "/x")) == nil)
        let url = try HTTPURL("https://a.test/")
        let noLocation = HTTPEngineResponse(
            status: .found,
            headers: [:],
            version: .http1,
            url: url,
            body: .empty,
            recorder: MetricsRecorder(url: url)
        )
        #expect(try HTTPEngine.redirect(from: post(), response: noLocation) == nil)
    }

    @Test(arguments: ["ftp://x/", "https://", "not a url", "https://a b/", "https://a.test:0/"])
    func badURLsAreRejected(_ text: String) {
        #expect(throws: HTTPEngineError.self) { try HTTPURL(text) }
    }
}
