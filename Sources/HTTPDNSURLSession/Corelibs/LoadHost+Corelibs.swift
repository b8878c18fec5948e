// swift-corelibs-foundation's part of a load (LoadContext.swift): the session seen through the task
// (CorelibsTask), client calls on the task's work queue, challenges and redirects put to the delegate on
// the session's delegate queue, and what corelibs' own protocol does that a custom one must do itself:
// progress, the URL cache, downloads to a file, `currentRequest` after a redirect.

#if !canImport(Darwin)
    import Foundation
    import FoundationNetworking
    import HTTPDNSEngine
    import NIOConcurrencyHelpers

    typealias LoadHost = CorelibsLoadHost

    struct CorelibsLoadHost: LoadHosting {
        let configuration: URLSessionConfiguration?
        let credentials: URLCredentialStorage?
        let clientSchedule: ClientSchedule?
        let mayHaveDelegate: Bool
        let delivery: CorelibsDelivery
        /// The task's work queue, where client calls are made.
        private let clientQueue: DispatchQueue?
        private let task: URLSessionTask?
        private let corelibs: CorelibsTask
        private let partitions: TrustPartitions

        init(task: URLSessionTask?, interception: Interception, protocolClass: AnyClass) {
            self.task = task
            partitions = interception.partitions
            corelibs = CorelibsTask(task)
            configuration = corelibs.session?.configuration
            credentials = configuration?.urlCredentialStorage
            mayHaveDelegate = task?.delegate != nil || corelibs.session?.delegate != nil
            clientQueue = corelibs.workQueue
            if let queue = corelibs.workQueue {
                clientSchedule = { work in queue.async(execute: work) }
            } else {
                clientSchedule = nil
            }
            delivery = CorelibsDelivery(
                task: task,
                corelibs: corelibs,
                partitions: partitions,
                clientSchedule: clientSchedule
            )
        }

        func delegateQueueCaughtUp() async {
            guard let delegateQueue = corelibs.session?.delegateQueue else { return }
            let clientQueue = self.clientQueue ?? DispatchQueue.global()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                clientQueue.async { delegateQueue.addOperation { continuation.resume() } }
            }
        }

        func trustPartition() -> UInt64 {
            guard let session = corelibs.session else { return partitions.unique() }
            return partitions.partition(of: session)
        }

        /// Puts `challenge` to the delegate on the session's delegate queue, as Apple's URLSession routes
        /// it: a connection-level challenge (server trust) to the session-level method first, then, when
        /// that answers with the default (as corelibs' default implementation does for a delegate that
        /// does not implement it), to the task-level one; any other challenge to the task's delegate,
        /// else the session's.
        func askDelegate(
            _ challenge: URLAuthenticationChallenge,
            connectionLevel: Bool,
            gate: ClientGate,
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
            let taskLevel: @Sendable () -> Void = {
                guard let delegate = call.taskDelegate else { return answer((.performDefaultHandling, nil)) }
                delegate.urlSession(call.session, task: call.task, didReceive: call.challenge) { answer(($0, $1)) }
            }
            session.delegateQueue.addOperation {
                guard let delegate = call.sessionDelegate else { return taskLevel() }
                delegate.urlSession(call.session, didReceive: call.challenge) { disposition, credential in
                    guard disposition == .performDefaultHandling, call.taskDelegate != nil else {
                        return answer((disposition, credential))
                    }
                    call.session.delegateQueue.addOperation { taskLevel() }
                }
            }
        }
    }

    /// What corelibs' own protocol does for its task that a custom one must do itself (`LoadDelivery`).
    struct CorelibsDelivery: LoadDelivery {
        let deliversEveryChunk: Bool
        private let task: URLSessionTask?
        private let corelibs: CorelibsTask
        private let partitions: TrustPartitions
        private let clientSchedule: ClientSchedule?

        init(
            task: URLSessionTask?,
            corelibs: CorelibsTask,
            partitions: TrustPartitions,
            clientSchedule: ClientSchedule?
        ) {
            self.task = task
            self.corelibs = corelibs
            self.partitions = partitions
            self.clientSchedule = clientSchedule
            deliversEveryChunk = corelibs.deliversEveryChunk
        }

        /// corelibs keeps an upload task's data or file in the task, not in the request.
        func taskBody() -> BodySource? {
            switch corelibs.knownBody {
            case .data(let data): return .data(data)
            case .file(let url): return .file(url)
            case .stream(let stream): return .stream(InputStreamReader(stream))
            case nil: return nil
            }
        }

        /// corelibs adds a Cookie header from the session's storage to every task, by its own matching:
        /// taken out here.
        func headersSetByTheApp(_ request: URLRequest) -> [String: String] {
            var fields = request.allHTTPHeaderFields ?? [:]
            if let key = fields.keys.first(where: { $0.lowercased() == "cookie" }), let url = request.url,
                let configuration = corelibs.session?.configuration, configuration.httpShouldSetCookies,
                let storage = configuration.httpCookieStorage, let stored = storage.cookies(for: url),
                HTTPCookie.requestHeaderFields(with: stored)["Cookie"] == fields[key]
            {
                fields[key] = nil
            }
            return fields
        }

        var cacheCapacity: Int? {
            guard task is URLSessionDataTask, let cache = corelibs.session?.configuration.urlCache else { return nil }
            return max(cache.memoryCapacity, cache.diskCapacity)
        }

        func storeInCache(_ response: HTTPURLResponse, data: Data) {
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
        }

        var isCorelibsDownload: Bool {
            return task is URLSessionDownloadTask
        }

        /// The response's length, as corelibs' own protocol records it on the task (Apple's loading system
        /// records it itself).
        func responseArrived(expectedLength: Int64) {
            if let task { CorelibsFields.setExpectedToReceive(expectedLength, of: task) }
        }

        /// corelibs crashes on a redirect a custom protocol reports: the protocol follows it itself.
        func redirectHandling(maxRedirects: Int) -> URLLoad.RedirectHandling {
            return .followHere(max: maxRedirects)
        }

        func followedRedirect(to request: URLRequest) {
            if let task { CorelibsFields.setCurrentRequest(request, of: task) }
        }

        func setDownloadedFile(_ file: URL, of urlProtocol: URLProtocol) -> Bool {
            return CorelibsFields.setTemporaryFileURL(file, of: urlProtocol)
        }

        func afterDelegateQueue(_ work: @escaping @Sendable () -> Void) {
            if let queue = corelibs.session?.delegateQueue { queue.addOperation(work) } else { work() }
        }

        func uploadProgress(expected: Int?) -> (@Sendable (Int) -> Void)? {
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
        }

        func downloadProgress(written: Int64, total: Int64, expected: Int64) {
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
        }

        /// corelibs never stores a custom protocol's response in the URL cache, but buffers the whole body
        /// for it when told `.allowed`: there only `.notAllowed` is passed on.
        func storagePolicy(_ policy: URLCache.StoragePolicy) -> URLCache.StoragePolicy {
            return .notAllowed
        }

        /// Whether the session's delegate has had to decide on `host`'s certificate before.
        func certificateNeededDelegate(_ host: String) -> Bool {
            return corelibs.session.map { partitions.needsDelegate(host, in: $0) } ?? false
        }

        func rememberCertificateNeedsDelegate(_ host: String) {
            if let session = corelibs.session { partitions.rememberNeedsDelegate(host, in: session) }
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
    }

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
