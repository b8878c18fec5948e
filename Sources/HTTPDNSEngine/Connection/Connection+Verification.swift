// The certificate checks on top of BoringSSL's, for PosixTransport (Linux): the hostname against the
// certificate's DNS names only (never an IP SAN standing in for a name), the pins, and BoringSSL's own
// verdict on the chain observed as a value.

#if !canImport(Network)
    import NIOConcurrencyHelpers
    import NIOSSL
    import SwiftASN1
    import X509

    /// BoringSSL has verified the chain and dates, NIOSSL the name, but NIOSSL also accepts an IP SAN that
    /// matches the socket address whatever the hostname. When we connect by IP on behalf of a name that is
    /// exactly the hole a poisoned address could use, so for a hostname only the certificate's DNS names
    /// count (swift-certificates' server identity check, RFC 6125, given no IP). Then the pins, if any.
    /// `ip`: an IP-literal host to check the certificate's IP names against, where NIOSSL's own name check
    /// is off (a connection whose failures the app decides on, see ServerTrustEvaluation).
    func verifyIdentity(hostname: String?, ip: String? = nil, peer: NIOSSLCertificate?, pins: Set<String>?) async throws
    {
        guard let peer else { throw IdentityFailure(.noCertificate, "the server presented no certificate") }
        if hostname != nil || ip != nil {
            let leaf = try Certificate(derEncoded: try peer.toDERBytes())
            var verifier = Verifier(rootCertificates: CertificateStore([leaf])) {
                ServerIdentityPolicy(serverHostname: hostname, serverIP: ip)
                AlreadyVerifiedExtensions(leaf)
            }
            if case .couldNotValidate = await verifier.validate(leaf: leaf, intermediates: CertificateStore()) {
                throw IdentityFailure(
                    .nameMismatch,
                    hostname == nil
                        ? "no IP address in the certificate matches" : "no DNS name in the certificate matches"
                )
            }
        }
        if let pins, !pins.isEmpty {
            try PublicKeyPin.check(certificateDER: try peer.toDERBytes(), against: pins)
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

    /// Whether BoringSSL rejected the server's certificate chain during one handshake.
    ///
    /// NIOSSL reports a rejected chain as a handshake failure whose only detail is BoringSSL's error text.
    /// Its per-certificate ("preverify") callback sees BoringSSL's verdict as a value, so the handler is
    /// given one that passes the verdict through unchanged and notes a rejection. Where NIOSSL verifies
    /// through the platform instead (NIOSSL on Apple platforms), the callback would not be called: this
    /// transport is not used there (ConnectionTransport.swift).
    ///
    /// Deferring (a request whose app decides on failures, ServerTrustEvaluation): a rejection is noted and
    /// the handshake goes on, the chain is kept, and the connection is refused or accepted right after the
    /// handshake, before any request byte, by the evaluation.
    final class ChainVerdict: Sendable {
        private struct State {
            var rejected = false
            var presented: [NIOSSLCertificate] = []
        }
        private let state = NIOLockedValueBox(State())
        private let deferring: Bool

        init(deferring: Bool = false) {
            self.deferring = deferring
        }

        /// True once the chain has been rejected.
        var rejected: Bool { state.withLockedValue { $0.rejected } }

        /// The chain's certificates, the leaf first: the path BoringSSL verified, or (when deferring) the
        /// one it tried and rejected.
        var chain: [NIOSSLCertificate] { state.withLockedValue { $0.presented } }

        func makeClientHandler(
            context: NIOSSLContext,
            serverHostname: String?
        ) throws -> NIOSSLClientHandler {
            let state = self.state
            let deferring = self.deferring
            return try (PreverifyObservingFactory.self as any ClientHandlerFactory.Type).make(
                context: context,
                serverHostname: serverHostname
            ) { result, certificate in
                state.withLockedValue {
                    if case .failed = result { $0.rejected = true }
                    // BoringSSL calls this from the top of the chain down to the leaf, once per finding.
                    if $0.presented.first != certificate { $0.presented.insert(certificate, at: 0) }
                }
                return deferring ? .certificateVerified : result
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
#endif
