// What a finished TLS handshake must pass before a request's first byte goes out, the same for both
// transports; each keeps only its I/O (what the handshake showed, and how its own check of the chain
// runs). In this order:
// 1. Our check: the verdict on the chain (BoringSSL's, or the system's from a fresh handshake's verify
//    block or, for a resumed session, judged from the chain the session kept) and the name. A handshake
//    whose chain cannot be read has nothing to check: our check refuses it, as it refuses an untrusted
//    chain (never "verification off").
// 2. The app's say, where it has one (`ServerTrustEvaluation`): asked when our check failed, or for
//    every new connection when the app asks; it may accept what our check refused.
// 3. The app's pins, which nobody overrules: any certificate of a chain our check verified matches, as
//    TrustKit and `NSPinnedDomains` pin a CA's or an intermediate's key; of a chain the app accepted
//    against our check, only the leaf (a presented chain proves nothing: anyone can send a CA's public
//    certificate after a leaf of their own).
// Pure (HandshakeChecksTests): the chain and the checks' outcomes in, a pass or the first failure out.

/// The checks a finished TLS handshake must pass, for one connection.
struct HandshakeChecks: Sendable {
    /// The URL's host (a name, or an IP literal) and port.
    var host: String
    var port: Int
    /// The app's say on the certificate, where it has one.
    var serverTrust: ServerTrustEvaluation?
    /// The app's pins for the host (base64 SHA-256 of SubjectPublicKeyInfo); empty for none.
    var pins: Set<String>

    init(host: String, port: Int, serverTrust: ServerTrustEvaluation?, pins: Set<String>?) {
        self.host = host
        self.port = port
        self.serverTrust = serverTrust
        self.pins = pins ?? []
    }

    /// Runs the checks for a handshake whose server presented `chain` (DER, the leaf first; empty when
    /// none could be read). `ourCheck` throws the engine's error when the chain or the name fails our
    /// check; `platformTrust` is the handshake's own trust object, for the app's delegate.
    func run(
        chain: [[UInt8]],
        platformTrust: PlatformTrust? = nil,
        ourCheck: () async throws -> Void
    ) async throws {
        do {
            try await check(chain: chain, platformTrust: platformTrust, ourCheck: ourCheck)
        } catch var error as HTTPEngineError
            where error.code == .untrustedCertificate || error.code == .certificateNameMismatch
        {
            // The app is told which trust object failed, as Apple's URLSession tells it.
            error.peerTrust = error.peerTrust ?? platformTrust
            throw error
        }
    }

    private func check(
        chain: [[UInt8]],
        platformTrust: PlatformTrust?,
        ourCheck: () async throws -> Void
    ) async throws {
        var verified = false
        if let serverTrust {
            try await serverTrust.evaluate(host: host, port: port, chain: chain, platformTrust: platformTrust) {
                try await ourCheck()
                verified = true
            }
        } else {
            try await ourCheck()
            verified = true
        }
        guard !pins.isEmpty else { return }
        guard let leaf = chain.first else {
            throw IdentityFailure(.noCertificate, "the server presented no certificate")
        }
        try PublicKeyPin.check(chain: verified ? chain : [leaf], against: pins)
    }
}
