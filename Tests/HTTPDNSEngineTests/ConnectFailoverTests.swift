// A connect to addresses HTTPDNS gave, event by event, without a socket or a clock (ConnectFailover.swift):
// an origin that moved while the app held its old address, refused or silent, fresh or stale; the
// fallback after; fast open's happy eyeballs one level up.

@testable import HTTPDNSEngine
@testable import HTTPDNSTestTools
import HTTPDNSCore
import NIOConcurrencyHelpers
import Testing

@Suite struct ConnectFailoverTests {
    typealias Action = ConnectFailover.Action
    static let old = IPAddress("192.0.2.1")!
    static let old6 = IPAddress("2001:db8::1")!
    static let new = IPAddress("192.0.2.9")!
    static let local = IPAddress("198.51.100.7")!

    func machine(
        _ addresses: [IPAddress] = [old],
        remembered: Bool = true,
        fallback: Bool = true,
        fastOpen: Bool = false
    ) -> ConnectFailover {
        ConnectFailover(
            addresses: addresses,
            options: .init(remembered: remembered, mayFallBack: fallback, fastOpen: fastOpen)
        )
    }

    @Test func aRefusedRememberedAddressForgetsItAndAsksPastTheCache() {
        var m = machine()
        #expect(m.start() == [.attempt(1, [Self.old]), .scheduleAttemptDelay])
        #expect(m.event(.attemptFailed(1)) == [.forget([Self.old]), .askFresh])
        #expect(m.event(.freshAnswer([Self.new])) == [.attempt(2, [Self.new])])
        #expect(m.event(.attemptSucceeded(2)) == [.succeed(2)])
        #expect(m.isFinished)
    }

    @Test func aSilentRememberedAddressAsksAtTheAttemptDelayAndTheNewAddressJoinsTheRace() {
        var m = machine()
        _ = m.start()
        #expect(m.event(.attemptDelayPassed) == [.askFresh])
        #expect(m.event(.freshAnswer([Self.old, Self.new])) == [.attempt(2, [Self.new])])
        #expect(m.event(.attemptSucceeded(2)) == [.succeed(2)])
        // The old address's attempt ends later: nothing more happens (its connection, if any, is closed).
        #expect(m.event(.attemptFailed(1)) == [])
        #expect(m.event(.attemptSucceeded(1)) == [.discard(1)])
    }

    @Test func theLookupPastTheCacheIsAskedOnceAndNoAddressIsTriedTwice() {
        var m = machine()
        _ = m.start()
        #expect(m.event(.attemptDelayPassed) == [.askFresh])
        // The same address again: nothing new to try, the first attempt still runs.
        #expect(m.event(.freshAnswer([Self.old])) == [])
        // It fails: forgotten, no second lookup past the cache, the fallback once.
        #expect(m.event(.attemptFailed(1)) == [.forget([Self.old]), .askFallback])
        #expect(m.event(.fallbackAnswer([Self.old, Self.local])) == [.attempt(2, [Self.local])])
        #expect(m.event(.attemptFailed(2)) == [.forget([Self.local]), .fail])
        #expect(m.isFinished)
    }

    @Test func aFailureBeforeTheFreshAnswerWaitsForIt() {
        var m = machine()
        _ = m.start()
        #expect(m.event(.attemptDelayPassed) == [.askFresh])
        // The lookup is on its way: no fallback yet.
        #expect(m.event(.attemptFailed(1)) == [.forget([Self.old])])
        #expect(m.event(.freshAnswer([])) == [.askFallback])
        #expect(m.event(.fallbackAnswer([])) == [.fail])
    }

    @Test func aFreshAnswerThatFailsFallsBackWithoutAskingAgain() {
        var m = machine(remembered: false)
        #expect(m.start() == [.attempt(1, [Self.old])])  // no delay: nothing would follow it
        #expect(m.event(.attemptDelayPassed) == [])
        #expect(m.event(.attemptFailed(1)) == [.forget([Self.old]), .askFallback])
        #expect(m.event(.fallbackAnswer([Self.local])) == [.attempt(2, [Self.local])])
        #expect(m.event(.attemptSucceeded(2)) == [.succeed(2)])
    }

    @Test func noFallbackWhereThePolicyAllowsNone() {
        var m = machine(remembered: false, fallback: false)
        _ = m.start()
        #expect(m.event(.attemptFailed(1)) == [.forget([Self.old]), .fail])
    }

    @Test func everyAddressGivenIsOneRaceWithoutFastOpen() {
        var m = machine([Self.old6, Self.old])
        #expect(m.start() == [.attempt(1, [Self.old6, Self.old]), .scheduleAttemptDelay])
    }

    @Test func underFastOpenEachAddressIsAnAttemptStartedByTheDelayOrAFailure() {
        var m = machine([Self.old6, Self.old, Self.new], remembered: false, fastOpen: true)
        #expect(m.start() == [.attempt(1, [Self.old6]), .scheduleAttemptDelay])
        // The first address's SYN goes unanswered (fast open "connected" at once): the next after the delay.
        #expect(m.event(.attemptDelayPassed) == [.attempt(2, [Self.old]), .scheduleAttemptDelay])
        // A failure starts the next one at once.
        #expect(m.event(.attemptFailed(2)) == [.forget([Self.old]), .attempt(3, [Self.new])])
        #expect(m.event(.attemptSucceeded(3)) == [.succeed(3)])
        #expect(m.event(.attemptSucceeded(1)) == [.discard(1)])
    }

    @Test func noNetworkBlamesNoAddressAndAsksNobody() {
        var m = machine()
        _ = m.start()
        #expect(m.event(.attemptFoundNoNetwork(1)) == [.fail])
        #expect(m.isFinished)
    }

    @Test func aCertificateVerdictIsNoDeadAddressAndBringsNoFallback() {
        // Remembered or not, the verdict ends the connect: nothing forgotten, nobody asked.
        var m = machine()
        _ = m.start()
        #expect(m.event(.attemptRejected(1)) == [.fail])
        var fresh = machine(remembered: false)
        _ = fresh.start()
        #expect(fresh.event(.attemptRejected(1)) == [.fail])
    }

    @Test func onlyAFailureToConnectMakesAnAddressDead() {
        let refused = HTTPEngineError(.connectFailed, "refused")
        let silent = HTTPEngineError(.connectTimeout, "silent")
        let certificate = HTTPEngineError(.certificateNameMismatch, "another site")
        #expect(ConnectionFactory.event(attempt: 1, failedWith: refused) == .attemptFailed(1))
        #expect(ConnectionFactory.event(attempt: 1, failedWith: silent) == .attemptFailed(1))
        #expect(ConnectionFactory.event(attempt: 1, failedWith: certificate) == .attemptRejected(1))
        var offline = HTTPEngineError(.connectFailed, "unreachable")
        offline.networkUnavailable = NetworkUnavailable()
        #expect(ConnectionFactory.event(attempt: 1, failedWith: offline) == .attemptFoundNoNetwork(1))
    }

    @Test func duplicatesAreTriedOnce() {
        var m = machine([Self.old, Self.old])
        #expect(m.start() == [.attempt(1, [Self.old]), .scheduleAttemptDelay])
    }

    @Test func noAddressAtAllGoesToTheFallback() {
        var m = machine([])
        #expect(m.start() == [.askFallback])
        #expect(m.event(.fallbackAnswer([Self.local])) == [.attempt(1, [Self.local])])
    }
}

/// The race between an HTTPS record's endpoint and the origin's own (ConnectionFactory.race), with values
/// standing in for connections: no clock is needed where the delay is zero or an hour.
@Suite struct EndpointRaceTests {
    struct Refused: Error {}

    @Test func theOriginJoinsAtOnceWhenTheRecordsEndpointFails() async throws {
        let discarded = NIOLockedValueBox<[Int]>([])
        let winner = try await ConnectionFactory.race(after: .seconds(3600)) { () async throws -> Int in
            throw Refused()
        } or: {
            2
        } discard: { value in
            discarded.withLockedValue { $0.append(value) }
        }
        #expect(winner == 2)
    }

    @Test func theOriginJoinsAfterTheDelayWhileTheRecordsEndpointIsSilent() async throws {
        // The record's endpoint never answers (a blackholed port): its value comes only after the
        // origin's has won, and is discarded.
        let (silence, hold) = AsyncStream.makeStream(of: Void.self)
        let discarded = NIOLockedValueBox<[Int]>([])
        let winner = try await ConnectionFactory.race(after: .zero) { () async throws -> Int in
            for await _ in silence {}
            return 1
        } or: {
            2
        } discard: { value in
            discarded.withLockedValue { $0.append(value) }
        }
        #expect(winner == 2)
        hold.finish()
        try await eventually("the late value discarded", within: .seconds(60)) {
            discarded.withLockedValue { $0 } == [1]
        }
    }

    @Test func bothFailingThrowsTheOriginsError() async throws {
        struct OriginDown: Error {}
        await #expect(throws: OriginDown.self) {
            _ = try await ConnectionFactory.race(after: .seconds(3600)) { () async throws -> Int in
                throw Refused()
            } or: {
                throw OriginDown()
            } discard: { _ in
            }
        }
    }

    @Test func aRecordsEndpointThatConnectsFirstWins() async throws {
        let winner = try await ConnectionFactory.race(after: .seconds(3600)) { () async throws -> Int in
            1
        } or: {
            2
        } discard: { _ in
        }
        #expect(winner == 1)
    }
}
