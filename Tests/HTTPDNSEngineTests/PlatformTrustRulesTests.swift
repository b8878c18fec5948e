// The rules of the certificate check that do not depend on which TLS ran the handshake: the
// pin of a certificate read from its bytes alone, and the Security framework's verdict (Apple platforms,
// where the system runs TLS) turned into the same engine errors and the same question to the app as
// BoringSSL's verdict on Linux.

import Crypto
import Foundation
@testable import HTTPDNSDemoPKI
import NIOSSL
import SwiftASN1
import Testing
import X509

@testable import HTTPDNSEngine

@Suite struct PlatformTrustRulesTests {
    // MARK: pins from the certificate's bytes

    @Test func pinFromDERMatchesBoringSSLsReadingOfTheKey() throws {
        let pki = try DemoPKI()
        for name in ["a.test", "b.test"] {
            let pem = try pki.leafPEM(name).certificate
            let certificate = try NIOSSLCertificate(bytes: Array(pem.utf8), format: .pem)
            let expected = Data(SHA256.hash(data: try certificate.extractPublicKey().toSPKIBytes()))
                .base64EncodedString()
            #expect(try PublicKeyPin.sha256(certificateDER: try certificate.toDERBytes()) == expected)
        }
        // The CA's own pin differs from its leaves'.
        let ca = try pki.caCertificate.toDERBytes()
        let leaf = try NIOSSLCertificate(bytes: Array(try pki.leafPEM("a.test").certificate.utf8), format: .pem)
        #expect(try PublicKeyPin.sha256(certificateDER: ca) != PublicKeyPin.sha256(certificateDER: leaf.toDERBytes()))
    }

    @Test func pinOfAVersion1CertificateWithoutTheVersionField() throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("v1.test") }
        let certificate = try Certificate(
            version: .v1,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date() - 60,
            notValidAfter: Date() + 3600,
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions(),
            issuerPrivateKey: .init(key)
        )
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let expected = Data(SHA256.hash(data: key.publicKey.derRepresentation)).base64EncodedString()
        #expect(try PublicKeyPin.sha256(certificateDER: serializer.serializedBytes) == expected)
    }

    @Test func bytesThatAreNoCertificateHaveNoPin() {
        for bytes: [UInt8] in [[], [0x30, 0x03, 0x02, 0x01, 0x01], Array("not DER".utf8), [0x30, 0x80]] {
            #expect(throws: IdentityFailure.self) { try PublicKeyPin.sha256(certificateDER: bytes) }
        }
    }

    // MARK: the Security framework's verdict

    @Test func trustedChainIsNoError() {
        #expect(SystemTrustVerdict.trusted.engineError(host: "a.test", address: "192.0.2.1:443") == nil)
    }

    @Test func nameMismatchStatusesBecomeNameMismatch() throws {
        for status in [SystemTrustVerdict.Status.hostNameMismatch, SystemTrustVerdict.Status.nameNotAllowed] {
            let error = try #require(
                SystemTrustVerdict.rejected(status: status).engineError(host: "a.test", address: "192.0.2.1:443")
            )
            #expect(error.code == .certificateNameMismatch)
            #expect(error.message.contains("a.test") && error.message.contains("192.0.2.1:443"))
        }
    }

    @Test func everyOtherRejectionIsAnUntrustedChain() throws {
        let statuses: [Int32] = [
            SystemTrustVerdict.Status.notTrusted, SystemTrustVerdict.Status.expired,
            SystemTrustVerdict.Status.notValidYet, SystemTrustVerdict.Status.revoked,
            -67635,  // errSecIncompleteCertRevocationCheck
            -1,
        ]
        for status in statuses {
            let error = try #require(
                SystemTrustVerdict.rejected(status: status).engineError(host: "a.test", address: "192.0.2.1:443")
            )
            #expect(error.code == .untrustedCertificate)
            #expect(error.message.contains("status \(status)"))
        }
        let expired = SystemTrustVerdict.rejected(status: SystemTrustVerdict.Status.expired)
        #expect(expired.engineError(host: "a.test", address: "x")?.message.contains("expired") == true)
    }

    /// The app is asked the same question whichever TLS judged the chain: the verdict's error is what
    /// `ServerTrustEvaluation` sees as our check's failure.
    @Test func theAppIsAskedAboutASystemRejectionAsAboutBoringSSLs() async throws {
        let asked = Asked()
        let accepting = ServerTrustEvaluation(partition: 1, always: false) { question in
            await asked.note(question)
            return .accept
        }
        let verdict = SystemTrustVerdict.rejected(status: SystemTrustVerdict.Status.hostNameMismatch)
        try await accepting.evaluate(host: "a.test", port: 443, chain: [[1, 2, 3]]) {
            if let error = verdict.engineError(host: "a.test", address: "192.0.2.1:443") { throw error }
        }
        let question = try #require(await asked.questions.first)
        #expect(question.failure?.code == .certificateNameMismatch)
        #expect(question.chain == [[1, 2, 3]])
        #expect(question.host == "a.test" && question.port == 443)

        // Our check decides: the rejection stands, with its code.
        let deferring = ServerTrustEvaluation(partition: 1, always: false) { _ in .ourCheck }
        let untrusted = SystemTrustVerdict.rejected(status: SystemTrustVerdict.Status.notTrusted)
        await #expect(throws: HTTPEngineError(.untrustedCertificate, "")) {
            try await deferring.evaluate(host: "a.test", port: 443, chain: []) {
                if let error = untrusted.engineError(host: "a.test", address: "x") { throw error }
            }
        }

        // A trusted chain is not asked about unless the app asked for every connection.
        let before = await asked.questions.count
        try await accepting.evaluate(host: "a.test", port: 443, chain: []) {
            if let error = SystemTrustVerdict.trusted.engineError(host: "a.test", address: "x") { throw error }
        }
        #expect(await asked.questions.count == before)
    }
}

private actor Asked {
    var questions: [ServerTrustQuestion] = []
    func note(_ question: ServerTrustQuestion) { questions.append(question) }
}

@Suite struct HandshakeEvidenceTests {
    let leaf: [[UInt8]] = [[0x30, 0x82, 0x01]]

    @Test func theVerifyBlocksVerdictStandsAndAResumedSessionIsJudgedFromItsMetadata() {
        #expect(
            HandshakeEvidence.choose(verifyBlock: (.trusted, leaf), metadataChain: [])
                == .judged(.trusted, chain: leaf)
        )
        // A resumed TLS session runs no verify block: its chain is judged now, not refused for lack of one.
        #expect(HandshakeEvidence.choose(verifyBlock: nil, metadataChain: leaf) == .judgeNow(chain: leaf))
        #expect(HandshakeEvidence.choose(verifyBlock: nil, metadataChain: []) == .none)
    }
}
