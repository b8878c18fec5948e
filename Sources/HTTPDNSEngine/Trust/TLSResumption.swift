// Whether a new TLS connection to an origin may resume a session, from how the last handshakes to it
// ended (Network.framework keeps session tickets process-wide; BoringSSL's client here keeps none). A
// resumed handshake runs no verify block: its chain is judged from the connection's metadata
// (`HandshakeEvidence`), and one whose metadata holds no chain cannot be judged at all. So:
// - a handshake our checks or the app refused may still have left a ticket (the system's own check passed,
//   then a pin or the app's delegate said no): the next connections to that origin do a full handshake,
//   each judged afresh, until one passes;
// - a resumed session with no chain to judge is never accepted: the connection is made again at once with
//   resumption off (one retry), and that origin's next connections do a full handshake too;
// - a handshake that passed allows resumption again.
// Pure (TLSResumptionTests); the Network.framework transport applies it. At most `capacity` origins are
// remembered (the oldest forgotten first), so an app that talks to many refused hosts does not grow it.

/// Whether TLS connections to an origin may resume a session, from how the last handshakes ended.
struct TLSResumption: Sendable {
    /// How a handshake to an origin ended.
    enum Outcome: Sendable, Equatable {
        /// Our checks and the app's passed.
        case passed
        /// Our checks or the app's refused its chain (untrusted, name, pin, the app's delegate).
        case refused
        /// A resumed session whose metadata held no chain to judge.
        case resumedWithoutChain
        /// Anything else (a connect failure, a timeout): says nothing about its session.
        case other
    }

    static let capacity = 256
    /// Origins ("host:port") whose next connections do a full handshake, oldest first.
    private var fullHandshakeOnly: [String] = []

    init() {}

    /// Whether a new connection to `origin` may resume a session.
    func allowsResumption(_ origin: String) -> Bool { !fullHandshakeOnly.contains(origin) }

    /// A handshake to `origin` ended with `outcome`; true when the connection is to be made again at once
    /// with resumption off.
    mutating func ended(_ origin: String, _ outcome: Outcome) -> Bool {
        switch outcome {
        case .passed:
            fullHandshakeOnly.removeAll { $0 == origin }
            return false
        case .refused, .resumedWithoutChain:
            if !fullHandshakeOnly.contains(origin) {
                if fullHandshakeOnly.count >= Self.capacity { fullHandshakeOnly.removeFirst() }
                fullHandshakeOnly.append(origin)
            }
            return outcome == .resumedWithoutChain
        case .other:
            return false
        }
    }

    /// The outcome a connect's error says, for `ended`.
    static func outcome(of error: any Error) -> Outcome {
        if error is ResumedWithoutChain { return .resumedWithoutChain }
        guard let error = error as? HTTPEngineError else { return .other }
        switch error.code {
        case .untrustedCertificate, .certificateNameMismatch, .pinMismatch: return .refused
        default: return .other
        }
    }
}

/// A resumed TLS session whose metadata held no chain to judge: never accepted; the connection is made
/// again with resumption off (`TLSResumption`).
struct ResumedWithoutChain: Error, Sendable {
    let host: String

    init(host: String) { self.host = host }
}
