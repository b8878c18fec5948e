// The app's URLSession delegate decides on authentication, as with the system stack:
//
// - Server trust. When our check refuses the origin's certificate (a private CA, a name mismatch), or
//   for every new connection when the app asks (`ServerTrustChallenges.always`), the delegate gets a
//   challenge whose protection space is an `HTTPDNSServerTrustSpace`: the chain, why our check failed,
//   and on Apple platforms a `serverTrust`. `.useCredential` accepts the server (the app pinned or
//   trusted it), `.cancelAuthenticationChallenge` fails the task as cancelled, `.performDefaultHandling`
//   and `.rejectProtectionSpace` keep our verdict. A request whose certificate failed is sent again on a
//   connection that asks (nothing was sent on the refused one); on Linux the session's later requests
//   to that host ask at once, on their own connections. Pins are never overruled.
// - HTTP 401 (Digest, Basic) and a proxy's 407: the delegate gets the challenge with the session's
//   stored credential proposed; a credential it gives is sent (the request again, its body too unless
//   it was a stream), `.performDefaultHandling` uses the proposed one once, anything else delivers the
//   401 as the response (or, for a proxy, fails), `.cancelAuthenticationChallenge` cancels.
// - Client certificates are not asked for: NIOSSL gives no client-side hook for the server's
//   certificate request, and corelibs' URLCredential has no identity.
//
// Linux (corelibs): the task's delegate, else the session's, is called on the session's delegate queue
// (corelibs' `_ProtocolClient` would hand the task to its own libcurl protocol instead); server trust
// goes to the session-level method first, as Apple's URLSession sends it, and to the task-level one
// when that answers with the default.
//
// A server trust question belongs to the connection, not to the load that opened it: when that load
// stops first (cancelled during the handshake), nobody answers, the connect ends without a verdict and
// the loads still waiting connect again, each asking for itself (`ServerTrustAnswer.askerGone`). Apple: through
// the URLProtocol client (`didReceive challenge`), which routes it as the system does, with a sender of
// ours; COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Security)
    import Security
#endif

/// The protection space of the server trust challenges HTTPDNS puts to a URLSession delegate: its
/// `authenticationMethod` is ``authenticationMethod`` (the value of Apple's
/// `NSURLAuthenticationMethodServerTrust`, which corelibs marks unavailable), and it carries the chain
/// the server presented. On Apple platforms `serverTrust` is a trust object for it (the system's and the
/// configured extra roots as anchors, the SSL policy for the host), so existing evaluators work unchanged.
///
/// Answer `.useCredential` to accept the server (on Apple platforms with `URLCredential(trust:)`, as
/// Apple's URLSession wants it: without a credential the answer leaves the verdict to our check; on
/// Linux, where there is no trust object, any credential or nil), `.cancelAuthenticationChallenge` to
/// refuse it, `.performDefaultHandling` to keep our check's verdict.
///
/// `@unchecked Sendable` like its superclass on Apple platforms: every stored property is a `let`.
public final class HTTPDNSServerTrustSpace: URLProtectionSpace, @unchecked Sendable {
    /// `"NSURLAuthenticationMethodServerTrust"`.
    public static let authenticationMethod = "NSURLAuthenticationMethodServerTrust"

    /// The certificates the server presented, DER-encoded, the leaf first.
    public let certificates: [Data]
    /// Why our check refused the server (untrusted, name mismatch); nil when it passed and the app
    /// asked to see every chain (`ServerTrustChallenges.always`).
    public let failureReason: String?

    #if canImport(Darwin)
        private let trust: SecTrust?
        /// The trust object for ``certificates``.
        public override var serverTrust: SecTrust? { trust }
    #endif

    /// `platformTrust`: the handshake's own trust object where the system ran TLS (its stapled OCSP
    /// response and SCTs kept); without one, a trust object is made from the chain.
    init(
        host: String,
        port: Int,
        certificates: [Data],
        failureReason: String?,
        additionalRoots: [[UInt8]],
        platformTrust: PlatformTrust? = nil
    ) {
        self.certificates = certificates
        self.failureReason = failureReason
        #if canImport(Darwin)
            if let object = platformTrust?.object, CFGetTypeID(object) == SecTrustGetTypeID() {
                trust = (object as! SecTrust)
            } else {
                trust = ApplePlatformTrust.makeTrust(
                    chain: certificates.map { Array($0) },
                    host: host,
                    additionalRoots: additionalRoots
                )
            }
        #endif
        super.init(
            host: host,
            port: port,
            protocol: "https",
            realm: nil,
            authenticationMethod: Self.authenticationMethod
        )
    }

    #if canImport(Darwin)
        required init?(coder: NSCoder) { nil }
    #endif
}

/// A delegate's answer.
typealias ChallengeAnswer = (disposition: URLSession.AuthChallengeDisposition, credential: URLCredential?)

/// Takes the delegate's answer through the challenge's sender (Apple platforms), once. `@unchecked
/// Sendable`: NSObject subclasses are not inferred Sendable; its only state is a `let` Sendable closure.
final class ChallengeSender: NSObject, URLAuthenticationChallengeSender, @unchecked Sendable {
    private let answer: @Sendable (ChallengeAnswer) -> Void

    init(_ answer: @escaping @Sendable (ChallengeAnswer) -> Void) { self.answer = answer }

    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {
        answer((.useCredential, credential))
    }
    /// Apple's meaning: go on without a credential. A 401 is then the answer, and a server's
    /// certificate gets the default evaluation (our check), never an acceptance: it arrives as
    /// `.rejectProtectionSpace`, which the challenge's handlers read that way.
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {
        answer((.rejectProtectionSpace, nil))
    }
    func cancel(_ challenge: URLAuthenticationChallenge) { answer((.cancelAuthenticationChallenge, nil)) }
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) { answer((.performDefaultHandling, nil)) }
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {
        answer((.rejectProtectionSpace, nil))
    }
}

/// A challenge handed to the URL loading system's thread (Apple platforms): made here, not touched
/// again after it is sent.
struct UncheckedChallenge: @unchecked Sendable {
    let challenge: URLAuthenticationChallenge
}

/// Which connections a session's delegate had a say on: a partition of the engine's pool per URLSession
/// (Linux; on Apple platforms, where a URLProtocol cannot see its session, per configuration slot), and the hosts
/// whose certificate needed the delegate, which the session's later requests ask about at once. One per
/// interception; the partitions of two never meet (each interception's are numbered from its own number,
/// shifted past any count one process reaches), even where two share an engine.
final class TrustPartitions: Sendable {
    private struct Entry {
        weak var session: URLSession?
        var partition: UInt64
        var hostsNeedingDelegate: Set<String> = []
    }
    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var next: UInt64
    }
    private let state: NIOLockedValueBox<State>
    /// Hosts remembered per session at most.
    static let hostLimit = 256

    /// The partition of loads whose session is not known (Apple platforms: a configuration never
    /// enabled, such as `URLSession.shared`'s with the protocol registered globally).
    let withoutSlot: UInt64

    /// The partitions of the interception numbered `number`.
    init(number: Int) {
        withoutSlot = UInt64(number) << 32
        state = NIOLockedValueBox(State(next: withoutSlot))
    }

    /// A partition of its own (a configuration slot on Apple platforms).
    func unique() -> UInt64 {
        state.withLockedValue {
            $0.next += 1
            return $0.next
        }
    }

    /// The session's partition, made on first use; entries of sessions gone are dropped then.
    func partition(of session: URLSession) -> UInt64 {
        state.withLockedValue { state in
            let id = ObjectIdentifier(session)
            if let entry = state.entries[id], entry.session === session { return entry.partition }
            state.entries = state.entries.filter { $0.value.session != nil }
            state.next += 1
            state.entries[id] = Entry(session: session, partition: state.next)
            return state.next
        }
    }

    func needsDelegate(_ host: String, in session: URLSession) -> Bool {
        state.withLockedValue { state in
            guard let entry = state.entries[ObjectIdentifier(session)], entry.session === session else { return false }
            return entry.hostsNeedingDelegate.contains(host)
        }
    }

    func rememberNeedsDelegate(_ host: String, in session: URLSession) {
        _ = partition(of: session)
        state.withLockedValue { state in
            let id = ObjectIdentifier(session)
            guard state.entries[id]?.hostsNeedingDelegate.count ?? 0 < Self.hostLimit else { return }
            state.entries[id]?.hostsNeedingDelegate.insert(host)
        }
    }
}

extension HTTPDNSURLProtocol {
    /// Puts `challenge` to the app's delegate and waits for the answer. Without a delegate:
    /// `.performDefaultHandling`. nil when nobody can answer any more: the load stopped (cancelled,
    /// timed out) before or while the delegate thought.
    static func ask(
        _ space: URLProtectionSpace,
        proposed: URLCredential?,
        failures: Int,
        response: URLResponse?,
        error: (any Error)?,
        context: LoadContext,
        gate: ClientGate
    ) async -> ChallengeAnswer? {
        // A server trust question runs in the pool's connect, which the TLS handshake timeout bounds;
        // that task's cancellation answers "cancel".
        let pending = NIOLockedValueBox<Once<ChallengeAnswer?>?>(nil)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ChallengeAnswer?, Never>) in
                let once = Once(continuation)
                pending.withLockedValue { $0 = once }
                guard !Task.isCancelled else { return once.resume((.cancelAuthenticationChallenge, nil)) }
                gate.whenClosed { once.resume(nil) }
                guard gate.isOpen else { return }
                let sender = ChallengeSender { once.resume($0) }
                let challenge = URLAuthenticationChallenge(
                    protectionSpace: space,
                    proposedCredential: proposed,
                    previousFailureCount: failures,
                    failureResponse: response,
                    error: error,
                    sender: sender
                )
                context.host.askDelegate(challenge, connectionLevel: space is HTTPDNSServerTrustSpace, gate: gate) {
                    once.resume($0)
                }
            }
        } onCancel: {
            pending.withLockedValue { $0 }?.resume((.cancelAuthenticationChallenge, nil))
        }
    }

    /// The server trust evaluation for a request of this load: the delegate asked through `ask`.
    static func serverTrust(
        always: Bool,
        partition: UInt64,
        setup: Setup,
        context: LoadContext,
        gate: ClientGate
    ) -> ServerTrustEvaluation {
        let roots = setup.engine.configuration.tls.additionalTrustRoots.map(\.der)
        return ServerTrustEvaluation(partition: partition, always: always) { question in
            let space = HTTPDNSServerTrustSpace(
                host: question.host,
                port: question.port,
                certificates: question.chain.map { Data($0) },
                failureReason: question.failure?.message,
                additionalRoots: roots,
                platformTrust: question.platformTrust
            )
            // The load that opened this connection went away first (an image load cancelled on
            // scroll): the connect ends without a verdict and the loads still waiting for it connect
            // again, each asking for itself, instead of failing with the cancelled one.
            guard
                let answer = await ask(
                    space,
                    proposed: nil,
                    failures: 0,
                    response: nil,
                    error: question.failure.map { Translation.urlError($0, url: nil) },
                    context: context,
                    gate: gate
                )
            else { return .askerGone }
            switch trustDecision(answer, credentialRequired: trustCredentialRequired) {
            case .accept:
                return .accept
            case .refuse:
                return .refuse(
                    HTTPEngineError(.cancelled, "the app's delegate refused the certificate of \(question.host)")
                )
            case .ourCheck:
                return .ourCheck
            }
        }
    }

    /// What a delegate's answer to a server trust challenge means.
    enum TrustDecision: Equatable { case accept, refuse, ourCheck }

    /// `.useCredential` accepts the server only with a trust credential: on Apple platforms
    /// `URLCredential(trust:)` (nil there means no say, the default evaluation); corelibs has no trust
    /// credential, so nil counts there. A credential for something else (a user and password, a client
    /// identity) is no trust credential: a naive delegate that answers every challenge with its Basic
    /// credential must not accept any chain, so it leaves the verdict to our check. Cancel refuses;
    /// default handling, rejecting the space and "continue without credential" (the sender's, which
    /// arrives as `.rejectProtectionSpace`) leave the verdict to our check.
    static func trustDecision(_ answer: ChallengeAnswer, credentialRequired: Bool) -> TrustDecision {
        switch answer.disposition {
        case .useCredential:
            guard let credential = answer.credential else { return credentialRequired ? .ourCheck : .accept }
            return isTrustCredential(credential) ? .accept : .ourCheck
        case .cancelAuthenticationChallenge: return .refuse
        default: return .ourCheck
        }
    }

    /// A credential that carries neither a user, a password nor a client identity: what
    /// `URLCredential(trust:)` makes.
    static func isTrustCredential(_ credential: URLCredential) -> Bool {
        guard credential.user == nil, !credential.hasPassword else { return false }
        #if canImport(Darwin)
            return credential.identity == nil
        #else
            return true
        #endif
    }

    /// Whether accepting a server needs a trust credential on this platform.
    static var trustCredentialRequired: Bool {
        #if canImport(Darwin)
            return true
        #else
            return false
        #endif
    }

    /// `request` as `send` says it goes, within the resource timeout's time left, and the terms its
    /// connection is chosen by: the session's (its one factory, `Terms.forLoad`), asking the delegate
    /// about the origin's certificate where the machine or the session's policy wants it, with the
    /// delegate's proxy credentials after a 407. What a failure leads to is the machine's (`sendFailure`).
    static func prepared(
        _ original: HTTPEngineRequest,
        as send: URLLoad.Send,
        setup: Setup,
        context: LoadContext,
        gate: ClientGate
    ) throws -> (request: HTTPEngineRequest, terms: ConnectionProfile.Terms) {
        var request = original
        var terms = ConnectionProfile.Terms.forLoad(session: context.host.configuration, request: send.request)
        if request.url.isTLS, context.host.mayHaveDelegate,
            send.asksAboutTrust || setup.serverTrustChallenges == .always
                || context.delivery.certificateNeededDelegate(request.url.host)
        {
            terms.serverTrust = serverTrust(
                always: setup.serverTrustChallenges == .always,
                partition: context.host.trustPartition(),
                setup: setup,
                context: context,
                gate: gate
            )
        }
        if let credentials = send.proxyCredentials { terms.proxyCredentials = credentials }
        if let left = try context.resourceTimeLeft() { request.timeout = left }
        return (request, terms)
    }

    /// What a failed send of `request` means to the load's rules. `asked`: the send asked the delegate
    /// about the origin's certificate.
    static func sendFailure(_ error: any Error, of request: HTTPEngineRequest, asked: Bool) -> URLLoad.SendFailure {
        guard let error = error as? HTTPEngineError else { return .other }
        if request.url.isTLS, error.code == .untrustedCertificate || error.code == .certificateNameMismatch {
            return .certificateRefused(host: request.url.host, asked: asked)
        }
        return error.proxyRefusalStatus == 407 ? .proxyWantsCredentials : .other
    }

    /// Asks the delegate for the credentials of the proxy that answered 407 (`error`) to a request for
    /// `url`, after `rounds` answered before. Returns the answer and the credential it sent, for the load
    /// to keep once it has worked.
    static func askProxyCredentials(
        for failed: (error: any Error, url: HTTPURL)?,
        rounds: Int,
        setup: Setup,
        context: LoadContext,
        gate: ClientGate
    ) async -> (URLLoad.ProxyAnswer, (URLCredential, URLProtectionSpace)?) {
        guard let (error, url) = failed,
            let proxy = setup.engine.configuration.network.proxy?.proxy(scheme: url.scheme, host: url.host)
        else { return (.none, nil) }
        let space = URLProtectionSpace(
            proxyHost: proxy.host,
            port: proxy.port,
            type: url.isTLS ? NSURLProtectionSpaceHTTPSProxy : NSURLProtectionSpaceHTTPProxy,
            realm: nil,
            authenticationMethod: NSURLAuthenticationMethodHTTPBasic
        )
        let proposed = context.storedCredential(for: space)
        guard
            let answer = await ask(
                space,
                proposed: proposed,
                failures: rounds,
                response: nil,
                error: Translation.urlError(error, url: nil),
                context: context,
                gate: gate
            )
        else { return (.cancelled, nil) }
        guard let credential = chosenCredential(answer, proposed: proposed, failures: rounds),
            let user = credential.user
        else { return (answer.disposition == .cancelAuthenticationChallenge ? .cancelled : .none, nil) }
        return (.credentials(ProxyCredentials(user: user, password: credential.password ?? "")), (credential, space))
    }

    /// The credential to send after `answer`: the delegate's own, or with default handling the proposed
    /// one on the first round; nil to stop asking.
    static func chosenCredential(_ answer: ChallengeAnswer, proposed: URLCredential?, failures: Int) -> URLCredential? {
        switch answer.disposition {
        case .useCredential:
            return answer.credential?.user == nil ? nil : answer.credential
        case .performDefaultHandling:
            return failures == 0 && proposed?.hasPassword == true ? proposed : nil
        default:
            return nil
        }
    }

    /// After a 401 with a challenge we speak: asks the delegate and returns the request to send again
    /// with its `Authorization`, or nil to deliver the 401 (no credential, a body that cannot be sent
    /// twice). Throws `URLError(.cancelled)` when the delegate cancels. The credential sent is left in
    /// `unconfirmed`: the load keeps it (as its persistence asks) only once it has worked, so a wrong
    /// password is never stored.
    static func authenticate(
        after received: Received,
        request: URLRequest,
        body: BodySource,
        failures: Int,
        unconfirmed: inout (URLCredential, URLProtectionSpace)?,
        context: LoadContext,
        gate: ClientGate
    ) async throws -> URLRequest? {
        let (response, url, urlResponse) = (received.response, received.url, received.urlResponse)
        guard response.status.code == 401,
            let challenge = AuthChallenge.preferred(in: response.headers),
            let method = challenge.authenticationMethod, let host = url.host
        else { return nil }
        if case .stream = body { return nil }  // sent once already: deliver the 401
        let scheme = url.scheme?.lowercased() ?? "http"
        let space = URLProtectionSpace(
            host: host,
            port: url.port ?? (scheme == "https" ? 443 : 80),
            protocol: scheme,
            realm: challenge.realm,
            authenticationMethod: method
        )
        var proposed = context.storedCredential(for: space)
        if proposed == nil, let user = url.user {
            proposed = URLCredential(user: user, password: url.password ?? "", persistence: .none)
        }
        guard
            let answer = await ask(
                space,
                proposed: proposed,
                failures: failures,
                response: urlResponse,
                error: nil,
                context: context,
                gate: gate
            ), answer.disposition != .cancelAuthenticationChallenge
        else { throw URLError(.cancelled) }
        guard let credential = chosenCredential(answer, proposed: proposed, failures: failures),
            let user = credential.user
        else { return nil }
        var target = url.path.isEmpty ? "/" : url.path
        if let query = url.query { target += "?" + query }
        guard
            let authorization = challenge.authorization(
                user: user,
                password: credential.password ?? "",
                method: request.httpMethod ?? "GET",
                uri: target
            )
        else { return nil }
        unconfirmed = (credential, space)
        _ = try? await response.body.collect(upTo: 1 << 16)
        var next = request
        next.setValue(authorization, forHTTPHeaderField: "Authorization")
        return next
    }
}
