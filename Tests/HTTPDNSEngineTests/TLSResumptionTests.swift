// When a TLS connection may resume a session (TLSResumption): issue 72, item 6. Pure; the Network.framework
// transport that applies it is compile-checked (scripts/apple-check.sh).

@testable import HTTPDNSEngine
import Testing

@Suite struct TLSResumptionTests {
    /// A resumed session with no chain in its metadata was refused, and every later connection to that
    /// host resumed the same ticket and was refused too while it lived. Now the connection is made again
    /// at once with a full handshake, and so are the host's next ones until one passes.
    @Test func aResumedSessionWithNoChainIsMadeAgainWithAFullHandshake() {
        var rule = TLSResumption()
        #expect(rule.allowsResumption("a.test:443"))
        let again = rule.ended("a.test:443", .resumedWithoutChain)
        #expect(again)
        #expect(!rule.allowsResumption("a.test:443"))
        #expect(rule.allowsResumption("b.test:443"))
        let afterPass = rule.ended("a.test:443", .passed)
        #expect(!afterPass)
        #expect(rule.allowsResumption("a.test:443"))
    }

    /// A handshake refused after the system's check passed (a pin, the app's delegate) may leave a ticket:
    /// the host's next connections are judged on full handshakes until one passes.
    @Test func aRefusedHandshakesTicketIsNotResumed() {
        var rule = TLSResumption()
        let afterRefusal = rule.ended("a.test:443", .refused)
        #expect(!afterRefusal)
        #expect(!rule.allowsResumption("a.test:443"))
        let afterOther = rule.ended("a.test:443", .other)
        #expect(!afterOther)
        #expect(!rule.allowsResumption("a.test:443"))
        _ = rule.ended("a.test:443", .passed)
        #expect(rule.allowsResumption("a.test:443"))
    }

    @Test func theErrorsOfOurChecksAreRefusalsAndOthersSayNothing() {
        #expect(TLSResumption.outcome(of: ResumedWithoutChain(host: "a.test")) == .resumedWithoutChain)
        for code in [HTTPEngineError.Code.untrustedCertificate, .certificateNameMismatch, .pinMismatch] {
            #expect(TLSResumption.outcome(of: HTTPEngineError(code, "x")) == .refused)
        }
        #expect(TLSResumption.outcome(of: HTTPEngineError(.connectTimeout, "x")) == .other)
    }

    @Test func atMostCapacityOriginsAreRemembered() {
        var rule = TLSResumption()
        for n in 0...TLSResumption.capacity { _ = rule.ended("h\(n).test:443", .refused) }
        #expect(rule.allowsResumption("h0.test:443"))
        #expect(!rule.allowsResumption("h1.test:443"))
        #expect(!rule.allowsResumption("h\(TLSResumption.capacity).test:443"))
    }
}
