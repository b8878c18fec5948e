// Happy eyeballs over addresses we already have (RFC 8305 section 5), for the transport that has no
// connector of its own for them: Network.framework races the addresses of a *name* itself, but the
// engine connects to the addresses its resolver chose, in its ranked order, so it races them itself.
// (On Linux, NIO's connector does this job for BSD sockets; it is NIOPosix's and cannot drive
// Network.framework channels.)
//
// Network.framework does TCP and TLS as one step, so an attempt there is a whole handshake. Racing those
// on the 250 ms delay would start a second TLS handshake on every new connection over a link slower than
// about 125 ms a round trip, where the first is merely on its way. RFC 8305 and NIO's connector race TCP
// only. So with `probesFirst`, TCP races TCP: a whole attempt that starts blind (the first address, or
// the next after a failure with nothing else on its way) has a probe beside it, a TCP connect alone to
// the same address, closed as soon as it connects, which tells when that attempt's TCP is through (the
// framework does not say); a later address is first raced with a probe alone, and its whole attempt
// starts only once that probe connected before any running attempt's TCP did. Once one attempt's TCP is
// through, no other address starts while it shakes hands; if its handshake then fails, an address whose
// probe connected meanwhile goes next. The cost: one TCP connect beside each blind attempt.
//
// Two parts: `HappyEyeballsSchedule`, the pure rule (which attempt starts when, who wins, when it has
// all failed), and `HappyEyeballsRace`, the thin executor that runs it on an event loop with a timer
// and an attempt function. Both are platform-neutral and proven on Linux with an EmbeddedEventLoop
// (HappyEyeballsTests); only the attempt function differs per transport.

import NIOCore

/// The rule of one race over `count` addresses, already in the order to try them (IPv6 and IPv4
/// interleaved, ranked): the first attempt starts at once, each next one when the one before fails or
/// when the attempt delay passes without a winner, whichever comes first. The first attempt to succeed
/// wins and every other still running is cancelled; the race fails when every attempt has failed, at
/// once when one fails in a way no other address would change (a final failure: the server's
/// certificate was refused, so every address would be), or when its deadline passes.
struct HappyEyeballsSchedule: Sendable {
    enum Action: Equatable, Sendable {
        /// Start attempt `index`.
        case start(Int)
        /// Connect to address `index` with TCP alone (`probesFirst`); report `probeConnected` or
        /// `probeFailed`, and close the probe's connection either way.
        case probe(Int)
        /// Arm the attempt-delay timer; a `timerFired` with another `generation` is stale and ignored.
        case armTimer(generation: Int)
        /// Attempt `index` won: cancel the timer and the attempts in `cancel`.
        case won(Int, cancel: [Int])
        /// An attempt that succeeded after the race was decided: close it.
        case discard(Int)
        /// The race is lost: every attempt failed, one failed finally, or the deadline passed. Cancel the
        /// timer and the attempts in `cancel`.
        case failed(cancel: [Int])
    }

    let count: Int
    /// Later addresses are probed with TCP before their whole attempt starts (see the file comment).
    let probesFirst: Bool
    private var next = 0
    private var running: [Int] = []
    /// Probes of addresses whose attempt has not started.
    private var probing: [Int] = []
    /// Probes beside running attempts (`probesFirst`): they tell when that attempt's TCP is through.
    private var companions: [Int] = []
    /// Running attempts whose TCP is through: while there is one, no other address starts.
    private var tcpThrough: Set<Int> = []
    /// Addresses whose probe connected after a running attempt's TCP was through: next in line when
    /// that attempt fails.
    private var spares: [Int] = []
    private var generation = 0
    private var decided = false

    init(count: Int, probesFirst: Bool = false) {
        self.count = count
        self.probesFirst = probesFirst
    }

    /// The race starts: nothing to try fails it at once.
    mutating func begin() -> [Action] {
        guard count > 0 else {
            decided = true
            return [.failed(cancel: [])]
        }
        return startNext()
    }

    /// The attempt delay passed for the timer armed as `generation`.
    mutating func timerFired(generation: Int) -> [Action] {
        guard !decided, generation == self.generation, next < count else { return [] }
        // An attempt's TCP is through: its handshake is merely on its way, nothing else starts.
        guard tcpThrough.isEmpty else { return [] }
        return probesFirst ? probeNext() : startNext()
    }

    /// Attempt `index` failed; `finally`: in a way no other address would change.
    mutating func attemptFailed(_ index: Int, finally: Bool = false) -> [Action] {
        running.removeAll { $0 == index }
        tcpThrough.remove(index)
        guard !decided else { return [] }
        if finally { return lose() }
        // An address whose TCP connected while this one shook hands: its attempt, at once.
        if !spares.isEmpty {
            let spare = spares.removeFirst()
            running.append(spare)
            tcpThrough.insert(spare)
            return [.start(spare)]
        }
        if next < count {
            // At once: no need to wait out the delay. While another handshake or a probe is still on
            // its way, the next address races with TCP only.
            return probesFirst && !(running.isEmpty && probing.isEmpty) ? probeNext() : startNext()
        }
        guard running.isEmpty, probing.isEmpty else { return [] }
        return lose()
    }

    /// The probe of address `index` connected. Beside a running attempt: that attempt's TCP is through.
    /// Alone: its TCP race is won, and its whole attempt starts, unless a running attempt's TCP was
    /// through first (then it waits as a spare).
    mutating func probeConnected(_ index: Int) -> [Action] {
        if let companion = companions.firstIndex(of: index) {
            companions.remove(at: companion)
            if !decided, running.contains(index) { tcpThrough.insert(index) }
            return []
        }
        probing.removeAll { $0 == index }
        guard !decided else { return [] }
        guard tcpThrough.isEmpty else {
            spares.append(index)
            return []
        }
        running.append(index)
        tcpThrough.insert(index)
        return [.start(index)]
    }

    /// The probe of address `index` failed: the next address at once, as a failed attempt. A probe
    /// beside a running attempt changes nothing: the attempt's own failure follows.
    mutating func probeFailed(_ index: Int) -> [Action] {
        if let companion = companions.firstIndex(of: index) {
            companions.remove(at: companion)
            return []
        }
        probing.removeAll { $0 == index }
        guard !decided else { return [] }
        if next < count { return running.isEmpty && probing.isEmpty ? startNext() : probeNext() }
        guard running.isEmpty, probing.isEmpty else { return [] }
        return lose()
    }

    /// The race's deadline passed.
    mutating func deadlinePassed() -> [Action] {
        guard !decided else { return [] }
        return lose()
    }

    private mutating func lose() -> [Action] {
        decided = true
        let cancelled = Set(running + probing + companions)
        clear()
        return [.failed(cancel: cancelled.sorted())]
    }

    mutating func attemptSucceeded(_ index: Int) -> [Action] {
        running.removeAll { $0 == index }
        guard !decided else { return [.discard(index)] }
        decided = true
        // The winner's own probe closes itself; `cancel` of its index would stop the winner.
        let losers = Set(running + probing + companions).subtracting([index])
        clear()
        return [.won(index, cancel: losers.sorted())]
    }

    private mutating func clear() {
        (running, probing, companions, spares) = ([], [], [], [])
        tcpThrough = []
    }

    private mutating func startNext() -> [Action] { launchNext(probe: false) }

    private mutating func probeNext() -> [Action] { launchNext(probe: true) }

    /// The next address: its whole attempt (with a probe beside it when later addresses may race it), or
    /// its TCP probe; the timer for the one after, if any.
    private mutating func launchNext(probe: Bool) -> [Action] {
        let index = next
        next += 1
        generation += 1
        var launch: [Action]
        if probe {
            probing.append(index)
            launch = [.probe(index)]
        } else {
            running.append(index)
            launch = [.start(index)]
            if probesFirst, next < count {
                companions.append(index)
                launch.append(.probe(index))
            }
        }
        return next < count ? launch + [.armTimer(generation: generation)] : launch
    }
}

/// Every attempt of a race failed: the errors in the order the attempts started.
struct HappyEyeballsFailure: Error {
    var errors: [(index: Int, error: any Error)]
    /// The race's deadline passed first (the attempts still running were cancelled).
    var timedOut = false
}

/// Runs a `HappyEyeballsSchedule` on `loop`: `attempt(index)` opens one attempt (its future fails or
/// succeeds; `cancel` of an index stops one still running), `discard` closes an attempt's result that
/// came after the race was decided. The result is the winner's, or `HappyEyeballsFailure`.
enum HappyEyeballsRace {
    /// `probe`: given, later addresses are raced with TCP alone first (`HappyEyeballsSchedule.probesFirst`):
    /// it connects to address `index` and closes the connection, its future telling how it went; `cancel`
    /// stops a probe still running too.
    static func run<Result: Sendable>(
        count: Int,
        attemptDelay: TimeAmount = .milliseconds(250),
        deadline: NIODeadline,
        on loop: any EventLoop,
        isFinal: @escaping @Sendable (any Error) -> Bool = { _ in false },
        probe: (@Sendable (Int) -> EventLoopFuture<Void>)? = nil,
        attempt: @escaping @Sendable (Int) -> EventLoopFuture<Result>,
        cancel: @escaping @Sendable (Int) -> Void,
        discard: @escaping @Sendable (Result) -> Void
    ) -> EventLoopFuture<Result> {
        let promise = loop.makePromise(of: Result.self)
        loop.execute {
            let race = Runner(
                loop: loop,
                delay: attemptDelay,
                promise: promise,
                count: count,
                isFinal: isFinal,
                probe: probe,
                attempt: attempt,
                cancel: cancel,
                discard: discard
            )
            let bound = NIOLoopBound(race, eventLoop: loop)
            race.deadlineTimer = loop.scheduleTask(deadline: deadline) {
                bound.value.timedOut = true
                bound.value.apply(bound.value.schedule.deadlinePassed())
            }
            race.apply(race.schedule.begin())
        }
        return promise.futureResult
    }

    /// The race's state, touched on its loop only.
    private final class Runner<Result: Sendable> {
        let loop: any EventLoop
        let delay: TimeAmount
        let promise: EventLoopPromise<Result>
        var schedule: HappyEyeballsSchedule
        var timer: Scheduled<Void>?
        var deadlineTimer: Scheduled<Void>?
        var timedOut = false
        var errors: [(index: Int, error: any Error)] = []
        /// Probes' errors: an address's own in the failure only where its attempt never ran.
        var probeErrors: [(index: Int, error: any Error)] = []
        let isFinal: @Sendable (any Error) -> Bool
        let probe: (@Sendable (Int) -> EventLoopFuture<Void>)?
        let attempt: @Sendable (Int) -> EventLoopFuture<Result>
        let cancel: @Sendable (Int) -> Void
        let discard: @Sendable (Result) -> Void

        init(
            loop: any EventLoop,
            delay: TimeAmount,
            promise: EventLoopPromise<Result>,
            count: Int,
            isFinal: @escaping @Sendable (any Error) -> Bool,
            probe: (@Sendable (Int) -> EventLoopFuture<Void>)?,
            attempt: @escaping @Sendable (Int) -> EventLoopFuture<Result>,
            cancel: @escaping @Sendable (Int) -> Void,
            discard: @escaping @Sendable (Result) -> Void
        ) {
            self.loop = loop
            self.delay = delay
            self.promise = promise
            self.schedule = HappyEyeballsSchedule(count: count, probesFirst: probe != nil)
            self.isFinal = isFinal
            self.probe = probe
            self.attempt = attempt
            self.cancel = cancel
            self.discard = discard
        }

        func apply(_ actions: [HappyEyeballsSchedule.Action]) {
            loop.assertInEventLoop()
            let bound = NIOLoopBound(self, eventLoop: loop)
            for action in actions {
                switch action {
                case .start(let index):
                    attempt(index).hop(to: loop).whenComplete { result in
                        let runner = bound.value
                        switch result {
                        case .success(let value):
                            for next in runner.schedule.attemptSucceeded(index) {
                                switch next {
                                case .won:
                                    runner.promise.succeed(value)
                                    runner.apply([next])
                                case .discard:
                                    runner.discard(value)
                                default:
                                    runner.apply([next])
                                }
                            }
                        case .failure(let error):
                            runner.errors.append((index, error))
                            runner.apply(runner.schedule.attemptFailed(index, finally: runner.isFinal(error)))
                        }
                    }
                case .probe(let index):
                    guard let probe else { continue }
                    probe(index).hop(to: loop).whenComplete { result in
                        let runner = bound.value
                        switch result {
                        case .success:
                            runner.apply(runner.schedule.probeConnected(index))
                        case .failure(let error):
                            runner.probeErrors.append((index, error))
                            runner.apply(runner.schedule.probeFailed(index))
                        }
                    }
                case .armTimer(let generation):
                    timer?.cancel()
                    timer = loop.scheduleTask(in: delay) {
                        bound.value.apply(bound.value.schedule.timerFired(generation: generation))
                    }
                case .won(_, let losers):
                    timer?.cancel()
                    deadlineTimer?.cancel()
                    losers.forEach(cancel)
                case .discard:
                    break  // handled where the result is at hand
                case .failed(let cancelled):
                    timer?.cancel()
                    deadlineTimer?.cancel()
                    cancelled.forEach(cancel)
                    let attempted = Set(errors.map(\.index))
                    let all = errors + probeErrors.filter { !attempted.contains($0.index) }
                    promise.fail(HappyEyeballsFailure(errors: all.sorted { $0.index < $1.index }, timedOut: timedOut))
                }
            }
        }
    }
}
