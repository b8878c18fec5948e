// The race over our own addresses that the Network.framework transport runs (RFC 8305 section 5):
// the pure schedule, and its executor on an EmbeddedEventLoop with attempts we complete by hand and a
// clock we advance. Nothing here opens a socket or waits.

import NIOCore
import NIOEmbedded
import NIOConcurrencyHelpers
import NIOPosix
import Testing

@testable import HTTPDNSEngine

#if canImport(Network)
    import NIOTransportServices
#endif

@Suite struct HappyEyeballsTests {
    // MARK: the schedule

    @Test func firstAttemptStartsAtOnceAndTheNextAfterTheDelay() {
        var schedule = HappyEyeballsSchedule(count: 3)
        #expect(schedule.begin() == [.start(0), .armTimer(generation: 1)])
        #expect(schedule.timerFired(generation: 1) == [.start(1), .armTimer(generation: 2)])
        // The last attempt arms no timer: there is nothing left to start.
        #expect(schedule.timerFired(generation: 2) == [.start(2)])
        #expect(schedule.timerFired(generation: 3) == [])
    }

    @Test func aFailureStartsTheNextAtOnceAndMakesTheOldTimerStale() {
        var schedule = HappyEyeballsSchedule(count: 3)
        _ = schedule.begin()
        #expect(schedule.attemptFailed(0) == [.start(1), .armTimer(generation: 2)])
        // The timer armed for attempt 0 fires late: it is stale, nothing starts twice.
        #expect(schedule.timerFired(generation: 1) == [])
        #expect(schedule.timerFired(generation: 2) == [.start(2)])
    }

    @Test func theFirstSuccessWinsAndTheOthersAreCancelledOrDiscarded() {
        var schedule = HappyEyeballsSchedule(count: 3)
        _ = schedule.begin()
        _ = schedule.timerFired(generation: 1)
        _ = schedule.timerFired(generation: 2)
        #expect(schedule.attemptSucceeded(1) == [.won(1, cancel: [0, 2])])
        // A loser that connected anyway is closed; a late failure changes nothing.
        #expect(schedule.attemptSucceeded(0) == [.discard(0)])
        #expect(schedule.attemptFailed(2) == [])
        #expect(schedule.timerFired(generation: 3) == [])
    }

    @Test func theRaceIsLostWhenEveryAttemptHasFailed() {
        var schedule = HappyEyeballsSchedule(count: 2)
        _ = schedule.begin()
        _ = schedule.timerFired(generation: 1)
        #expect(schedule.attemptFailed(1) == [])  // attempt 0 still runs
        #expect(schedule.attemptFailed(0) == [.failed(cancel: [])])
    }

    @Test func aFinalFailureEndsTheRaceAtOnce() {
        var schedule = HappyEyeballsSchedule(count: 3)
        _ = schedule.begin()
        _ = schedule.timerFired(generation: 1)
        // A refused certificate: every address would show the same one.
        #expect(schedule.attemptFailed(0, finally: true) == [.failed(cancel: [1])])
        #expect(schedule.timerFired(generation: 2) == [])
        #expect(schedule.attemptSucceeded(1) == [.discard(1)])
    }

    @Test func theDeadlineEndsTheRaceAndNothingToTryLosesAtOnce() {
        var schedule = HappyEyeballsSchedule(count: 2)
        _ = schedule.begin()
        #expect(schedule.deadlinePassed() == [.failed(cancel: [0])])
        #expect(schedule.deadlinePassed() == [])
        var empty = HappyEyeballsSchedule(count: 0)
        #expect(empty.begin() == [.failed(cancel: [])])
    }

    // MARK: whole handshakes (Network.framework): TCP races first

    @Test func aSecondHandshakeStartsOnlyAfterItsTCPRaceIsWon() {
        var schedule = HappyEyeballsSchedule(count: 3, probesFirst: true)
        // The first attempt, and beside it a probe that tells when its TCP is through.
        #expect(schedule.begin() == [.start(0), .probe(0), .armTimer(generation: 1)])
        // 250 ms and attempt 0's TCP is not through: address 1 races with TCP alone.
        #expect(schedule.timerFired(generation: 1) == [.probe(1), .armTimer(generation: 2)])
        #expect(schedule.timerFired(generation: 2) == [.probe(2)])
        // Address 1's TCP connected while attempt 0 is still unfinished: now its handshake starts.
        #expect(schedule.probeConnected(1) == [.start(1)])
        #expect(schedule.attemptSucceeded(1) == [.won(1, cancel: [0, 2])])
        #expect(schedule.probeConnected(2) == [])
    }

    @Test func aHandshakeWhoseTCPIsThroughIsRacedByNoOther() {
        // A 200 ms link with TLS 1.2: attempt 0's TCP is through at 200 ms, its handshake done at 600 ms.
        // The 250 ms timer starts nothing: one TLS handshake in all (a probe of address 1 at 250 ms would
        // have connected at 450 ms and started a second one).
        var schedule = HappyEyeballsSchedule(count: 2, probesFirst: true)
        _ = schedule.begin()
        #expect(schedule.probeConnected(0) == [])
        #expect(schedule.timerFired(generation: 1) == [])
        #expect(schedule.attemptSucceeded(0) == [.won(0, cancel: [])])
        // Its handshake fails instead (not finally): the next address at once, a whole attempt.
        var failing = HappyEyeballsSchedule(count: 2, probesFirst: true)
        _ = failing.begin()
        _ = failing.probeConnected(0)
        #expect(failing.timerFired(generation: 1) == [])
        #expect(failing.attemptFailed(0) == [.start(1)])
        // A probe sent before attempt 0's TCP was through, that connects after it: a spare, started
        // at once if attempt 0's handshake fails.
        var spare = HappyEyeballsSchedule(count: 3, probesFirst: true)
        _ = spare.begin()
        #expect(spare.timerFired(generation: 1) == [.probe(1), .armTimer(generation: 2)])
        #expect(spare.probeConnected(0) == [])
        #expect(spare.probeConnected(1) == [])
        #expect(spare.timerFired(generation: 2) == [])
        #expect(spare.attemptFailed(0) == [.start(1)])
        #expect(spare.attemptSucceeded(1) == [.won(1, cancel: [])])
    }

    @Test func aSlowHandshakeThatFinishesFirstCostsNoSecondOne() {
        // A 150 ms link: attempt 0 is ready at 300 ms; address 1's probe, started at 250 ms, would connect
        // at 400 ms. Attempt 0 wins and the probe is cancelled: one TLS handshake in all.
        var schedule = HappyEyeballsSchedule(count: 2, probesFirst: true)
        _ = schedule.begin()
        #expect(schedule.timerFired(generation: 1) == [.probe(1)])
        #expect(schedule.attemptSucceeded(0) == [.won(0, cancel: [1])])
        #expect(schedule.probeConnected(1) == [])
    }

    @Test func failuresMoveOnAtOnceAndTheRaceIsLostOnlyWhenEveryAddressFailed() {
        var schedule = HappyEyeballsSchedule(count: 3, probesFirst: true)
        _ = schedule.begin()
        _ = schedule.timerFired(generation: 1)  // probe 1
        // Attempt 0 fails while probe 1 is out: address 2 is probed too, no blind handshake.
        #expect(schedule.attemptFailed(0) == [.probe(2)])
        #expect(schedule.probeFailed(1) == [])
        // (Attempt 0's own probe may still be on its way: cancelled with the rest.)
        #expect(schedule.probeFailed(2) == [.failed(cancel: [0])])
        // Nothing else running when an attempt fails: the next one is a whole attempt at once.
        var alone = HappyEyeballsSchedule(count: 2, probesFirst: true)
        _ = alone.begin()
        #expect(alone.attemptFailed(0) == [.start(1)])
        // A probe that fails with nothing running: the next address gets a whole attempt.
        var third = HappyEyeballsSchedule(count: 3, probesFirst: true)
        _ = third.begin()
        _ = third.timerFired(generation: 1)
        _ = third.attemptFailed(0)  // probe 2
        _ = third.probeFailed(2)
        #expect(third.deadlinePassed() == [.failed(cancel: [0, 1])])
    }

    // MARK: the executor

    /// Attempts whose outcome the test decides, and what the race did with them.
    final class Attempts: Sendable {
        let loop: EmbeddedEventLoop
        private let state = NIOLockedValueBox<
            (promises: [Int: EventLoopPromise<Int>], cancelled: [Int], discarded: [Int])
        >(
            ([:], [], [])
        )

        init(loop: EmbeddedEventLoop) { self.loop = loop }

        var started: [Int] { state.withLockedValue { $0.promises.keys.sorted() } }
        var cancelled: [Int] { state.withLockedValue { $0.cancelled } }
        var discarded: [Int] { state.withLockedValue { $0.discarded } }

        func attempt(_ index: Int) -> EventLoopFuture<Int> {
            let promise = loop.makePromise(of: Int.self)
            state.withLockedValue { $0.promises[index] = promise }
            return promise.futureResult
        }
        func cancel(_ index: Int) { state.withLockedValue { $0.cancelled.append(index) } }
        func discard(_ value: Int) { state.withLockedValue { $0.discarded.append(value) } }
        func promise(_ index: Int) -> EventLoopPromise<Int>? { state.withLockedValue { $0.promises[index] } }

        /// Probes whose outcome the test decides (`probesFirst` races).
        private let probes = NIOLockedValueBox<[Int: EventLoopPromise<Void>]>([:])
        var probed: [Int] { probes.withLockedValue { $0.keys.sorted() } }
        func probe(_ index: Int) -> EventLoopFuture<Void> {
            let promise = loop.makePromise(of: Void.self)
            probes.withLockedValue { $0[index] = promise }
            return promise.futureResult
        }
        func probePromise(_ index: Int) -> EventLoopPromise<Void>? { probes.withLockedValue { $0[index] } }

        func run(
            count: Int,
            deadline: TimeAmount = .seconds(10),
            probing: Bool = false,
            isFinal: @escaping @Sendable (any Error) -> Bool = { _ in false }
        )
            -> EventLoopFuture<Int>
        {
            let probe: (@Sendable (Int) -> EventLoopFuture<Void>)? =
                probing ? { @Sendable index in self.probe(index) } : nil
            let race = HappyEyeballsRace.run(
                count: count,
                deadline: loop.now + deadline,
                on: loop,
                isFinal: isFinal,
                probe: probe,
                attempt: attempt,
                cancel: cancel,
                discard: discard
            )
            loop.run()
            return race
        }
    }

    struct Refused: Error, Equatable { var index: Int }

    @Test func theExecutorFollowsTheDelayAndHandsBackTheWinner() throws {
        let loop = EmbeddedEventLoop()
        let attempts = Attempts(loop: loop)
        let race = attempts.run(count: 3)
        #expect(attempts.started == [0])
        loop.advanceTime(by: .milliseconds(249))
        #expect(attempts.started == [0])
        loop.advanceTime(by: .milliseconds(1))
        #expect(attempts.started == [0, 1])
        attempts.promise(1)?.succeed(101)
        loop.run()
        #expect(try race.wait() == 101)
        #expect(attempts.cancelled == [0])
        // The timer was cancelled with the win: attempt 2 never starts.
        loop.advanceTime(by: .seconds(1))
        #expect(attempts.started == [0, 1])
        // The loser connects late: its result is closed, not leaked.
        attempts.promise(0)?.succeed(100)
        loop.run()
        #expect(attempts.discarded == [100])
    }

    @Test func theExecutorProbesWithTCPBeforeASecondHandshake() throws {
        let loop = EmbeddedEventLoop()
        let attempts = Attempts(loop: loop)
        let race = attempts.run(count: 2, probing: true)
        loop.advanceTime(by: .milliseconds(250))
        // No second handshake on the timer: a TCP probe (beside attempt 0's own, whose TCP is not through).
        #expect(attempts.started == [0])
        #expect(attempts.probed == [0, 1])
        attempts.probePromise(1)?.succeed(())
        loop.run()
        #expect(attempts.started == [0, 1])
        attempts.promise(1)?.succeed(101)
        loop.run()
        #expect(try race.wait() == 101)
        #expect(attempts.cancelled == [0])
    }

    @Test func theExecutorStartsNoSecondHandshakeOnceTheFirstsTCPIsThrough() throws {
        let loop = EmbeddedEventLoop()
        let attempts = Attempts(loop: loop)
        let race = attempts.run(count: 2, probing: true)
        #expect(attempts.started == [0] && attempts.probed == [0])
        attempts.probePromise(0)?.succeed(())
        loop.advanceTime(by: .milliseconds(250))
        #expect(attempts.started == [0] && attempts.probed == [0])
        attempts.promise(0)?.succeed(100)
        loop.run()
        #expect(try race.wait() == 100)
        #expect(attempts.cancelled == [])
    }

    @Test func aProbesErrorBesideItsAttemptIsReportedOnce() throws {
        let loop = EmbeddedEventLoop()
        let attempts = Attempts(loop: loop)
        let race = attempts.run(count: 2, probing: true)
        attempts.probePromise(0)?.fail(Refused(index: 0))
        attempts.promise(0)?.fail(Refused(index: 0))
        loop.run()
        #expect(attempts.started == [0, 1])
        attempts.promise(1)?.fail(Refused(index: 1))
        loop.run()
        let failure = try #require(throws: HappyEyeballsFailure.self) { try race.wait() }
        #expect(failure.errors.map(\.index) == [0, 1])
    }

    @Test func theExecutorTriesTheNextAtOnceOnFailureAndReportsEveryError() throws {
        let loop = EmbeddedEventLoop()
        let attempts = Attempts(loop: loop)
        let race = attempts.run(count: 2)
        attempts.promise(0)?.fail(Refused(index: 0))
        loop.run()
        #expect(attempts.started == [0, 1])
        attempts.promise(1)?.fail(Refused(index: 1))
        loop.run()
        let failure = try #require(throws: HappyEyeballsFailure.self) { try race.wait() }
        #expect(failure.errors.map(\.index) == [0, 1])
        #expect(failure.errors.compactMap { $0.error as? Refused } == [Refused(index: 0), Refused(index: 1)])
        #expect(!failure.timedOut)
    }

    @Test func theExecutorStopsAtAFinalFailureAndAtTheDeadline() throws {
        let loop = EmbeddedEventLoop()
        let attempts = Attempts(loop: loop)
        let final = attempts.run(count: 3) { ($0 as? Refused)?.index == 0 }
        loop.advanceTime(by: .milliseconds(250))
        attempts.promise(0)?.fail(Refused(index: 0))
        loop.run()
        #expect(throws: HappyEyeballsFailure.self) { try final.wait() }
        #expect(attempts.cancelled == [1])
        #expect(attempts.started == [0, 1])

        let other = Attempts(loop: loop)
        let late = other.run(count: 2, deadline: .seconds(1))
        loop.advanceTime(by: .seconds(1))
        let failure = try #require(throws: HappyEyeballsFailure.self) { try late.wait() }
        #expect(failure.timedOut)
        #expect(other.cancelled == [0, 1])
    }
}

@Suite struct TransportSelectionTests {
    /// The stack is a build-time choice (ConnectionTransport.swift): Network.framework and its shared
    /// group on Apple platforms (this test built for one, by the Apple type-check, expects that), BSD
    /// sockets and NIO's shared group elsewhere.
    @Test func theTransportIsThePlatformsOwn() throws {
        #if canImport(Network)
            #expect(HTTPEngine.transportKind == .networkFramework)
            #expect(HTTPEngine.defaultEventLoopGroup is NIOTSEventLoopGroup)
        #else
            #expect(HTTPEngine.transportKind == .posixBoringSSL)
            #expect(HTTPEngine.defaultEventLoopGroup is MultiThreadedEventLoopGroup)
        #endif
    }
}
