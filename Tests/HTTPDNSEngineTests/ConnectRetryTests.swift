// Which failed connects the pool tries again: the ones a second try may fix, decided from
// error values, never from text. The timing of the tries is PoolStateMachine's (PoolStateMachineTests).

import HTTPDNSCore
@testable import HTTPDNSEngine
import NIOCore
import NIOPosix
import NIOSSL
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ConnectRetryTests {
    func mayHelp(_ code: HTTPEngineError.Code, underlying: (any Error)? = nil) -> Bool {
        ConnectAttemptFailed.retryMayHelp(HTTPEngineError(code, "", underlying: underlying))
    }

    @Test func resetsClosesAndTimeoutsAreTriedAgain() {
        #expect(mayHelp(.connectTimeout))
        #expect(mayHelp(.tlsHandshakeTimeout))
        #expect(mayHelp(.protocolError))  // closed during the TLS handshake
        #expect(mayHelp(.totalTimeout))  // out of the waiters' time: a later waiter gets a connect of its own
        #expect(mayHelp(.tlsFailed, underlying: IOError(errnoCode: ECONNRESET, reason: "read")))
        #expect(mayHelp(.tlsFailed, underlying: NIOSSLError.handshakeFailed(.sslError([.eofDuringHandshake]))))
        #expect(mayHelp(.tlsFailed, underlying: NIOSSLError.handshakeFailed(.syscallError)))
        #expect(mayHelp(.connectFailed, underlying: IOError(errnoCode: ECONNRESET, reason: "connect")))
    }

    @Test func verdictsThatWouldComeAgainFailAtOnce() {
        for code: HTTPEngineError.Code in [
            .untrustedCertificate, .certificateNameMismatch, .pinMismatch, .nameNotResolved, .noAddresses,
            .invalidRequest, .cancelled, .shutdown,
        ] {
            #expect(!mayHelp(code), "\(code)")
        }
        // A TLS alert or another BoringSSL verdict.
        #expect(!mayHelp(.tlsFailed, underlying: NIOSSLError.handshakeFailed(.sslError([]))))
        #expect(!mayHelp(.tlsFailed, underlying: NIOSSLError.handshakeFailed(.zeroReturn)))
        // Not an engine error at all.
        #expect(!ConnectAttemptFailed.retryMayHelp(CancellationError()))
    }

    @Test func aConnectionRefusedAtEveryAddressIsFinal() async throws {
        #expect(!mayHelp(.connectFailed, underlying: IOError(errnoCode: ECONNREFUSED, reason: "connect")))
        // A port nothing listens on, at both loopback addresses: the engine's own error for it.
        let closed = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(closed.localAddress?.port)
        try await closed.close()
        let engine = try HTTPEngine(
            addressSource: StaticAddressSource(["a.test": [IPAddress("127.0.0.1")!, IPAddress("::1")!]])
        )
        defer { engine.shutdown() }
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: "http://a.test:\(port)/"))
            Issue.record("connected to a closed port")
        } catch let error as HTTPEngineError {
            #expect(error.code == .connectFailed)
            #expect(!ConnectAttemptFailed.retryMayHelp(error), "\(error)")
        }
    }
}
