// What a load needs to know about its task and session: cookie storage, the session's extra headers
// and timeouts, the upload body, stored credentials. What is the same everywhere is here; what differs
// between Apple's loading system and swift-corelibs-foundation is the load's host, one small type per
// platform with the same shape (`LoadHosting`: the I/O primitives, how the client and the delegate are
// reached) and its delivery strategy (`LoadDelivery`: what the load does for its task that the loading
// system does not). Apple: `AppleLoadHost` (Sessions/LoadHost+Apple.swift) with `SystemDelivery`, which
// does nothing; corelibs: `CorelibsLoadHost` with `CorelibsDelivery` (Corelibs/). No `#if` in between.

import Foundation
import NIOCore
import HTTPDNSEngine
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The platform's part of a load (see the file comment): its I/O primitives (what it can see of the
/// task and session, how it reaches the client and the delegate) and its delivery strategy.
protocol LoadHosting {
    associatedtype Delivery: LoadDelivery
    /// `interception`: the one the load belongs to (its trust partitions, its slots); `protocolClass`:
    /// the class the loading system instantiated (on Apple platforms, a configuration
    /// slot's: ConfigurationSlots.swift).
    init(task: URLSessionTask?, interception: Interception, protocolClass: AnyClass)
    /// The session's configuration: corelibs shows the session; on Apple platforms the protocol class
    /// names its slot, which keeps a copy (ConfigurationSlots.swift). nil for loads of `URLSession.shared`
    /// and the like.
    var configuration: URLSessionConfiguration? { get }
    /// The session's credential storage: its configuration's, or where that is not known the shared
    /// one (the default's); nil when the session keeps none.
    var credentials: URLCredentialStorage? { get }
    /// Where client calls must be made, in order (see `ClientGate`); nil: on the caller's thread.
    var clientSchedule: ClientSchedule? { get }
    /// Whether a delegate may be there to answer challenges (Apple platforms: always, as far as a
    /// URLProtocol can tell).
    var mayHaveDelegate: Bool { get }
    /// The pool partition of the connections this load's delegate decides on: its session's (Linux), or
    /// its configuration slot's (Apple platforms, where a URLProtocol cannot see its session).
    func trustPartition() -> UInt64
    /// Puts `challenge` to the app's delegate; `answer` is called once with its answer.
    func askDelegate(
        _ challenge: URLAuthenticationChallenge,
        connectionLevel: Bool,
        gate: ClientGate,
        answer: @escaping @Sendable (ChallengeAnswer) -> Void
    )
    /// Returns once the client queue and then the session's delegate queue have run everything queued
    /// before (no-op where the queues are not known). On Apple platforms, once the loading system's
    /// thread has taken the client calls queued before: it hands data on to the delegate queue itself,
    /// out of a URLProtocol's sight, so this bounds what waits in our calls, not in its queue.
    func delegateQueueCaughtUp() async
    /// What the load does for its task that the platform's loading system does not do for a URLProtocol.
    var delivery: Delivery { get }
}

/// The delivery strategy: what a load does for its task beyond handing the client the response and
/// its body. Apple's loading system does all of it for a URLProtocol (`SystemDelivery`: every default
/// below); swift-corelibs-foundation does it only for its own protocol, so there the load stands in
/// (`CorelibsDelivery`: progress, the URL cache, downloads to a file, redirects followed here).
protocol LoadDelivery {
    /// Whether every chunk is handed over as it comes (else all at the end).
    var deliversEveryChunk: Bool { get }
    /// An upload task's body, where the task keeps it rather than the request (corelibs).
    func taskBody() -> BodySource?
    /// `request`'s header fields without what the loading system added itself (corelibs adds a Cookie
    /// header from the session's storage to every task, by its own matching).
    func headersSetByTheApp(_ request: URLRequest) -> [String: String]
    /// The session cache's size, where the protocol keeps responses in it itself (corelibs keeps only
    /// its own protocol's; Apple's loading system keeps a URLProtocol's too): nil where it does not.
    var cacheCapacity: Int? { get }
    /// Keeps a finished response in the session's cache for the task, after its delegate's
    /// `willCacheResponse` (which may change it or say no), as corelibs does for its own protocol.
    /// Called on the client queue, after the load has finished.
    func storeInCache(_ response: HTTPURLResponse, data: Data)
    /// A download task on swift-corelibs-foundation, whose body goes to a file (`deliverDownload`).
    var isCorelibsDownload: Bool { get }
    /// Where a finished download's file is, for corelibs to hand over; false when it cannot be told.
    func setDownloadedFile(_ file: URL, of urlProtocol: URLProtocol) -> Bool
    /// Tells a download task's delegate how far the download is, as corelibs' own protocol does.
    func downloadProgress(written: Int64, total: Int64, expected: Int64)
    /// The response's length, as corelibs' own protocol records it on the task.
    func responseArrived(expectedLength: Int64)
    /// The storage policy passed to the client: corelibs never stores a custom protocol's response in
    /// the URL cache, but buffers the whole body for it when told `.allowed`, so there only
    /// `.notAllowed` is passed on.
    func storagePolicy(_ policy: URLCache.StoragePolicy) -> URLCache.StoragePolicy
    /// Upload progress as corelibs' own protocol reports it: the task's `countOfBytesSent` and
    /// `countOfBytesExpectedToSend`, and the delegate's `didSendBodyData`, in order with the load's other
    /// calls. nil where the loading system keeps these itself, or without a task. Each send of the
    /// body (a redirect or an authentication round sends it again) counts from zero.
    func uploadProgress(expected: Int?) -> (@Sendable (Int) -> Void)?
    /// Runs `work` after everything queued on the session's delegate queue so far (now, without one).
    func afterDelegateQueue(_ work: @escaping @Sendable () -> Void)
    /// Who follows the load's redirects: the loading system (the protocol reports them), or the
    /// protocol itself on corelibs, which crashes on the report, at most `maxRedirects` hops.
    func redirectHandling(maxRedirects: Int) -> URLLoad.RedirectHandling
    /// A redirect followed inside the protocol (corelibs): the task's `currentRequest` becomes it.
    func followedRedirect(to request: URLRequest)
    /// The delegate's say on a redirect the protocol follows itself (corelibs); nil: refused.
    func redirectDecision(response: HTTPURLResponse, newRequest: URLRequest) async -> URLRequest?
    /// Whether the session's delegate has had to decide on `host`'s certificate before (corelibs, which
    /// never asks about server trust itself).
    func certificateNeededDelegate(_ host: String) -> Bool
    func rememberCertificateNeedsDelegate(_ host: String)
}

/// What the loading system does for a URLProtocol itself: nothing for the load to do.
extension LoadDelivery {
    var deliversEveryChunk: Bool { true }
    func taskBody() -> BodySource? { nil }
    func headersSetByTheApp(_ request: URLRequest) -> [String: String] { request.allHTTPHeaderFields ?? [:] }
    var cacheCapacity: Int? { nil }
    func storeInCache(_ response: HTTPURLResponse, data: Data) {}
    var isCorelibsDownload: Bool { false }
    func setDownloadedFile(_ file: URL, of urlProtocol: URLProtocol) -> Bool { false }
    func downloadProgress(written: Int64, total: Int64, expected: Int64) {}
    func responseArrived(expectedLength: Int64) {}
    func storagePolicy(_ policy: URLCache.StoragePolicy) -> URLCache.StoragePolicy { policy }
    func uploadProgress(expected: Int?) -> (@Sendable (Int) -> Void)? { nil }
    func afterDelegateQueue(_ work: @escaping @Sendable () -> Void) { work() }
    func redirectHandling(maxRedirects: Int) -> URLLoad.RedirectHandling { .reportToSystem }
    func followedRedirect(to request: URLRequest) {}
    /// The loading system asks the delegate about redirects itself: a load never asks here; were it to,
    /// the redirect would be followed, as without a delegate.
    func redirectDecision(response: HTTPURLResponse, newRequest: URLRequest) async -> URLRequest? { newRequest }
    func certificateNeededDelegate(_ host: String) -> Bool { false }
    func rememberCertificateNeedsDelegate(_ host: String) {}
}

/// Apple's loading system, which does everything `LoadDelivery` covers for a URLProtocol itself.
struct SystemDelivery: LoadDelivery {}

/// `@unchecked Sendable`: it holds the session's Foundation objects (cookie and credential storage,
/// cache), which are thread-safe but not marked Sendable on every platform; it is made once per load,
/// before the load starts, and never changed after.
struct LoadContext: @unchecked Sendable {
    var taskIdentifier: Int?
    var cookieStorage: HTTPCookieStorage?
    /// Which responses may set cookies: the session's policy (corelibs applies it, not the storage's),
    /// or on Apple platforms the storage's.
    var cookieAcceptPolicy = HTTPCookie.AcceptPolicy.always
    var additionalHeaders: [String: String] = [:]
    var sessionRequestTimeout: TimeInterval?
    var resourceTimeout: TimeInterval?
    /// When the session's resource timeout ends for this load: set once, when the load starts, and
    /// shared by every request it sends (redirect hops, 401 and 407 rounds, a trust re-ask), as a task's
    /// resource timeout covers the whole task.
    var resourceDeadline: NIODeadline?
    /// The body length the task expects to send (an upload task's data or file), when it knows it:
    /// Apple's loading system hands such a body to a URLProtocol as a stream, and the length keeps it
    /// from going out chunked (object stores refuse chunked PUTs).
    var expectedUploadLength: Int?
    /// This platform's part.
    let host: LoadHost

    /// What the load does for its task that the loading system does not (see `LoadDelivery`).
    var delivery: LoadHost.Delivery { host.delivery }

    /// - Parameter protocolClass: the class the loading system instantiated: on Apple platforms it names
    ///   the session's configuration (ConfigurationSlots.swift); corelibs shows the session itself.
    init(task: URLSessionTask?, interception: Interception, setup: HTTPDNSURLProtocol.Setup, protocolClass: AnyClass) {
        taskIdentifier = task?.taskIdentifier
        expectedUploadLength = BodyLength.known(taskExpects: task?.countOfBytesExpectedToSend ?? -1)
        host = LoadHost(task: task, interception: interception, protocolClass: protocolClass)
        let configuration = host.configuration
        // The session's own settings where its configuration is known; the shared storage otherwise
        // (`URLSession.shared`, a protocol registered globally).
        cookieStorage =
            setup.cookieStorage
            ?? (configuration.map { $0.httpShouldSetCookies ? $0.httpCookieStorage : nil } ?? HTTPCookieStorage.shared)
        cookieAcceptPolicy = configuration?.httpCookieAcceptPolicy ?? cookieStorage?.cookieAcceptPolicy ?? .always
        for (key, value) in configuration?.httpAdditionalHeaders ?? [:] {
            if let name = key as? String, let text = value as? String { additionalHeaders[name] = text }
        }
        sessionRequestTimeout = configuration?.timeoutIntervalForRequest
        resourceTimeout = configuration?.timeoutIntervalForResource
        // Past a year the timeout bounds nothing (and would not fit in a deadline).
        if let total = resourceTimeout, total > 0, total < 365 * 86_400 {
            resourceDeadline = .now() + .nanoseconds(Int64(total * 1e9))
        }
    }

    /// The time left of the resource timeout, nil without one. Throws `URLError(.timedOut)` when it is
    /// over: the task fails as Apple's does when its resource timeout ends.
    func resourceTimeLeft() throws -> Duration? {
        guard let resourceDeadline else { return nil }
        let left = resourceDeadline - .now()
        guard left > .zero else {
            throw URLError(
                .timedOut,
                userInfo: [
                    NSLocalizedDescriptionKey: "the session's resource timeout (\(resourceTimeout ?? 0) s) ended"
                ]
            )
        }
        return .nanoseconds(left.nanoseconds)
    }

    /// The body the first request carries: `httpBody`, `httpBodyStream`, or an upload task's data or
    /// file (corelibs keeps those in the task, not in the request).
    func body(of request: URLRequest) -> BodySource {
        if let data = request.httpBody { return .data(data) }
        if let stream = request.httpBodyStream { return .stream(InputStreamReader(stream)) }
        return delivery.taskBody() ?? .none
    }

    /// Seconds of silence allowed: the request's own `timeoutInterval`, or the session's
    /// `timeoutIntervalForRequest` when the request kept the 60 s default.
    func requestTimeout(_ request: URLRequest) -> TimeInterval {
        if request.timeoutInterval == 60, let session = sessionRequestTimeout { return session }
        return request.timeoutInterval
    }

    private var credentialStorage: URLCredentialStorage? { host.credentials }

    /// The stored default credential for `space`, proposed to the delegate. corelibs' storage finds a
    /// space only by identity (its URLProtectionSpace has no equality), so there the stored space equal
    /// in every field is looked for, and its default credential (else its only one) taken.
    func storedCredential(for space: URLProtectionSpace) -> URLCredential? {
        guard let storage = credentialStorage else { return nil }
        if let found = storage.defaultCredential(for: space) { return found }
        guard let (stored, credentials) = storage.allCredentials.first(where: { Self.sameSpace($0.key, space) })
        else { return nil }
        return storage.defaultCredential(for: stored) ?? (credentials.count == 1 ? credentials.first?.value : nil)
    }

    /// Whether two protection spaces name the same place (what Apple's URLProtectionSpace equality
    /// compares).
    static func sameSpace(_ a: URLProtectionSpace, _ b: URLProtectionSpace) -> Bool {
        a.host.lowercased() == b.host.lowercased() && a.port == b.port && a.protocol == b.protocol
            && a.realm == b.realm && a.authenticationMethod == b.authenticationMethod && a.isProxy() == b.isProxy()
            && a.proxyType == b.proxyType
    }

    /// Keeps a credential the delegate gave, as its persistence asks.
    func store(_ credential: URLCredential, for space: URLProtectionSpace) {
        guard credential.persistence != .none else { return }
        credentialStorage?.set(credential, for: space)
    }
}
