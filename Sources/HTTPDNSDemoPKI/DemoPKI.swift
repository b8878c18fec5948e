// A throw-away certificate authority for the demo and the tests, made at start with swift-certificates
// (P-256): one CA and one leaf per name, valid for a day. The demo never writes it to disk; tests that
// run the CLI write the PEM texts to a temporary folder.

import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

package struct DemoPKI {
    let caPEM: String
    package let caCertificate: NIOSSLCertificate
    private let caKey: P256.Signing.PrivateKey
    private let caName: DistinguishedName

    package init() throws {
        caKey = P256.Signing.PrivateKey()
        caName = try DistinguishedName { CommonName("swift-httpdns demo CA (throw-away)") }
        let now = Date()
        let ca = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(caKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400,
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(caKey)
        )
        caPEM = try ca.serializeAsPEM().pemString
        caCertificate = try NIOSSLCertificate(bytes: Array(caPEM.utf8), format: .pem)
    }

    /// A leaf certificate for `name` (DNS SAN only) and its key.
    package func leaf(_ name: String) throws -> (NIOSSLCertificate, NIOSSLPrivateKey) {
        let (certificate, key) = try leafPEM(name)
        return (
            try NIOSSLCertificate(bytes: Array(certificate.utf8), format: .pem),
            try NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem)
        )
    }

    /// A leaf certificate for `name` (DNS SAN only) and its key, as PEM text.
    func leafPEM(_ name: String) throws -> (certificate: String, key: String) {
        let key = P256.Signing.PrivateKey()
        let now = Date()
        let cert = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 86400,
            issuer: caName,
            subject: try DistinguishedName { CommonName(name) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName(name)])
            },
            issuerPrivateKey: .init(caKey)
        )
        return (try cert.serializeAsPEM().pemString, key.pemRepresentation)
    }
}
