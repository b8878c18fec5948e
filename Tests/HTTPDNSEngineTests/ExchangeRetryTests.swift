// When a broken exchange is sent again on a new connection (ExchangeRetry), rule by rule, no sockets.

@testable import HTTPDNSEngine
import NIOCore
import NIOHTTP1
import Testing

@Suite struct ExchangeRetryTests {
    func attempt(
        _ method: HTTPMethod = .GET,
        body: HTTPRequestBody? = nil,
        reused: Bool = false,
        version: HTTPVersionUsed = .http1,
        goAway: Bool = false,
        left: Int = ExchangeRetry.limit
    ) throws -> ExchangeRetry.Attempt {
        let request = try HTTPEngineRequest(method: method, url: "https://a.test/", body: body)
        return ExchangeRetry.Attempt(
            request: request,
            reused: reused,
            version: version,
            goAwayReceived: goAway,
            retriesLeft: left
        )
    }

    @Test func aStreamTheServerNeverProcessedGoesAgainWhateverItsMethod() throws {
        #expect(
            ExchangeRetry.sendAgain(
                after: .neverProcessed,
                try attempt(.POST, body: .bytes(ByteBuffer(string: "x")), version: .http2)
            )
        )
        #expect(ExchangeRetry.sendAgain(after: .neverProcessed, try attempt(.PATCH, version: .http2)))
    }

    @Test func aBrokenExchangeGoesAgainOnlyInTheKnownRaceAndOnlyIfIdempotent() throws {
        // A kept-alive HTTP/1.1 connection the server had closed.
        #expect(ExchangeRetry.sendAgain(after: .broken, try attempt(.GET, reused: true)))
        #expect(ExchangeRetry.sendAgain(after: .broken, try attempt(.PUT, reused: true)))
        // An HTTP/2 connection closing with GOAWAY.
        #expect(ExchangeRetry.sendAgain(after: .broken, try attempt(.DELETE, version: .http2, goAway: true)))
        // A new HTTP/1.1 connection, or h2 without GOAWAY: a real failure, not the race.
        #expect(!ExchangeRetry.sendAgain(after: .broken, try attempt(.GET, reused: false)))
        #expect(!ExchangeRetry.sendAgain(after: .broken, try attempt(.GET, reused: true, version: .http2)))
        // POST may have been acted on.
        #expect(!ExchangeRetry.sendAgain(after: .broken, try attempt(.POST, reused: true)))
    }

    @Test func aStreamedBodyOrNoRetryLeftIsNeverSentAgain() throws {
        let streamed = HTTPRequestBody.stream(length: 1) { AsyncThrowingStream { $0.finish() } }
        #expect(!ExchangeRetry.sendAgain(after: .neverProcessed, try attempt(.PUT, body: streamed, version: .http2)))
        #expect(!ExchangeRetry.sendAgain(after: .broken, try attempt(.PUT, body: streamed, reused: true)))
        #expect(!ExchangeRetry.sendAgain(after: .neverProcessed, try attempt(left: 0)))
        #expect(!ExchangeRetry.sendAgain(after: .broken, try attempt(reused: true, left: 0)))
    }
}
