// The Apple platforms' part of a load (LoadContext.swift): the session found through the configuration
// slot's class, client calls on the run loop of the thread that called `startLoading`, challenges
// through the client, redirects reported to the loading system, which keeps progress, the URL cache
// and downloads itself. COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.

#if canImport(Darwin)
    import Foundation
    import HTTPDNSEngine

    typealias LoadHost = AppleLoadHost

    struct AppleLoadHost: LoadHosting {
        let configuration: URLSessionConfiguration?
        let credentials: URLCredentialStorage?
        let clientSchedule: ClientSchedule?
        var deliversEveryChunk: Bool { true }
        /// As far as a URLProtocol can tell, always.
        var mayHaveDelegate: Bool { true }
        /// The pool partition for connections its delegate decides on: its configuration slot's (one per
        /// session made after enabling), or the one of the loads without a slot.
        private let slotPartition: UInt64

        init(task: URLSessionTask?, interception: Interception, protocolClass: AnyClass) {
            let slots = interception.slots
            let slot = ProtocolBindings.binding(of: protocolClass)?.slot
            configuration = slot.flatMap(slots.settings(of:))
            slotPartition = slot.flatMap(slots.partition(of:)) ?? interception.partitions.withoutSlot
            clientSchedule = ClientRunLoop().perform
            credentials = configuration.map { $0.urlCredentialStorage } ?? URLCredentialStorage.shared
        }

        /// The loading system puts every body in the request.
        func taskBody() -> BodySource? { nil }

        func headersSetByTheApp(_ fields: [String: String], of request: URLRequest) -> [String: String] { fields }

        /// The session cache's size, where the protocol keeps responses in it itself (corelibs keeps only
        /// its own protocol's; Apple's loading system keeps a URLProtocol's too): nil where it does not.
        var cacheCapacity: Int? {
            return nil
        }

        /// Keeps a finished response in the session's cache for the task, after its delegate's
        /// `willCacheResponse` (which may change it or say no), as corelibs does for its own protocol.
        /// Called on the client queue, after the load has finished.
        func storeInCache(_ response: HTTPURLResponse, data: Data) {}

        /// A download task on swift-corelibs-foundation, whose body goes to a file (`deliverDownload`).
        var isCorelibsDownload: Bool {
            return false
        }

        /// The response's length, as corelibs' own protocol records it on the task (Apple's loading system
        /// records it itself).
        func responseArrived(expectedLength: Int64) {}

        /// Who follows the load's redirects: Apple's loading system (the protocol reports them), or the
        /// protocol itself on corelibs, which crashes on the report, at most `maxRedirects` hops.
        func redirectHandling(maxRedirects: Int) -> URLLoad.RedirectHandling {
            return .reportToSystem
        }

        /// A redirect followed inside the protocol (corelibs): the task's `currentRequest` becomes it.
        func followedRedirect(to request: URLRequest) {}

        /// Where a finished download's file is, for corelibs to hand over; false when it cannot be told.
        func setDownloadedFile(_ file: URL, of urlProtocol: URLProtocol) -> Bool {
            return false
        }

        /// Runs `work` after everything queued on the session's delegate queue so far (now, without one).
        func afterDelegateQueue(_ work: @escaping @Sendable () -> Void) {
            work()
        }

        /// Upload progress as corelibs' own protocol reports it: the task's `countOfBytesSent` and
        /// `countOfBytesExpectedToSend`, and the delegate's `didSendBodyData`, in order with the load's other
        /// calls. nil where the loading system keeps these itself, or without a task. Each send of the
        /// body (a redirect or an authentication round sends it again) counts from zero.
        func uploadProgress(expected: Int?) -> (@Sendable (Int) -> Void)? {
            return nil
        }

        /// Tells a download task's delegate how far the download is, as corelibs' own protocol does.
        func downloadProgress(written: Int64, total: Int64, expected: Int64) {}

        /// Returns once the client queue and then the session's delegate queue have run everything queued
        /// before (no-op where the queues are not known). On Apple platforms, once the loading system's
        /// thread has taken the client calls queued before: it hands data on to the delegate queue itself,
        /// out of a URLProtocol's sight, so this bounds what waits in our calls, not in its queue.
        func delegateQueueCaughtUp() async {
            guard let schedule = clientSchedule else { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                schedule { continuation.resume() }
            }
        }

        /// corelibs never stores a custom protocol's response in the URL cache, but buffers the whole body
        /// for it when told `.allowed`: there only `.notAllowed` is passed on.
        func storagePolicy(_ policy: URLCache.StoragePolicy) -> URLCache.StoragePolicy {
            return policy
        }

        /// The pool partition of the connections this load's delegate decides on: its session's (Linux), or
        /// its configuration slot's (Apple platforms, where a URLProtocol cannot see its session).
        func trustPartition() -> UInt64 {
            return slotPartition
        }

        /// Whether the session's delegate has had to decide on `host`'s certificate before.
        func certificateNeededDelegate(_ host: String) -> Bool {
            return false
        }

        func rememberCertificateNeedsDelegate(_ host: String) {}

        /// The challenge goes to the client, which routes it to the delegate as the system does.
        func askDelegate(
            _ challenge: URLAuthenticationChallenge,
            connectionLevel: Bool,
            gate: ClientGate,
            answer: @escaping @Sendable (ChallengeAnswer) -> Void
        ) {
            // The challenge only travels to the client's thread, where the system takes it.
            let carried = UncheckedChallenge(challenge: challenge)
            let sent = gate.send { client, me in client.urlProtocol(me, didReceive: carried.challenge) }
            if !sent { answer((.cancelAuthenticationChallenge, nil)) }
        }

        /// Apple's loading system asks the delegate about redirects itself (`RedirectHandling.reportToSystem`):
        /// a load never asks here; were it to, the redirect would be followed, as without a delegate.
        func redirectDecision(response: HTTPURLResponse, newRequest: URLRequest) async -> URLRequest? {
            newRequest
        }
    }

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
#endif
