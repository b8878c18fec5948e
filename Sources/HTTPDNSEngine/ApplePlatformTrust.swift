// The Security framework's verdict on a certificate chain on Apple platforms: in the handshake's verify
// block (NetworkFrameworkTransport), with the SSL policy for the hostname and the anchors the engine
// trusts (the system's and the configured extra roots), and for the trust object a URLSession delegate
// is shown. COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE; the rules it feeds (the verdict
// as our error codes, ask on failure, accept, refuse, keep our verdict) are the ones the Linux tests
// prove (PlatformTrustRulesTests).

#if canImport(Darwin)
    import Dispatch
    import Foundation
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

        /// Judges the chain of `trust` (a handshake's, from Network.framework's verify block) for `host`
        /// (an IP literal's text for an IP host): the SSL server policy for that name, anchored at the
        /// system's roots and `additionalRoots`. Calls `done` on `queue` with the verdict and the chain
        /// as DER, the leaf first.
        static func judge(
            _ trust: SecTrust,
            host: String,
            additionalRoots: [[UInt8]],
            queue: DispatchQueue,
            done: @escaping @Sendable (SystemTrustVerdict, [[UInt8]]) -> Void
        ) {
            SecTrustSetPolicies(trust, SecPolicyCreateSSL(true, host as CFString))
            let anchors = additionalRoots.compactMap { SecCertificateCreateWithData(nil, Data($0) as CFData) }
            if !anchors.isEmpty {
                SecTrustSetAnchorCertificates(trust, anchors as CFArray)
                SecTrustSetAnchorCertificatesOnly(trust, false)
            }
            let chain = ((SecTrustCopyCertificateChain(trust) as? [SecCertificate]) ?? []).map {
                [UInt8](SecCertificateCopyData($0) as Data)
            }
            // The evaluation may fetch revocation data: asynchronous, and started on the queue it calls
            // back on.
            queue.async {
                let status = SecTrustEvaluateAsyncWithError(trust, queue) { _, trusted, error in
                    let verdict: SystemTrustVerdict =
                        trusted
                        ? .trusted
                        : .rejected(status: error.map { Int32(truncatingIfNeeded: CFErrorGetCode($0)) } ?? -1)
                    done(verdict, chain)
                }
                if status != errSecSuccess { done(.rejected(status: status), chain) }
            }
        }
    }
#endif
