// The `pin-sha256` of a certificate (RFC 7469): base64 of SHA-256 over its SubjectPublicKeyInfo, read
// from the certificate's DER (CertificateDER). No TLS library is asked, so a pin is checked the same way
// whoever ran the handshake: BoringSSL on Linux, the system's TLS on Apple platforms.

import Crypto
import Foundation

/// A certificate's public-key pin, or why it has none.
enum PublicKeyPin {
    /// The base64 SHA-256 digest of the SubjectPublicKeyInfo of the certificate `der` encodes. Throws
    /// `IdentityFailure(.noCertificate)` when `der` is not an X.509 certificate.
    static func sha256(certificateDER der: [UInt8]) throws -> String {
        Data(SHA256.hash(data: try subjectPublicKeyInfo(certificateDER: der))).base64EncodedString()
    }

    /// Throws `IdentityFailure(.pinMismatch)` unless the key of the certificate `der` encodes is one of
    /// `pins` (base64 SHA-256 digests of SubjectPublicKeyInfo).
    static func check(certificateDER der: [UInt8], against pins: Set<String>) throws {
        let digest = try sha256(certificateDER: der)
        guard pins.contains(digest) else {
            throw IdentityFailure(.pinMismatch, "public key pin mismatch (server key sha256/\(digest) is not pinned)")
        }
    }

    /// Throws `IdentityFailure(.pinMismatch)` unless the key of one of the certificates of `chain` (DER,
    /// the leaf first) is one of `pins`; the message names the leaf's.
    static func check(chain: [[UInt8]], against pins: Set<String>) throws {
        var leafDigest: String?
        for der in chain {
            let digest = try sha256(certificateDER: der)
            if pins.contains(digest) { return }
            leafDigest = leafDigest ?? digest
        }
        throw IdentityFailure(
            .pinMismatch,
            "public key pin mismatch (server key sha256/\(leafDigest ?? "none") is not pinned, nor any key of its chain)"
        )
    }

    /// The DER bytes of the certificate's SubjectPublicKeyInfo, as they appear in it (RFC 5280 4.1:
    /// the seventh field of TBSCertificate, the sixth when the optional `[0] version` is absent).
    static func subjectPublicKeyInfo(certificateDER der: [UInt8]) throws -> ArraySlice<UInt8> {
        guard let key = CertificateDER.subjectPublicKeyInfo(of: der) else {
            throw IdentityFailure(.noCertificate, "the server's certificate is not valid DER")
        }
        return key
    }
}

/// Our own check of the server's certificate failed (a name or a pin); `kind` says which check.
struct IdentityFailure: Error {
    enum Kind {
        case noCertificate
        case nameMismatch
        case pinMismatch
    }

    var kind: Kind
    var reason: String

    init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
}
