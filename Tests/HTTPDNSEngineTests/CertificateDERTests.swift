// CertificateDER, the engine's own reading of certificate bytes: the key it finds is the one swift-asn1
// finds, every DER rule on its path is kept (a shortest definite length, nothing after the certificate,
// no cut), and a PEM file gives its certificates in order or says what is wrong with it.

import Foundation
@testable import HTTPDNSDemoPKI
import SwiftASN1
import Testing

@testable import HTTPDNSEngine

@Suite struct CertificateDERTests {
    /// The key as swift-asn1 reads it: the seventh field of TBSCertificate (sixth without a version).
    func keyBySwiftASN1(_ der: [UInt8]) throws -> [UInt8] {
        guard case .constructed(let certificate) = try DER.parse(der).content,
            let tbs = certificate.first(where: { _ in true }), case .constructed(let fields) = tbs.content
        else { throw PEMError("not a certificate") }
        var rest = Array(fields)
        if rest.first?.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            rest.removeFirst()
        }
        return Array(rest[5].encodedBytes)
    }

    func certificates() throws -> [[UInt8]] {
        let pki = try DemoPKI()
        return try [pki.caCertificate.toDERBytes()]
            + ["a.test", "b.test"].map { name in
                try CertificateDER.certificates(inPEM: pki.leafPEM(name).certificate)[0]
            }
    }

    @Test func theKeyIsTheOneSwiftASN1Reads() throws {
        for der in try certificates() {
            #expect(CertificateDER.subjectPublicKeyInfo(of: der).map(Array.init) == (try keyBySwiftASN1(der)))
        }
    }

    @Test func aCutOrALongerCertificateHasNoKey() throws {
        let der = try certificates()[1]
        for cut in [1, 2, 10, der.count / 2, der.count - 1] {
            #expect(CertificateDER.subjectPublicKeyInfo(of: Array(der.prefix(cut))) == nil)
        }
        #expect(CertificateDER.subjectPublicKeyInfo(of: der + [0]) == nil)
    }

    /// BER's indefinite length, a long form where the short one fits, a leading zero length byte, and a
    /// length past the end are not DER.
    @Test func lengthsThatAreNotDERAreRefused() {
        #expect(CertificateDER.element(in: [0x30, 0x80, 0x00, 0x00], at: 0, end: 4) == nil)
        #expect(CertificateDER.element(in: [0x30, 0x81, 0x01, 0x05], at: 0, end: 4) == nil)
        #expect(
            CertificateDER.element(in: [0x30, 0x82, 0x00, 0x81] + [UInt8](repeating: 0, count: 0x81), at: 0, end: 0x85)
                == nil
        )
        #expect(CertificateDER.element(in: [0x30, 0x05, 0x00], at: 0, end: 3) == nil)
        #expect(CertificateDER.element(in: [0x1F, 0x01, 0x00], at: 0, end: 3) == nil)  // a multi-byte tag
        let long = [0x30, 0x81, 0x80] + [UInt8](repeating: 0, count: 0x80)
        #expect(CertificateDER.element(in: long, at: 0, end: long.count)?.contents == 3..<long.count)
    }

    @Test func aPEMFileGivesItsCertificatesInOrderAndSkipsTheRest() throws {
        let ders = try certificates()
        func block(_ label: String, _ bytes: [UInt8]) -> String {
            let base64 = Data(bytes).base64EncodedString(options: .lineLength64Characters)
            return "-----BEGIN \(label)-----\n\(base64)\n-----END \(label)-----\n"
        }
        let text =
            "Subject: CN=a.test\n" + block("CERTIFICATE", ders[1]) + block("PRIVATE KEY", [1, 2, 3])
            + block("CERTIFICATE", ders[0]).replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try CertificateDER.certificates(inPEM: text) == [ders[1], ders[0]])
        #expect(try CertificateDER.certificates(inPEM: "no PEM here") == [])
    }

    @Test func aBrokenPEMBlockSaysWhatIsWrong() {
        let cases = [
            "-----BEGIN CERTIFICATE-----\nAAAA\n": "has no END line",
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n": "is not base64",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END PRIVATE KEY-----\n": "without its BEGIN",
            "-----BEGIN CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\n": "BEGIN line inside",
        ]
        for (text, message) in cases {
            #expect {
                try CertificateDER.certificates(inPEM: text)
            } throws: { error in
                (error as? PEMError)?.description.contains(message) == true
            }
        }
    }
}
