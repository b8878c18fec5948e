// The certificate checks on top of BoringSSL's: the hostname against the certificate's DNS names only
// (never an IP SAN standing in for a name), the pins, and BoringSSL's own verdict on the chain observed
// as a value.

import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOSSL
import SwiftASN1
import X509

/// BoringSSL has verified the chain and dates, NIOSSL the name, but NIOSSL also accepts an IP SAN that
/// matches the socket address whatever the hostname. When we connect by IP on behalf of a name that is
/// exactly the hole a poisoned address could use, so for a hostname only the certificate's DNS names
/// count (swift-certificates' server identity check, RFC 6125, given no IP). Then the pins, if any.
func verifyIdentity(hostname: String?, peer: NIOSSLCertificate?, pins: Set<String>?) async throws {
    guard let peer else { throw IdentityFailure(.noCertificate, "the server presented no certificate") }
    if let hostname {
        let leaf = try Certificate(derEncoded: try peer.toDERBytes())
        var verifier = Verifier(rootCertificates: CertificateStore([leaf])) {
            ServerIdentityPolicy(serverHostname: hostname, serverIP: nil)
            AlreadyVerifiedExtensions(leaf)
        }
        if case .couldNotValidate = await verifier.validate(leaf: leaf, intermediates: CertificateStore()) {
            throw IdentityFailure(.nameMismatch, "no DNS name in the certificate matches")
        }
    }
    if let pins, !pins.isEmpty {
        let spki = try peer.extractPublicKey().toSPKIBytes()
        let digest = Data(SHA256.hash(data: spki)).base64EncodedString()
        guard pins.contains(digest) else {
            throw IdentityFailure(
                .pinMismatch,
                "public key pin mismatch (server key sha256/\(digest) is not pinned)"
            )
        }
    }
}

/// The Verifier refuses a chain with a critical extension that no policy claims. BoringSSL has already
/// verified this chain, and it rejects critical extensions it does not understand, so this policy claims
/// the leaf's own critical extensions (BasicConstraints and KeyUsage are usually critical) and leaves
/// the judgement to ServerIdentityPolicy.
struct AlreadyVerifiedExtensions: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier]

    init(_ leaf: Certificate) {
        verifyingCriticalExtensions = leaf.extensions.filter(\.critical).map(\.oid)
    }

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        .meetsPolicy
    }
}

/// Our own check of the server's certificate failed (see verifyIdentity); `kind` says which check.
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

/// Whether BoringSSL rejected the server's certificate chain during one handshake.
///
/// NIOSSL reports a rejected chain as a handshake failure whose only detail is BoringSSL's error text.
/// Its per-certificate ("preverify") callback sees BoringSSL's verdict as a value, so the handler is
/// given one that passes the verdict through unchanged and notes a rejection. Where NIOSSL verifies
/// through the platform instead (Apple platforms with the default trust roots), the callback is not
/// called and an untrusted chain stays `.tlsFailed`.
final class ChainVerdict: Sendable {
    private let rejectedBox = NIOLockedValueBox(false)

    /// True once BoringSSL has rejected a certificate of the chain.
    var rejected: Bool { rejectedBox.withLockedValue { $0 } }

    func makeClientHandler(context: NIOSSLContext, serverHostname: String?) throws -> NIOSSLClientHandler {
        let box = rejectedBox
        return try (PreverifyObservingFactory.self as any ClientHandlerFactory.Type).make(
            context: context,
            serverHostname: serverHostname
        ) { result, _ in
            if case .failed = result { box.withLockedValue { $0 = true } }
            return result
        }
    }
}

/// NIOSSL deprecates the per-certificate callback in favour of callbacks that replace its verification
/// altogether; this one only observes. Reaching the deprecated initializer through a protocol
/// requirement keeps the build free of a warning we have chosen to accept.
private protocol ClientHandlerFactory {
    static func make(
        context: NIOSSLContext,
        serverHostname: String?,
        observe: @escaping NIOSSLVerificationCallback
    ) throws -> NIOSSLClientHandler
}

private enum PreverifyObservingFactory: ClientHandlerFactory {
    @available(*, deprecated, message: "uses NIOSSL's per-certificate verification callback")
    static func make(
        context: NIOSSLContext,
        serverHostname: String?,
        observe: @escaping NIOSSLVerificationCallback
    ) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: context, serverHostname: serverHostname, verificationCallback: observe)
    }
}
