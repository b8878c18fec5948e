// What a load needs to know about its task and session: cookie storage, the session's extra headers
// and timeouts, how data reaches the task, the upload body, and (where the protocol follows redirects
// itself) the delegate's say on a redirect. On Apple platforms from public API; on corelibs partly
// through `CorelibsTask`.

import Foundation
import HTTPDNSEngine
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
    var deliversEveryChunk = true
    /// The body length the task expects to send (an upload task's data or file), when it knows it:
    /// Apple's loading system hands such a body to a URLProtocol as a stream, and the length keeps it
    /// from going out chunked (object stores refuse chunked PUTs).
    var expectedUploadLength: Int?
    /// Where client calls must be made, in order (see `ClientGate`); nil: on the caller's thread.
    var clientSchedule: ClientSchedule?
    /// Whether a delegate may be there to answer challenges (Apple platforms: always, as far as a
    /// URLProtocol can tell).
    var mayHaveDelegate = true
    /// The session's configuration: corelibs shows the session; on Apple platforms the protocol class
    /// names its slot, which keeps a copy (ConfigurationSlots.swift). nil for loads of `URLSession.shared` and the like.
    var sessionConfiguration: URLSessionConfiguration?
    #if canImport(Darwin)
        /// The pool partition for connections its delegate decides on: its configuration slot's (one per
        /// session made after enabling), or the one of the loads without a slot.
        private var slotPartition = TrustPartitions.withoutSlot
    #endif
    #if !canImport(Darwin)
        /// The task's work queue, where client calls are made.
        private var clientQueue: DispatchQueue?
        private var task: URLSessionTask?
        private var corelibs: CorelibsTask
    #endif

    /// - Parameter protocolClass: the class the loading system instantiated: on Apple platforms it names
    ///   the session's configuration (ConfigurationSlots.swift); corelibs shows the session itself.
    init(task: URLSessionTask?, setup: HTTPDNSURLProtocol.Setup, protocolClass: AnyClass) {
        taskIdentifier = task?.taskIdentifier
        expectedUploadLength = BodyLength.known(taskExpects: task?.countOfBytesExpectedToSend ?? -1)
        let configuration: URLSessionConfiguration?
        #if canImport(Darwin)
            let slot = ConfigurationSlots.shared.slot(of: protocolClass)
            configuration = slot.flatMap(ConfigurationSlots.shared.settings(of:))
            if let partition = slot.flatMap(ConfigurationSlots.shared.partition(of:)) { slotPartition = partition }
            clientSchedule = ClientRunLoop().perform
            credentials = configuration.map { $0.urlCredentialStorage } ?? URLCredentialStorage.shared
        #else
            self.task = task
            corelibs = CorelibsTask(task)
            configuration = corelibs.session?.configuration
            credentials = configuration?.urlCredentialStorage
            deliversEveryChunk = corelibs.deliversEveryChunk
            mayHaveDelegate = task?.delegate != nil || corelibs.session?.delegate != nil
            clientQueue = corelibs.workQueue
            if let queue = corelibs.workQueue {
                clientSchedule = { work in queue.async(execute: work) }
            }
        #endif
        // The session's own settings where its configuration is known; the shared storage otherwise
        // (`URLSession.shared`, a protocol registered globally).
        sessionConfiguration = configuration
        cookieStorage =
            setup.cookieStorage
            ?? (configuration.map { $0.httpShouldSetCookies ? $0.httpCookieStorage : nil } ?? HTTPCookieStorage.shared)
        cookieAcceptPolicy = configuration?.httpCookieAcceptPolicy ?? cookieStorage?.cookieAcceptPolicy ?? .always
        for (key, value) in configuration?.httpAdditionalHeaders ?? [:] {
            if let name = key as? String, let text = value as? String { additionalHeaders[name] = text }
        }
        sessionRequestTimeout = configuration?.timeoutIntervalForRequest
        resourceTimeout = configuration?.timeoutIntervalForResource
    }

    /// The body the first request carries: `httpBody`, `httpBodyStream`, or an upload task's data or
    /// file (corelibs keeps those in the task, not in the request).
    func body(of request: URLRequest) -> BodySource {
        if let data = request.httpBody { return .data(data) }
        if let stream = request.httpBodyStream { return .stream(InputStreamReader(stream)) }
        #if !canImport(Darwin)
            switch corelibs.knownBody {
            case .data(let data): return .data(data)
            case .file(let url): return .file(url)
            case .stream(let stream): return .stream(InputStreamReader(stream))
            case nil: break
            }
        #endif
        return .none
    }

    /// The request's header fields as the app set them. corelibs adds a Cookie header from the
    /// session's storage to every task, `httpShouldHandleCookies` or not, by its own matching; that
    /// header is taken out here (the protocol adds its own when the request handles cookies).
    func headersSetByTheApp(_ request: URLRequest) -> [String: String] {
        var fields = request.allHTTPHeaderFields ?? [:]
        #if !canImport(Darwin)
            if let key = fields.keys.first(where: { $0.lowercased() == "cookie" }), let url = request.url,
                let configuration = corelibs.session?.configuration, configuration.httpShouldSetCookies,
                let storage = configuration.httpCookieStorage, let stored = storage.cookies(for: url),
                HTTPCookie.requestHeaderFields(with: stored)["Cookie"] == fields[key]
            {
                fields[key] = nil
            }
        #endif
        return fields
    }

    /// The session cache's size, where the protocol keeps responses in it itself (corelibs keeps only
    /// its own protocol's; Apple's loading system keeps a URLProtocol's too): nil where it does not.
    var cacheCapacity: Int? {
        #if canImport(Darwin)
            return nil
        #else
            guard task is URLSessionDataTask, let cache = corelibs.session?.configuration.urlCache else { return nil }
            return max(cache.memoryCapacity, cache.diskCapacity)
        #endif
    }

    /// Keeps a finished response in the session's cache for the task, after its delegate's
    /// `willCacheResponse` (which may change it or say no), as corelibs does for its own protocol.
    /// Called on the client queue, after the load has finished.
    func storeInCache(_ response: HTTPURLResponse, data: Data) {
        #if !canImport(Darwin)
            guard let session = corelibs.session, let cache = session.configuration.urlCache,
                let task = task as? URLSessionDataTask
            else { return }
            let call = CacheCall(
                session: session,
                task: task,
                cache: cache,
                entry: CachedURLResponse(response: response, data: data, userInfo: nil, storagePolicy: .allowed)
            )
            guard let delegate = task.delegate as? any URLSessionDataDelegate else {
                return cache.storeCachedResponse(call.entry, for: task)
            }
            session.delegateQueue.addOperation {
                delegate.urlSession(call.session, dataTask: call.task, willCacheResponse: call.entry) { chosen in
                    if let chosen { call.cache.storeCachedResponse(chosen, for: call.task) }
                }
            }
        #endif
    }

    /// A download task on swift-corelibs-foundation, whose body goes to a file (`deliverDownload`).
    var isCorelibsDownload: Bool {
        #if canImport(Darwin)
            return false
        #else
            return task is URLSessionDownloadTask
        #endif
    }

    /// The response's length, as corelibs' own protocol records it on the task (Apple's loading system
    /// records it itself).
    func responseArrived(expectedLength: Int64) {
        #if !canImport(Darwin)
            if let task { CorelibsFields.setExpectedToReceive(expectedLength, of: task) }
        #endif
    }

    /// Who follows the load's redirects: Apple's loading system (the protocol reports them), or the
    /// protocol itself on corelibs, which crashes on the report, at most `maxRedirects` hops.
    func redirectHandling(maxRedirects: Int) -> URLLoadMachine.RedirectHandling {
        #if canImport(Darwin)
            return .reportToSystem
        #else
            return .followHere(max: maxRedirects)
        #endif
    }

    /// A redirect followed inside the protocol (corelibs): the task's `currentRequest` becomes it.
    func followedRedirect(to request: URLRequest) {
        #if !canImport(Darwin)
            if let task { CorelibsFields.setCurrentRequest(request, of: task) }
        #endif
    }

    /// Where a finished download's file is, for corelibs to hand over; false when it cannot be told.
    func setDownloadedFile(_ file: URL, of urlProtocol: URLProtocol) -> Bool {
        #if canImport(Darwin)
            return false
        #else
            return CorelibsFields.setTemporaryFileURL(file, of: urlProtocol)
        #endif
    }

    /// Runs `work` after everything queued on the session's delegate queue so far (now, without one).
    func afterDelegateQueue(_ work: @escaping @Sendable () -> Void) {
        #if canImport(Darwin)
            work()
        #else
            if let queue = corelibs.session?.delegateQueue { queue.addOperation(work) } else { work() }
        #endif
    }

    /// Upload progress as corelibs' own protocol reports it: the task's `countOfBytesSent` and
    /// `countOfBytesExpectedToSend`, and the delegate's `didSendBodyData`, in order with the load's other
    /// calls. nil where the loading system keeps these itself, or without a task. Each send of the
    /// body (a redirect or an authentication round sends it again) counts from zero.
    func uploadProgress(expected: Int?) -> (@Sendable (Int) -> Void)? {
        #if canImport(Darwin)
            return nil
        #else
            guard let task, let session = corelibs.session else { return nil }
            let call = ProgressCall(session: session, task: task, delegate: task.delegate)
            let expected = Int64(expected ?? -1)  // NSURLSessionTransferSizeUnknown
            let reported = NIOLockedValueBox<Int64>(0)
            let schedule = clientSchedule
            return { sent in
                let total = Int64(sent)
                let delta = reported.withLockedValue { last in
                    defer { last = max(last, total) }
                    return total - last
                }
                guard delta > 0 else { return }
                let report: @Sendable () -> Void = {
                    CorelibsFields.setBytesSent(total, expected: expected, of: call.task)
                    guard let delegate = call.delegate else { return }
                    call.session.delegateQueue.addOperation {
                        delegate.urlSession(
                            call.session,
                            task: call.task,
                            didSendBodyData: delta,
                            totalBytesSent: total,
                            totalBytesExpectedToSend: expected
                        )
                    }
                }
                if let schedule { schedule(report) } else { report() }
            }
        #endif
    }

    /// Tells a download task's delegate how far the download is, as corelibs' own protocol does.
    func downloadProgress(written: Int64, total: Int64, expected: Int64) {
        #if !canImport(Darwin)
            guard let session = corelibs.session, let task = task as? URLSessionDownloadTask,
                let delegate = (task.delegate ?? session.delegate) as? any URLSessionDownloadDelegate
            else { return }
            let call = DownloadCall(session: session, task: task, delegate: delegate)
            session.delegateQueue.addOperation {
                call.delegate.urlSession(
                    call.session,
                    downloadTask: call.task,
                    didWriteData: written,
                    totalBytesWritten: total,
                    totalBytesExpectedToWrite: expected
                )
            }
        #endif
    }

    /// Returns once the client queue and then the session's delegate queue have run everything queued
    /// before (no-op where the queues are not known). On Apple platforms, once the loading system's
    /// thread has taken the client calls queued before: it hands data on to the delegate queue itself,
    /// out of a URLProtocol's sight, so this bounds what waits in our calls, not in its queue.
    func delegateQueueCaughtUp() async {
        #if canImport(Darwin)
            guard let schedule = clientSchedule else { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                schedule { continuation.resume() }
            }
        #else
            guard let delegateQueue = corelibs.session?.delegateQueue else { return }
            let clientQueue = self.clientQueue ?? DispatchQueue.global()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                clientQueue.async { delegateQueue.addOperation { continuation.resume() } }
            }
        #endif
    }

    /// Seconds of silence allowed: the request's own `timeoutInterval`, or the session's
    /// `timeoutIntervalForRequest` when the request kept the 60 s default.
    func requestTimeout(_ request: URLRequest) -> TimeInterval {
        if request.timeoutInterval == 60, let session = sessionRequestTimeout { return session }
        return request.timeoutInterval
    }

    /// corelibs never stores a custom protocol's response in the URL cache, but buffers the whole body
    /// for it when told `.allowed`: there only `.notAllowed` is passed on.
    func storagePolicy(_ policy: URLCache.StoragePolicy) -> URLCache.StoragePolicy {
        #if canImport(Darwin)
            return policy
        #else
            return .notAllowed
        #endif
    }

    /// The pool partition of the connections this load's delegate decides on: its session's (Linux), or
    /// its configuration slot's (Apple platforms, where a URLProtocol cannot see its session).
    func trustPartition() -> UInt64 {
        #if canImport(Darwin)
            return slotPartition
        #else
            guard let session = corelibs.session else { return TrustPartitions.shared.unique() }
            return TrustPartitions.shared.partition(of: session)
        #endif
    }

    /// Whether the session's delegate has had to decide on `host`'s certificate before.
    func certificateNeededDelegate(_ host: String) -> Bool {
        #if canImport(Darwin)
            return false
        #else
            return corelibs.session.map { TrustPartitions.shared.needsDelegate(host, in: $0) } ?? false
        #endif
    }

    func rememberCertificateNeedsDelegate(_ host: String) {
        #if !canImport(Darwin)
            if let session = corelibs.session { TrustPartitions.shared.rememberNeedsDelegate(host, in: session) }
        #endif
    }

    /// The session's credential storage: its configuration's, or where that is not known the shared
    /// one (the default's); nil when the session keeps none.
    private let credentials: URLCredentialStorage?
    private var credentialStorage: URLCredentialStorage? { credentials }

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

    #if !canImport(Darwin)
        /// Puts `challenge` to the task's delegate (else the session's) on the session's delegate queue,
        /// as corelibs does for its own protocol. A connection-level challenge (server trust) answered
        /// with the default goes to the session-level method too, where Apple's URLSession looks first.
        func askDelegate(
            _ challenge: URLAuthenticationChallenge,
            connectionLevel: Bool,
            answer: @escaping @Sendable (ChallengeAnswer) -> Void
        ) {
            guard let task, let session = corelibs.session else { return answer((.performDefaultHandling, nil)) }
            let call = ChallengeCall(
                session: session,
                task: task,
                taskDelegate: task.delegate ?? (session.delegate as? any URLSessionTaskDelegate),
                sessionDelegate: connectionLevel ? session.delegate : nil,
                challenge: challenge
            )
            guard call.taskDelegate != nil || call.sessionDelegate != nil else {
                return answer((.performDefaultHandling, nil))
            }
            let sessionLevel: @Sendable () -> Void = {
                guard let delegate = call.sessionDelegate else { return answer((.performDefaultHandling, nil)) }
                call.session.delegateQueue.addOperation {
                    delegate.urlSession(call.session, didReceive: call.challenge) { answer(($0, $1)) }
                }
            }
            session.delegateQueue.addOperation {
                guard let delegate = call.taskDelegate else { return sessionLevel() }
                delegate.urlSession(call.session, task: call.task, didReceive: call.challenge) {
                    disposition,
                    credential in
                    if disposition == .performDefaultHandling, call.sessionDelegate != nil {
                        sessionLevel()
                    } else {
                        answer((disposition, credential))
                    }
                }
            }
        }

        /// Asks the task's or session's delegate about a redirect on the session's delegate queue, like
        /// URLSession does; without a delegate the redirect is followed. nil: refused.
        func redirectDecision(response: HTTPURLResponse, newRequest: URLRequest) async -> URLRequest? {
            guard let task, let session = corelibs.session,
                let delegate = task.delegate ?? (session.delegate as? any URLSessionTaskDelegate)
            else { return newRequest }
            let call = DelegateCall(session: session, task: task, delegate: delegate)
            return await withCheckedContinuation { continuation in
                let once = Once(continuation)
                session.delegateQueue.addOperation {
                    call.delegate.urlSession(
                        call.session,
                        task: call.task,
                        willPerformHTTPRedirection: response,
                        newRequest: newRequest
                    ) { once.resume($0) }
                }
            }
        }
    #else
        /// Apple's loading system asks the delegate about redirects itself (`RedirectHandling.reportToSystem`):
        /// a load never asks here; were it to, the redirect would be followed, as without a delegate.
        func redirectDecision(response: HTTPURLResponse, newRequest: URLRequest) async -> URLRequest? {
            newRequest
        }
    #endif
}

#if canImport(Darwin)
    /// The run loop of the thread that called `startLoading`, in the mode it was running: Apple's URL
    /// loading system wants its client called there (URLProtocol's documentation, and Apple's
    /// CustomHTTPProtocol sample). COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.
    /// `@unchecked Sendable`: only CFRunLoopPerformBlock and CFRunLoopWakeUp touch the run loop, and
    /// both may be called from any thread; blocks run in the order they were added.
    private struct ClientRunLoop: @unchecked Sendable {
        private let runLoop: CFRunLoop
        private let modes: NSArray

        /// The calling thread's run loop: make it in `startLoading`.
        init() {
            runLoop = CFRunLoopGetCurrent()
            let current = RunLoop.current.currentMode ?? .default
            let names = current == .default ? [current.rawValue] : [current.rawValue, RunLoop.Mode.default.rawValue]
            modes = names as NSArray
        }

        func perform(_ body: @escaping @Sendable () -> Void) {
            CFRunLoopPerformBlock(runLoop, modes, body)
            CFRunLoopWakeUp(runLoop)
        }
    }
#else
    // The calls below are handed once to the session's delegate queue: `@unchecked Sendable` because
    // corelibs' URLSession, its tasks and delegates are not marked Sendable; each value is made here and
    // only read on that queue.
    private struct ChallengeCall: @unchecked Sendable {
        let session: URLSession
        let task: URLSessionTask
        let taskDelegate: (any URLSessionTaskDelegate)?
        let sessionDelegate: (any URLSessionDelegate)?
        let challenge: URLAuthenticationChallenge
    }

    private struct CacheCall: @unchecked Sendable {
        let session: URLSession
        let task: URLSessionDataTask
        let cache: URLCache
        let entry: CachedURLResponse
    }

    private struct ProgressCall: @unchecked Sendable {
        let session: URLSession
        let task: URLSessionTask
        let delegate: (any URLSessionTaskDelegate)?
    }

    private struct DownloadCall: @unchecked Sendable {
        let session: URLSession
        let task: URLSessionDownloadTask
        let delegate: any URLSessionDownloadDelegate
    }

    private struct DelegateCall: @unchecked Sendable {
        let session: URLSession
        let task: URLSessionTask
        let delegate: any URLSessionTaskDelegate
    }

#endif
