// An app's say on the origin's certificate, per request: what a URLSession delegate does with a server
// trust challenge (its own pinning, a private CA it accepts, a refusal). The engine runs its own check
// first; the evaluation is asked when that check fails, or for every new connection when the app asks.
// The answer is made during the TLS handshake's last step, before a byte of the request is sent.
//
// Connections the app had a say on are its own: a request with an evaluation only shares connections
// with requests whose evaluation has the same partition (one URLSession, say), never with the engine's
// other requests, so a certificate one delegate accepted is never used for a request that did not ask.

/// The question put to the app: the certificates the server presented and how our own check went.
package struct ServerTrustQuestion: Sendable {
    /// The hostname (or IP literal) of the URL.
    package var host: String
    package var port: Int
    /// The certificates the server presented, DER, the leaf first.
    package var chain: [[UInt8]]
    /// Why our own check refused it (`.untrustedCertificate` or `.certificateNameMismatch`); nil when it
    /// passed (an evaluation that asks for every connection).
    package var failure: HTTPEngineError?
    /// The handshake's own trust object where the system ran TLS (Apple platforms: a `SecTrust`, with
    /// the stapled OCSP response and SCTs the handshake carried); nil elsewhere.
    package var platformTrust: PlatformTrust?
}

/// A platform trust object carried to the app's delegate. `@unchecked Sendable`: a `SecTrust` is only
/// read once its evaluation is over, which is when it is carried.
package struct PlatformTrust: @unchecked Sendable {
    package let object: AnyObject

    init(_ object: AnyObject) { self.object = object }
}

/// What a TLS handshake that passed every check showed, kept on its connection: a connection made
/// without the app's say (a pre-connect's) is asked about with it when a request that has a say takes
/// it (`ServerTrustEvaluation.adopt`), as a new connection would be.
struct HandshakeShown: Sendable {
    /// The certificates the server presented, DER, the leaf first.
    var chain: [[UInt8]]
    var platformTrust: PlatformTrust?

    init(chain: [[UInt8]], platformTrust: PlatformTrust? = nil) {
        self.chain = chain
        self.platformTrust = platformTrust
    }
}

/// What the app answered.
package enum ServerTrustAnswer: Sendable {
    /// Proceed with this server, whatever our check said (the app evaluated the chain itself).
    case accept
    /// Our check decides, as if the app had not been asked.
    case ourCheck
    /// Refuse the connection with this error (the app cancelled the challenge).
    case refuse(HTTPEngineError)
    /// Nobody is left to answer: the request that asked was cancelled or timed out first. The connect
    /// fails without a verdict, and the requests still waiting for it connect again and ask for
    /// themselves (a cancelled image load must not fail its neighbours).
    case askerGone
}

/// The `underlying` of the error a connect fails with when the request that asked about its server's
/// certificate went away before an answer (`ServerTrustAnswer.askerGone`): a second try may help.
struct ServerTrustAskerGone: Error, Sendable {}

/// How one request's server trust is decided beyond the engine's own check.
package struct ServerTrustEvaluation: Hashable, Sendable {
    /// Requests share connections only with requests of the same partition.
    var partition: UInt64
    /// Ask for every new connection, not only when our check fails.
    var always: Bool
    /// Asked once per new connection made for the partition (from the connect's own task).
    var decide: @Sendable (ServerTrustQuestion) async -> ServerTrustAnswer

    package init(
        partition: UInt64,
        always: Bool,
        decide: @escaping @Sendable (ServerTrustQuestion) async -> ServerTrustAnswer
    ) {
        self.partition = partition
        self.always = always
        self.decide = decide
    }

    /// Evaluations are told apart by their partition alone: a partition has one delegate, and requests of
    /// one partition share connections.
    package static func == (a: ServerTrustEvaluation, b: ServerTrustEvaluation) -> Bool { a.partition == b.partition }

    package func hash(into hasher: inout Hasher) { hasher.combine(partition) }

    /// A connection made without the app's say, whose handshake passed our check and the pins, is to serve
    /// a request of this evaluation's partition before any other (a pre-connected one): asked about as
    /// its handshake showed, as for a new connection. Throws the refusal.
    func adopt(_ shown: HandshakeShown, host: String, port: Int) async throws {
        try await evaluate(host: host, port: port, chain: shown.chain, platformTrust: shown.platformTrust) {}
    }

    /// Runs our check (`ourCheck`, which throws the engine's error), then asks the app when that check
    /// failed with a verdict the app may overrule, or always when it asked to be. A pin mismatch is never
    /// overruled: pins are the app's own rule, stricter than any delegate.
    /// `chain`: the certificates the server presented, DER, the leaf first.
    func evaluate(
        host: String,
        port: Int,
        chain: [[UInt8]],
        platformTrust: PlatformTrust? = nil,
        ourCheck: () async throws -> Void
    ) async throws {
        var failure: HTTPEngineError?
        do {
            try await ourCheck()
        } catch let error as HTTPEngineError
            where error.code == .untrustedCertificate || error.code == .certificateNameMismatch
        {
            failure = error
        }
        guard failure != nil || always else { return }
        let question = ServerTrustQuestion(
            host: host,
            port: port,
            chain: chain,
            failure: failure,
            platformTrust: platformTrust
        )
        switch await decide(question) {
        case .accept: return
        case .ourCheck: if let failure { throw failure }
        case .refuse(let error): throw error
        case .askerGone:
            throw HTTPEngineError(
                .cancelled,
                "the request that asked about \(host)'s certificate went away before an answer",
                underlying: ServerTrustAskerGone()
            )
        }
    }
}
