// The Apple platforms' part of a load (LoadContext.swift): the session found through the configuration
// slot's class, client calls on the run loop of the thread that called `startLoading`, challenges
// through the client. The loading system keeps progress, the URL cache and downloads and follows
// redirects itself (`SystemDelivery`). COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.

#if canImport(Darwin)
    import Foundation
    import HTTPDNSEngine

    typealias LoadHost = AppleLoadHost

    struct AppleLoadHost: LoadHosting {
        let configuration: URLSessionConfiguration?
        let credentials: URLCredentialStorage?
        let clientSchedule: ClientSchedule?
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

        func trustPartition() -> UInt64 { slotPartition }

        /// The loading system keeps progress, the URL cache and downloads, and follows redirects itself.
        var delivery: SystemDelivery { SystemDelivery() }

        /// Once the loading system's thread has taken the client calls queued before: it hands data on to
        /// the delegate queue itself, out of a URLProtocol's sight, so this bounds what waits in our calls,
        /// not in its queue.
        func delegateQueueCaughtUp() async {
            guard let schedule = clientSchedule else { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                schedule { continuation.resume() }
            }
        }

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
