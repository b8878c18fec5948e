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
        /// system's roots and `additionalRoots`. Calls `done` with the verdict and the chain as DER, the
        /// leaf first.
        ///
        /// Asynchronous throughout: the evaluation (which may fetch revocation data) runs on a queue of
        /// its own, so one slow handshake never holds up another's, and the chain is copied only once it
        /// is over (copying it before forces a synchronous evaluation).
        static func judge(
            _ trust: SecTrust,
            host: String,
            additionalRoots: [[UInt8]],
            done: @escaping @Sendable (SystemTrustVerdict, [[UInt8]]) -> Void
        ) {
            SecTrustSetPolicies(trust, SecPolicyCreateSSL(true, host as CFString))
            let anchors = additionalRoots.compactMap { SecCertificateCreateWithData(nil, Data($0) as CFData) }
            if !anchors.isEmpty {
                SecTrustSetAnchorCertificates(trust, anchors as CFArray)
                SecTrustSetAnchorCertificatesOnly(trust, false)
            }
            let queue = DispatchQueue(label: "httpdns.tls-evaluate", target: .global(qos: .userInitiated))
            // SecTrustEvaluateAsyncWithError must be called on the queue it calls back on.
            queue.async {
                let status = SecTrustEvaluateAsyncWithError(trust, queue) { evaluated, trusted, error in
                    let verdict: SystemTrustVerdict =
                        trusted
                        ? .trusted
                        : .rejected(status: error.map { Int32(truncatingIfNeeded: CFErrorGetCode($0)) } ?? -1)
                    done(verdict, chain(of: evaluated))
                }
                if status != errSecSuccess { done(.rejected(status: status), chain(of: trust)) }
            }
        }

        /// Judges `chain` (DER, leaf first: a resumed session's, from the connection's metadata) for
        /// `host`, as `judge` does a handshake's; the trust object comes back for the app's delegate.
        static func judge(chain: [[UInt8]], host: String, additionalRoots: [[UInt8]]) async -> (
            SystemTrustVerdict, SecTrust?
        ) {
            guard let trust = makeTrust(chain: chain, host: host, additionalRoots: additionalRoots) else {
                return (.rejected(status: SystemTrustVerdict.Status.notTrusted), nil)
            }
            let verdict = await withCheckedContinuation {
                (continuation: CheckedContinuation<SystemTrustVerdict, Never>) in
                judge(trust, host: host, additionalRoots: additionalRoots) { verdict, _ in
                    continuation.resume(returning: verdict)
                }
            }
            return (verdict, trust)
        }

        /// The certificates of an evaluated trust, DER, the leaf first.
        static func chain(of trust: SecTrust) -> [[UInt8]] {
            ((SecTrustCopyCertificateChain(trust) as? [SecCertificate]) ?? []).map {
                [UInt8](SecCertificateCopyData($0) as Data)
            }
        }
    }
#endif
