// The Security framework's verdict on a certificate chain, for the connections whose certificate failures
// the app decides on (ServerTrustEvaluation) on Apple platforms: NIOSSL checks such chains through the
// Security framework when it verifies by itself, and so does this, with the same anchors (the system's and
// the configured extra roots). COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE; the rules it
// feeds (ask on failure, accept, refuse, keep our verdict) are the ones the Linux tests prove.

#if canImport(Darwin)
    import Dispatch
    import Foundation
    import NIOSSL
    @preconcurrency import Security

    package enum ApplePlatformTrust {
        /// A trust object for `chain` (DER, leaf first) with the SSL server policy for `host` (nil: the
        /// chain alone), anchored at the system's roots and `additionalRoots`. Nil when a certificate
        /// cannot be read.
        package static func makeTrust(chain: [[UInt8]], host: String?, additionalRoots: [[UInt8]]) -> SecTrust? {
            let certificates = chain.compactMap { SecCertificateCreateWithData(nil, Data($0) as CFData) }
            guard certificates.count == chain.count, !certificates.isEmpty else { return nil }
            var trust: SecTrust?
            let policy = SecPolicyCreateSSL(true, host as CFString?)
            guard SecTrustCreateWithCertificates(certificates as CFArray, policy, &trust) == errSecSuccess,
                let trust
            else { return nil }
            let anchors = additionalRoots.compactMap { SecCertificateCreateWithData(nil, Data($0) as CFData) }
            if !anchors.isEmpty {
                // Extra anchors replace the system's unless they are explicitly kept on.
                SecTrustSetAnchorCertificates(trust, anchors as CFArray)
                SecTrustSetAnchorCertificatesOnly(trust, false)
            }
            return trust
        }

        /// Evaluates `chain` off the event loop (the evaluation may fetch revocation data) and calls
        /// `done` with the verdict on a queue of its own.
        static func evaluate(
            _ chain: [NIOSSLCertificate],
            additionalRoots: [NIOSSLCertificate],
            done: @escaping @Sendable (Bool) -> Void
        ) {
            let der = chain.compactMap { try? $0.toDERBytes() }
            let roots = additionalRoots.compactMap { try? $0.toDERBytes() }
            guard let trust = makeTrust(chain: der, host: nil, additionalRoots: roots) else {
                done(false)
                return
            }
            let queue = DispatchQueue(label: "httpdns.server-trust")
            // The evaluation must be started on the queue it calls back on.
            queue.async {
                _ = SecTrustEvaluateAsyncWithError(trust, queue) { _, trusted, _ in done(trusted) }
            }
        }
    }
#endif
