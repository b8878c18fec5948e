// Every route tried, failed routes remembered (OkHttp's RouteSelector and RouteDatabase; Chromium's
// stale-DNS handling): the rules of one connect to a name whose addresses came from HTTPDNS, as a value
// that takes events and returns actions. `ConnectionFactory+Failover.swift` carries them out.
//
// An origin moves; the app still holds its old address (cached, served stale, persisted from the last
// launch). Without these rules a connect to it fails (refused) or waits out the connect timeout (silent)
// where the system resolver would have found the new one. So:
// - The given addresses are tried (one attempt: the transport's happy eyeballs over all of them).
// - Remembered addresses (from the cache, fresh or stale) that have not connected within the attempt
//   delay (250 ms, RFC 8305's) start a lookup past the cache, once: it joins the refresh a stale answer
//   started, or starts a query. Addresses it brings that were not tried join the race at once, as an
//   attempt of their own; the first attempt to connect wins and the others are closed.
// - An attempt that fails: its addresses are forgotten (the cache loses them, so no later request is
//   served them), and, for remembered addresses, the lookup past the cache starts now if it has not.
// - When every attempt has failed and no lookup is on its way: the fallback the policy allows
//   (LocalDNS; the source says none for strict names), once, for addresses not tried yet. Then the
//   connect fails, with every attempt's error.
// - No address is tried twice in one connect.
// - An attempt that found no network (unreachable, down) blames no address: nothing is forgotten or
//   asked again, and the connect fails once nothing else runs (the app is offline, not the origin gone).
// - Only a failure to connect (refused, unreachable, timed out) makes an address dead. One that answered
//   and was then rejected (the certificate, TLS) is not forgotten, asks nobody again and brings no
//   fallback: its verdict ends the connect once nothing else runs.
// - Under TCP Fast Open a connect "succeeds" at once, before any SYN is answered, so the transport's race
//   would end on the first address. There, each address is an attempt of its own, the next one started
//   by the attempt delay (or at once when one fails): happy eyeballs one level up.

import HTTPDNSCore

struct ConnectFailover {
    typealias AttemptID = Int

    /// What the connect is told.
    enum Event: Equatable {
        /// The attempt delay, started by `.scheduleAttemptDelay`, ran out.
        case attemptDelayPassed
        case attemptSucceeded(AttemptID)
        case attemptFailed(AttemptID)
        /// The attempt failed because the device has no network (unreachable, down): the addresses are
        /// not to blame, and asking anyone again would not help.
        case attemptFoundNoNetwork(AttemptID)
        /// The address answered, but its connection was refused after the connect (a certificate or
        /// TLS verdict, a handshake that timed out): the address is not dead.
        case attemptRejected(AttemptID)
        /// The lookup past the cache answered (empty: nothing, or it failed).
        case freshAnswer([IPAddress])
        /// The fallback answered (empty: nothing, none allowed, or it failed).
        case fallbackAnswer([IPAddress])
    }

    enum Action: Equatable {
        /// Connect to these addresses (one race among them); report `attemptSucceeded` or `attemptFailed`.
        case attempt(AttemptID, [IPAddress])
        /// Report `attemptDelayPassed` after the attempt delay.
        case scheduleAttemptDelay
        /// Tell the source these addresses failed.
        case forget([IPAddress])
        /// Ask the source past its cache; report `freshAnswer`.
        case askFresh
        /// Ask the source's fallback; report `fallbackAnswer`.
        case askFallback
        /// The connect is done: this attempt's connection serves it.
        case succeed(AttemptID)
        /// The connect failed: every attempt did, and nothing is left to ask.
        case fail
        /// A connection that came up after another had won: close it.
        case discard(AttemptID)
    }

    struct Options: Equatable {
        /// The addresses came from the cache (fresh or stale, a persisted answer too): a lookup past it may
        /// find others.
        var remembered: Bool
        /// The source may ask a fallback when its own addresses fail.
        var mayFallBack: Bool
        /// TCP Fast Open: one address per attempt (see the file comment).
        var fastOpen: Bool
    }

    private enum Ask: Equatable {
        case notAsked, asking, answered
    }

    let options: Options
    /// Addresses not yet handed to an attempt, in the order to try them.
    private var waiting: [IPAddress]
    private var tried: Set<IPAddress>
    /// Running attempts and their addresses.
    private var running: [AttemptID: [IPAddress]] = [:]
    private var fresh = Ask.notAsked
    private var fallback = Ask.notAsked
    private var nextAttempt: AttemptID = 0
    private var delayArmed = false
    /// An attempt was rejected after its connect: no fallback for this connect.
    private var fallbackBarred = false
    private(set) var isFinished = false

    init(addresses: [IPAddress], options: Options) {
        self.options = options
        var seen = Set<IPAddress>()
        self.waiting = addresses.filter { seen.insert($0).inserted }
        self.tried = seen
    }

    /// The first actions: the first attempt, and the attempt delay when something may follow it.
    mutating func start() -> [Action] {
        var actions: [Action] = []
        handOut(into: &actions)
        if actions.isEmpty { return settle() }
        armDelay(into: &actions)
        return actions
    }

    mutating func event(_ event: Event) -> [Action] {
        switch event {
        case .attemptSucceeded(let id):
            running[id] = nil
            guard !isFinished else { return [.discard(id)] }
            isFinished = true
            return [.succeed(id)]
        case .attemptFailed(let id):
            let failed = running.removeValue(forKey: id) ?? []
            guard !isFinished else { return [] }
            var actions: [Action] = failed.isEmpty ? [] : [.forget(failed)]
            // Under fast open, the next address at once, as happy eyeballs does on a failure.
            if options.fastOpen, !waiting.isEmpty {
                handOut(into: &actions)
                return actions
            }
            askFreshIfRemembered(into: &actions)
            return actions + settle()
        case .attemptFoundNoNetwork(let id):
            running[id] = nil
            guard !isFinished, running.isEmpty else { return [] }
            isFinished = true
            return [.fail]
        case .attemptRejected(let id):
            running[id] = nil
            guard !isFinished else { return [] }
            // The address answered: nothing is forgotten, nobody is asked again, and the verdict ends the
            // connect once nothing else runs (a certificate verdict is no reason to ask LocalDNS).
            fallbackBarred = true
            return settle()
        case .attemptDelayPassed:
            delayArmed = false
            guard !isFinished else { return [] }
            var actions: [Action] = []
            if options.fastOpen { handOut(into: &actions) }
            askFreshIfRemembered(into: &actions)
            armDelay(into: &actions)
            return actions
        case .freshAnswer(let addresses):
            fresh = .answered
            return joined(addresses)
        case .fallbackAnswer(let addresses):
            fallback = .answered
            return joined(addresses)
        }
    }

    // MARK: Rules

    /// Addresses an answer brought: those not tried yet join the race.
    private mutating func joined(_ addresses: [IPAddress]) -> [Action] {
        guard !isFinished else { return [] }
        for address in addresses where tried.insert(address).inserted { waiting.append(address) }
        var actions: [Action] = []
        handOut(into: &actions)
        armDelay(into: &actions)
        return actions + settle()
    }

    /// Starts an attempt with what is waiting: everything, or one address under fast open.
    private mutating func handOut(into actions: inout [Action]) {
        guard !waiting.isEmpty else { return }
        let batch = options.fastOpen ? [waiting.removeFirst()] : waiting
        if !options.fastOpen { waiting = [] }
        nextAttempt += 1
        running[nextAttempt] = batch
        actions.append(.attempt(nextAttempt, batch))
    }

    /// The attempt delay runs while it may start something: the next address under fast open, or the
    /// lookup past the cache.
    private mutating func armDelay(into actions: inout [Action]) {
        let mayStart = (options.fastOpen && !waiting.isEmpty) || mayAskFresh
        guard !delayArmed, !running.isEmpty, mayStart else { return }
        delayArmed = true
        actions.append(.scheduleAttemptDelay)
    }

    /// Remembered addresses, and neither the lookup past the cache nor the fallback asked yet.
    private var mayAskFresh: Bool { options.remembered && fresh == .notAsked && fallback == .notAsked }

    private mutating func askFreshIfRemembered(into actions: inout [Action]) {
        guard mayAskFresh else { return }
        fresh = .asking
        actions.append(.askFresh)
    }

    /// With nothing running or on its way: the fallback once, then the end.
    private mutating func settle() -> [Action] {
        guard !isFinished, running.isEmpty, waiting.isEmpty, fresh != .asking, fallback != .asking else {
            return []
        }
        if options.mayFallBack, !fallbackBarred, fallback == .notAsked {
            fallback = .asking
            return [.askFallback]
        }
        isFinished = true
        return [.fail]
    }
}
