// The app's URLSession delegate decides on authentication, with corelibs URLSession and the
// real peers: nginx's a.test (signed by the test CA, which the engine here is not told to trust unless a
// test says so), nginx's /basic (HTTP Basic, alice:wonderland) and a tinyproxy that wants the same
// credentials (407). These tests belong to URLSessionTests (its `install` and `interception`), whose
// tests run one at a time.

@testable import HTTPDNSTestSupport
@testable import HTTPDNSURLSession
import Crypto
import Foundation
import HTTPDNSCore
@testable import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOSSL
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A delegate answering every challenge with `answer`, and keeping what it was asked.
final class ChallengeDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    struct Seen: Sendable {
        var method: String
        var host: String
        var isProxy: Bool
        var realm: String?
        var failures: Int
        var certificates: [Data]
        var failureReason: String?
        var proposedUser: String?
    }

    let answer: @Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?)
    private let seenBox = NIOLockedValueBox<[Seen]>([])
    var seen: [Seen] { seenBox.withLockedValue { $0 } }

    init(
        _ answer:
            @escaping @Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?)
    ) {
        self.answer = answer
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let space = challenge.protectionSpace
        let trust = space as? HTTPDNSServerTrustSpace
        seenBox.withLockedValue {
            $0.append(
                Seen(
                    method: space.authenticationMethod,
                    host: space.host,
                    isProxy: space.isProxy(),
                    realm: space.realm,
                    failures: challenge.previousFailureCount,
                    certificates: trust?.certificates ?? [],
                    failureReason: trust?.failureReason,
                    proposedUser: challenge.proposedCredential?.user
                )
            )
        }
        let (disposition, credential) = answer(challenge)
        completionHandler(disposition, credential)
    }
}

/// Implements both challenge methods: the session-level one answers server trust with `sessionAnswer`;
/// which of them was asked is kept.
final class BothLevelsDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    let sessionAnswer: URLSession.AuthChallengeDisposition
    private let askedBox = NIOLockedValueBox<[String]>([])
    var asked: [String] { askedBox.withLockedValue { $0 } }

    init(sessionAnswer: URLSession.AuthChallengeDisposition) { self.sessionAnswer = sessionAnswer }

    func urlSession(
        _ session: URLSession,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        askedBox.withLockedValue { $0.append("session") }
        completionHandler(sessionAnswer, nil)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        askedBox.withLockedValue { $0.append("task") }
        completionHandler(.cancelAuthenticationChallenge, nil)
    }
}

/// Holds its first server trust question unanswered (a delegate showing a prompt); answers every later
/// one with the default.
final class HoldingFirstQuestionDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    private struct State {
        var questions = 0
        var held: (@Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)?
    }
    private let state = NIOLockedValueBox(State())
    private let asked = AsyncStream<Void>.makeStream()
    var questions: Int { state.withLockedValue { $0.questions } }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let first = state.withLockedValue { state in
            state.questions += 1
            if state.questions == 1 { state.held = completionHandler }
            return state.questions == 1
        }
        if first { asked.continuation.yield() } else { completionHandler(.performDefaultHandling, nil) }
    }

    func firstQuestionAsked() async {
        var iterator = asked.stream.makeAsyncIterator()
        _ = await iterator.next()
    }

    func answerTheHeldQuestion() {
        state.withLockedValue { $0.held }?(.cancelAuthenticationChallenge, nil)
    }
}

extension URLSessionTests {
    static let alice = URLCredential(user: "alice", password: "wonderland", persistence: .none)

    /// Installs the protocol for `host` (a.test); the engine trusts the test CA only when `trustCA`.
    func installForChallenges(
        _ peers: Peers,
        trustCA: Bool,
        asking: ServerTrustChallenges? = .whenOurCheckFails,
        host: String = "a.test",
        _ tweak: (inout HTTPEngine.Configuration) -> Void = { _ in }
    ) throws -> HTTPDNSURLProtocol.Setup {
        var engineConfiguration = HTTPEngine.Configuration()
        if trustCA {
            engineConfiguration.tls = HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: peers.ca))
        }
        tweak(&engineConfiguration)
        var setup = try HTTPDNSURLProtocol.Setup(
            resolver: try peers.resolver(),
            engineConfiguration: engineConfiguration,
            intercept: HostPolicy(only: [try HostPattern(host)])
        )
        if let asking { setup.serverTrustChallenges = asking }
        install(setup)
        return setup
    }

    func challengeSession(_ delegate: ChallengeDelegate?, delegate other: (any URLSessionDelegate)? = nil) -> URLSession
    {
        URLSession(
            configuration: interception.enabled(.ephemeral),
            delegate: delegate ?? other,
            delegateQueue: nil
        )
    }

    /// The base64 SHA-256 of the a.test certificate's public key, as a pinning delegate keeps it.
    func aTestPin(_ peers: Peers) throws -> String {
        try NIOSSLCertificateSPKI.digest(
            pem: String(contentsOfFile: peers.www + "/../certs/a.test.pem", encoding: .utf8)
        )
    }

    static func pin(of der: Data?) -> String? {
        guard let der, let certificate = try? NIOSSLCertificate(bytes: Array(der), format: .der),
            let spki = try? certificate.extractPublicKey().toSPKIBytes()
        else { return nil }
        return Data(SHA256.hash(data: spki)).base64EncodedString()
    }

    /// A request with a timeout a starved machine does not reach.
    static func request(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.timeoutInterval = 15
        return request
    }

    func get(_ session: URLSession, _ url: String) async throws -> (String, HTTPURLResponse) {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 15
        let (data, response) = try await session.data(for: request)
        return (String(decoding: data, as: UTF8.self), try #require(response as? HTTPURLResponse))
    }

    // MARK: Server trust

    @Test func aPinningDelegateAcceptsAPrivateCAOriginAndIsAskedOncePerConnection() async throws {
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: false)
        defer { setup.engine.shutdown() }
        let pin = try aTestPin(peers)
        let delegate = ChallengeDelegate { challenge in
            guard let space = challenge.protectionSpace as? HTTPDNSServerTrustSpace,
                Self.pin(of: space.certificates.first) == pin
            else { return (.cancelAuthenticationChallenge, nil) }
            return (.useCredential, nil)
        }
        let session = challengeSession(delegate)
        defer { session.invalidateAndCancel() }
        let (body, response) = try await get(session, peers.url("a.test", "/whoami"))
        #expect(response.statusCode == 200 && body.contains("sni=a.test"), "\(body)")
        let (_, again) = try await get(session, peers.url("a.test", "/whoami"))
        #expect(again.statusCode == 200)
        let seen = delegate.seen
        // One connection (h2, reused by the second task), one question about it.
        #expect(seen.count == 1, "\(seen.map(\.method))")
        #expect(seen.first?.method == HTTPDNSServerTrustSpace.authenticationMethod)
        #expect(seen.first?.host == "a.test")
        #expect(seen.first?.failureReason?.contains("not trusted") == true, "\(seen.first?.failureReason ?? "nil")")
        #expect((seen.first?.certificates.count ?? 0) >= 1)
    }

    @Test func aDelegateThatCancelsRefusesTheOriginAndDefaultHandlingKeepsOurVerdict() async throws {
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: false)
        defer { setup.engine.shutdown() }
        for (disposition, expected) in [
            (URLSession.AuthChallengeDisposition.cancelAuthenticationChallenge, URLError.Code.cancelled),
            (.performDefaultHandling, .serverCertificateUntrusted),
            (.rejectProtectionSpace, .serverCertificateUntrusted),
        ] {
            let delegate = ChallengeDelegate { _ in (disposition, nil) }
            let session = challengeSession(delegate)
            defer { session.invalidateAndCancel() }
            do {
                _ = try await get(session, peers.url("a.test", "/whoami"))
                Issue.record("\(disposition): the untrusted origin was accepted")
            } catch let error as URLError {
                #expect(error.code == expected, "\(disposition): \(error)")
            }
            #expect(delegate.seen.count == 1, "\(disposition)")
        }
        // Without a delegate there is nobody to ask: our verdict, at once.
        do {
            _ = try await get(challengeSession(nil), peers.url("a.test", "/whoami"))
            Issue.record("accepted without a delegate")
        } catch let error as URLError {
            #expect(error.code == .serverCertificateUntrusted)
        }
    }

    @Test func aPasswordCredentialIsNoTrustCredential() async throws {
        // A naive delegate answering every challenge with its Basic credential: Apple accepts a server
        // only with `URLCredential(trust:)`, so the untrusted certificate stands.
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: false)
        defer { setup.engine.shutdown() }
        let naive = ChallengeDelegate { _ in (.useCredential, Self.alice) }
        let session = challengeSession(naive)
        defer { session.invalidateAndCancel() }
        do {
            let (_, response) = try await get(session, peers.url("a.test", "/whoami"))
            Issue.record("a password credential accepted an untrusted certificate: \(response.statusCode)")
        } catch let error as URLError {
            #expect(error.code == .serverCertificateUntrusted, "\(error)")
        }
        #expect(naive.seen.map(\.method) == [HTTPDNSServerTrustSpace.authenticationMethod])
    }

    @Test func aCertificateForAnotherNameIsAnUntrustedServerCertificateAsWithApple() async throws {
        // c.test resolves to nginx, which has no c.test certificate. Apple's URLSession says -1202.
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: true, host: "c.test")
        defer { setup.engine.shutdown() }
        let session = challengeSession(nil)
        defer { session.invalidateAndCancel() }
        do {
            _ = try await get(session, peers.url("c.test", "/whoami"))
            Issue.record("accepted a certificate that does not name c.test")
        } catch let error as URLError {
            #expect(error.code == .serverCertificateUntrusted, "\(error)")
        }
    }

    @Test func serverTrustGoesToTheSessionLevelMethodFirst() async throws {
        // Apple's URLSession sends server trust to `urlSession(_:didReceive:completionHandler:)`: its
        // answer stands, and the task-level method is not asked about it.
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: false)
        defer { setup.engine.shutdown() }
        for (sessionAnswer, expected) in [
            (URLSession.AuthChallengeDisposition.useCredential, Optional<URLError.Code>.none),
            (.cancelAuthenticationChallenge, .cancelled),
        ] {
            let delegate = BothLevelsDelegate(sessionAnswer: sessionAnswer)
            let session = challengeSession(nil, delegate: delegate)
            defer { session.invalidateAndCancel() }
            do {
                let (_, response) = try await get(session, peers.url("a.test", "/whoami"))
                #expect(expected == nil && response.statusCode == 200, "\(sessionAnswer)")
            } catch let error as URLError {
                #expect(error.code == expected, "\(sessionAnswer): \(error)")
            }
            #expect(delegate.asked == ["session"], "\(sessionAnswer): \(delegate.asked)")
        }
    }

    @Test func cancellingTheLoadThatOpenedTheConnectionFailsNoneOfItsNeighbours() async throws {
        // A opens the connection and its delegate is asked about the server; B and C of the same
        // session wait for that connection. A is cancelled while the delegate thinks (an image load
        // scrolled away): B and C must get their responses, as with a plain URLSession.
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: true, asking: nil)
        defer { setup.engine.shutdown() }
        let delegate = HoldingFirstQuestionDelegate()
        let session = challengeSession(nil, delegate: delegate)
        defer { session.invalidateAndCancel() }
        let url = URL(string: peers.url("a.test", "/whoami"))!
        let a = session.dataTask(with: Self.request(url))
        a.resume()
        await delegate.firstQuestionAsked()
        let b = Task { try await session.data(for: Self.request(url)) }
        let c = Task { try await session.data(for: Self.request(url)) }
        // B and C are queued behind A's connect before A goes: wait until the pool holds all three.
        while setup.engine.pool.waitingRequests < 3 { try await Task.sleep(for: .milliseconds(5)) }
        a.cancel()
        let bResponse = (try await b.value.1 as? HTTPURLResponse)?.statusCode
        let cResponse = (try await c.value.1 as? HTTPURLResponse)?.statusCode
        #expect(bResponse == 200 && cResponse == 200)
        // A's question went unanswered; the connect made for B asked again.
        #expect(delegate.questions == 2, "\(delegate.questions)")
        delegate.answerTheHeldQuestion()
    }

    @Test func byDefaultADelegateIsAskedOncePerNewConnectionEvenAboutATrustedChain() async throws {
        // Apple's URLSession asks a delegate that implements the server trust challenge once for every
        // new TLS connection: a pinning delegate must see trusted chains too, or its pinning is skipped.
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: true, asking: nil)
        defer { setup.engine.shutdown() }
        #expect(setup.serverTrustChallenges == .always)
        let accepting = ChallengeDelegate { _ in (.performDefaultHandling, nil) }
        let session = challengeSession(accepting)
        defer { session.invalidateAndCancel() }
        for _ in 0..<3 {
            let (_, response) = try await get(session, peers.url("a.test", "/whoami"))
            #expect(response.statusCode == 200)
        }
        // One connection (h2), reused by the session's later requests: one question.
        #expect(accepting.seen.count == 1, "\(accepting.seen.map(\.method))")
        #expect(accepting.seen.first?.failureReason == nil, "our check passed: no failure to report")

        let refusing = ChallengeDelegate { _ in (.cancelAuthenticationChallenge, nil) }
        let other = self.challengeSession(refusing)
        defer { other.invalidateAndCancel() }
        do {
            _ = try await get(other, peers.url("a.test", "/whoami"))
            Issue.record("a refusing delegate's session used a connection another session's delegate accepted")
        } catch let error as URLError {
            #expect(error.code == .cancelled)
        }
        #expect(refusing.seen.count == 1)
    }

    @Test func aPreconnectedConnectionServesASessionWhoseDelegateIsAskedAboutItFirst() async throws {
        // The app pre-connects at launch; its session's delegate has a say on every new connection. The
        // session's first request takes the pre-connected connection, asking the delegate about it
        // first, as about a connection of its own; no second connection is made.
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: true, asking: nil)
        defer { setup.engine.shutdown() }
        let origin = try HTTPURL(origin: peers.url("a.test", "/"))
        try await setup.engine.preconnect(origin)
        #expect(setup.engine.openConnections == 1)
        let accepting = ChallengeDelegate { _ in (.performDefaultHandling, nil) }
        let session = challengeSession(accepting)
        defer { session.invalidateAndCancel() }
        for _ in 0..<2 {
            let (_, response) = try await get(session, peers.url("a.test", "/whoami"))
            #expect(response.statusCode == 200)
        }
        #expect(accepting.seen.count == 1, "asked once, about the pre-connected connection")
        #expect(setup.engine.openConnections == 1, "the session made no connection of its own")
        // Another pre-connected one, and a session whose delegate refuses it: the request fails as with
        // a new connection, and the refused connection closes.
        try await setup.engine.preconnect(origin)
        #expect(setup.engine.openConnections == 2)
        let refusing = ChallengeDelegate { _ in (.cancelAuthenticationChallenge, nil) }
        let other = challengeSession(refusing)
        defer { other.invalidateAndCancel() }
        do {
            _ = try await get(other, peers.url("a.test", "/whoami"))
            Issue.record("a refusing delegate's session used the pre-connected connection")
        } catch let error as URLError {
            #expect(error.code == .cancelled)
        }
        #expect(refusing.seen.count == 1)
    }

    // MARK: HTTP 401 and proxy 407

    @Test func a401IsAnsweredWithTheDelegatesCredential() async throws {
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: true)
        defer { setup.engine.shutdown() }
        let delegate = ChallengeDelegate { challenge in
            challenge.previousFailureCount == 0 ? (.useCredential, Self.alice) : (.cancelAuthenticationChallenge, nil)
        }
        let session = challengeSession(delegate)
        defer { session.invalidateAndCancel() }
        let (body, response) = try await get(session, peers.url("a.test", "/basic"))
        #expect(response.statusCode == 200, "\(body)")
        #expect(response.value(forHTTPHeaderField: "X-User") == "alice")
        #expect(body.hasPrefix("swift-httpdns compresses well."))
        #expect(delegate.seen.count == 1)
        #expect(delegate.seen.first?.method == NSURLAuthenticationMethodHTTPBasic)
        #expect(delegate.seen.first?.realm == "httpdns-test")
    }

    @Test func aWrongCredentialIsAskedAgainAndAnUnansweredChallengeDeliversThe401() async throws {
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: true)
        defer { setup.engine.shutdown() }
        let wrong = URLCredential(user: "alice", password: "looking-glass", persistence: .none)
        let delegate = ChallengeDelegate { challenge in
            switch challenge.previousFailureCount {
            case 0: (.useCredential, wrong)
            case 1: (.useCredential, Self.alice)
            default: (.cancelAuthenticationChallenge, nil)
            }
        }
        let session = challengeSession(delegate)
        defer { session.invalidateAndCancel() }
        let (_, response) = try await get(session, peers.url("a.test", "/basic"))
        #expect(response.statusCode == 200)
        #expect(delegate.seen.map(\.failures) == [0, 1])

        let declining = ChallengeDelegate { _ in (.performDefaultHandling, nil) }
        let plain = self.challengeSession(declining)
        defer { plain.invalidateAndCancel() }
        let (_, denied) = try await get(plain, peers.url("a.test", "/basic"))
        #expect(denied.statusCode == 401)
        #expect(declining.seen.count == 1)

        let cancelling = ChallengeDelegate { _ in (.cancelAuthenticationChallenge, nil) }
        let third = self.challengeSession(cancelling)
        defer { third.invalidateAndCancel() }
        do {
            _ = try await get(third, peers.url("a.test", "/basic"))
            Issue.record("a cancelled challenge delivered a response")
        } catch let error as URLError {
            #expect(error.code == .cancelled)
        }
    }

    @Test func aCredentialIsKeptOnlyOnceItHasWorked() async throws {
        // A delegate first gives a wrong password for the session (persistence .forSession), then the
        // right one: only the one that worked is kept in the session's storage, as URLSession keeps it.
        let peers = try Peers.require()
        let setup = try installForChallenges(peers, trustCA: true)
        defer { setup.engine.shutdown() }
        let wrongUser = "mallory-\(UUID().uuidString)"
        let rightUser = "alice"
        let wrong = URLCredential(user: wrongUser, password: "looking-glass", persistence: .forSession)
        let right = URLCredential(user: rightUser, password: "wonderland", persistence: .forSession)
        let delegate = ChallengeDelegate { challenge in
            challenge.previousFailureCount == 0 ? (.useCredential, wrong) : (.useCredential, right)
        }
        let session = challengeSession(delegate)
        defer { session.invalidateAndCancel() }
        let (_, response) = try await get(session, peers.url("a.test", "/basic"))
        #expect(response.statusCode == 200)
        let storage = try #require(session.configuration.urlCredentialStorage)
        let kept = storage.allCredentials.values.flatMap { $0.keys }
        #expect(!kept.contains(wrongUser), "a password that failed was stored: \(kept)")
        #expect(kept.contains(rightUser), "the password that worked was not stored: \(kept)")
    }

    @Test func aProxys407IsAnsweredWithTheDelegatesCredential() async throws {
        let peers = try Peers.require()
        let port = try #require(
            ProcessInfo.processInfo.environment["HTTPDNS_TINYPROXY_AUTH_PORT"].flatMap(Int.init),
            "the Basic tinyproxy is not running"
        )
        let setup = try installForChallenges(peers, trustCA: true) { engine in
            engine.network.proxy = HTTPProxySettings(all: HTTPProxy(host: "127.0.0.1", port: port))
        }
        defer { setup.engine.shutdown() }
        let delegate = ChallengeDelegate { challenge in
            challenge.protectionSpace.isProxy() ? (.useCredential, Self.alice) : (.performDefaultHandling, nil)
        }
        let session = challengeSession(delegate)
        defer { session.invalidateAndCancel() }
        let (body, response) = try await get(session, peers.url("a.test", "/whoami"))
        #expect(response.statusCode == 200 && body.contains("sni=a.test"), "\(body)")
        #expect(delegate.seen.count == 1)
        #expect(delegate.seen.first?.isProxy == true && delegate.seen.first?.host == "127.0.0.1")

        // Nobody to give credentials: the proxy's refusal, with the advice to give them.
        do {
            _ = try await get(self.challengeSession(nil), peers.url("a.test", "/whoami"))
            Issue.record("tunnelled without credentials")
        } catch let error as URLError {
            #expect(error.code == .cannotConnectToHost)
            #expect("\(error.localizedDescription)".contains("407"), "\(error.localizedDescription)")
        }
    }
}
