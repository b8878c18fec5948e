// The Security framework's verdict on a server's chain, as the engine's error. Where the system runs TLS
// (Network.framework on Apple platforms), the chain is judged by a SecTrust with an SSL policy
// for the hostname, in the handshake's verify block. That judgement is an `OSStatus`; this file turns it
// into the same codes BoringSSL's verdict becomes on Linux (`describeTLSFailure`), so a URLSession
// delegate is asked the same question on every platform. Pure, and proven on Linux
// (PlatformTrustRulesTests); the Apple code only feeds it a status.
//
// The SSL policy for a hostname matches DNS names only (an IP address in the certificate never stands in
// for a name), and our own rule on Linux is the same (verifyIdentity). Pins are checked after either,
// from the certificate's bytes (PublicKeyPin), and never overruled.

/// What the Security framework said about a server's chain, judged for a hostname (or an IP literal).
enum SystemTrustVerdict: Sendable, Equatable {
    case trusted
    /// `status`: the `OSStatus` of the evaluation's error (SecBase.h's `errSec…` codes).
    case rejected(status: Int32)

    /// The Security framework's result codes the engine tells apart (values from the iOS 16.5 SDK's
    /// SecBase.h). Every other rejection counts as an untrusted chain.
    enum Status {
        /// errSecHostNameMismatch: the chain is fine, but it is not for this host.
        static let hostNameMismatch: Int32 = -67602
        /// errSecCertificateNameNotAllowed: the name is excluded by a CA's name constraints.
        static let nameNotAllowed: Int32 = -67900
        /// errSecNotTrusted: no path to an anchor (a private CA nobody added).
        static let notTrusted: Int32 = -67843
        /// errSecCertificateExpired.
        static let expired: Int32 = -67818
        /// errSecCertificateNotValidYet.
        static let notValidYet: Int32 = -67819
        /// errSecCertificateRevoked.
        static let revoked: Int32 = -67820
    }

    /// The engine's error for this verdict; nil when the chain was trusted. A name mismatch is
    /// `.certificateNameMismatch`, any other rejection `.untrustedCertificate` (expired, revoked and
    /// unknown roots alike, as BoringSSL's rejection is on Linux): the two a URLSession delegate may
    /// overrule (`ServerTrustEvaluation`).
    func engineError(host: String, address: String) -> HTTPEngineError? {
        switch self {
        case .trusted:
            return nil
        case .rejected(let status) where status == Status.hostNameMismatch || status == Status.nameNotAllowed:
            return HTTPEngineError(
                .certificateNameMismatch,
                "the certificate presented at \(address) is not valid for \(host): no DNS name in the certificate matches (Security framework status \(status))"
            )
        case .rejected(let status):
            let error = untrustedCertificate(host: host, address: address)
            return HTTPEngineError(.untrustedCertificate, error.message + " (" + Self.reason(status) + ")")
        }
    }

    /// A rejection in words, for the message.
    static func reason(_ status: Int32) -> String {
        switch status {
        case Status.notTrusted: "no path to a trusted root, Security framework status \(status)"
        case Status.expired: "the certificate has expired, Security framework status \(status)"
        case Status.notValidYet: "the certificate is not valid yet, Security framework status \(status)"
        case Status.revoked: "the certificate was revoked, Security framework status \(status)"
        default: "Security framework status \(status)"
        }
    }
}

/// What the checks after a handshake on Apple platforms judge: the verify block's verdict and chain when
/// it ran; else the chain the connection's TLS metadata holds, judged then. The system skips the verify
/// block on a resumed TLS session, and without this a resumed connection would have no chain: every
/// pinned or delegate-judged connection after the first would fail.
enum HandshakeEvidence: Sendable, Equatable {
    /// The verify block's verdict and the chain it saw.
    case judged(SystemTrustVerdict, chain: [[UInt8]])
    /// No verify block ran (a resumed session): judge this chain, from the connection's metadata.
    case judgeNow(chain: [[UInt8]])
    /// Neither: no certificate to judge. Never accepted: the connection is made again with a full
    /// handshake (`TLSResumption`).
    case none

    static func choose(verifyBlock: (SystemTrustVerdict, [[UInt8]])?, metadataChain: [[UInt8]])
        -> HandshakeEvidence
    {
        if let (verdict, chain) = verifyBlock { return .judged(verdict, chain: chain) }
        return metadataChain.isEmpty ? .none : .judgeNow(chain: metadataChain)
    }
}
