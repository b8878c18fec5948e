// The checks a finished TLS handshake must pass, shared by both transports: our check, then the app's
// say, then pins (on any certificate of a chain our check verified, on the leaf alone of one the app
// accepted against it), and a handshake whose chain cannot be read refused.

@testable import HTTPDNSDemoPKI
import NIOConcurrencyHelpers
import NIOSSL
import Testing

@testable import HTTPDNSEngine

@Suite struct HandshakeChecksTests {
    /// A leaf for a.test and the CA that signed it, DER, the leaf first; and each one's pin.
    struct Chain {
        var ders: [[UInt8]]
        var leafPin: String
        var caPin: String
    }

    func chain() throws -> Chain {
        let pki = try DemoPKI()
        let leaf = try NIOSSLCertificate(bytes: Array(try pki.leafPEM("a.test").certificate.utf8), format: .pem)
        let ders = [try leaf.toDERBytes(), try pki.caCertificate.toDERBytes()]
        return Chain(
            ders: ders,
            leafPin: try PublicKeyPin.sha256(certificateDER: ders[0]),
            caPin: try PublicKeyPin.sha256(certificateDER: ders[1])
        )
    }

    static let untrusted = HTTPEngineError(.untrustedCertificate, "not trusted")

    func checks(pins: Set<String>? = nil, app: ServerTrustAnswer? = nil) -> HandshakeChecks {
        HandshakeChecks(
            host: "a.test",
            port: 443,
            serverTrust: app.map { answer in ServerTrustEvaluation(partition: 1, always: false) { _ in answer } },
            pins: pins
        )
    }

    /// The error `run` threw (nil when it passed).
    func outcome(_ checks: HandshakeChecks, chain: [[UInt8]], ourCheckFails: Bool) async -> (any Error)? {
        do {
            try await checks.run(chain: chain) { if ourCheckFails { throw Self.untrusted } }
            return nil
        } catch {
            return error
        }
    }

    func isPinMismatch(_ error: (any Error)?) -> Bool { (error as? IdentityFailure)?.kind == .pinMismatch }

    @Test func ourCheckDecidesWithoutAnAppOrPins() async throws {
        let c = try chain()
        #expect(await outcome(checks(), chain: c.ders, ourCheckFails: false) == nil)
        #expect((await outcome(checks(), chain: c.ders, ourCheckFails: true) as? HTTPEngineError) == Self.untrusted)
    }

    @Test func aHandshakeWhoseChainCannotBeReadIsRefusedNotAcceptedUnchecked() async throws {
        // A resumed session whose chain is not in its metadata: our check has nothing to pass (the
        // transport's check refuses it), and nobody accepts it for us without an app's say.
        let refused = await outcome(checks(), chain: [], ourCheckFails: true)
        #expect((refused as? HTTPEngineError)?.code == .untrustedCertificate)
        // Pins with no certificate to read: refused too.
        let pinned = await outcome(checks(pins: ["x"]), chain: [], ourCheckFails: false)
        #expect((pinned as? IdentityFailure)?.kind == .noCertificate)
    }

    @Test func aPinOnTheCAOrTheLeafOfAVerifiedChainMatches() async throws {
        let c = try chain()
        #expect(await outcome(checks(pins: [c.caPin]), chain: c.ders, ourCheckFails: false) == nil)
        #expect(await outcome(checks(pins: [c.leafPin]), chain: c.ders, ourCheckFails: false) == nil)
        #expect(isPinMismatch(await outcome(checks(pins: ["bm90IHRoaXM="]), chain: c.ders, ourCheckFails: false)))
    }

    @Test func ofAChainTheAppAcceptedAgainstOurCheckOnlyTheLeafCounts() async throws {
        // Anyone can send a CA's public certificate after a leaf of their own: a chain our check did not
        // verify proves nothing about its CA.
        let c = try chain()
        #expect(isPinMismatch(await outcome(checks(pins: [c.caPin], app: .accept), chain: c.ders, ourCheckFails: true)))
        #expect(await outcome(checks(pins: [c.leafPin], app: .accept), chain: c.ders, ourCheckFails: true) == nil)
    }

    @Test func theAppDecidesOnOurFailureButNeverOverrulesAPin() async throws {
        let c = try chain()
        #expect(await outcome(checks(app: .accept), chain: c.ders, ourCheckFails: true) == nil)
        #expect(
            (await outcome(checks(app: .ourCheck), chain: c.ders, ourCheckFails: true) as? HTTPEngineError)
                == Self.untrusted
        )
        let refusal = HTTPEngineError(.cancelled, "refused by the app")
        #expect(
            (await outcome(checks(app: .refuse(refusal)), chain: c.ders, ourCheckFails: true) as? HTTPEngineError)
                == refusal
        )
        #expect(
            isPinMismatch(
                await outcome(checks(pins: ["bm90IHRoaXM="], app: .accept), chain: c.ders, ourCheckFails: true)
            )
        )
    }

    @Test func aRefusedCertificateCarriesTheHandshakesTrustObject() async throws {
        // Where the system ran TLS, the app gets the trust object that failed (URLSession's
        // NSURLErrorFailingURLPeerTrustErrorKey).
        let c = try chain()
        final class TrustObject {}
        let trust = PlatformTrust(TrustObject())
        do {
            try await checks().run(chain: c.ders, platformTrust: trust) { throw Self.untrusted }
            Issue.record("an untrusted chain passed")
        } catch let error as HTTPEngineError {
            #expect(error.code == .untrustedCertificate && error.peerTrust?.object === trust.object)
        }
    }
}
