// The system encrypted-DNS mode's health rules (EncryptedDNSHealth) and the per-task resolution report,
// without I/O: checks in, what to apply and when to check next out.

@testable import HTTPDNSCore
@testable import HTTPDNSKit
import Testing

@Suite struct EncryptedDNSHealthTests {
    func health() -> EncryptedDNSHealth {
        EncryptedDNSHealth(
            interval: .seconds(300),
            failuresBeforeFallback: 2,
            initialBackoff: .seconds(30),
            maximumBackoff: .seconds(100),
            confirmAfter: .seconds(5)
        )
    }

    @Test func nothingIsAppliedBeforeTheFirstCheckPasses() {
        var h = health()
        #expect(h.start() == [.check])
        #expect(h.applied == nil)
        #expect(h.checkFinished(healthy: true) == [.apply(.encrypted), .schedule(after: .seconds(300))])
        #expect(h.applied == .encrypted)
        // Healthy again: nothing to apply, the next check at the interval.
        #expect(h.timerFired() == [.check])
        #expect(h.checkFinished(healthy: true) == [.schedule(after: .seconds(300))])
    }

    @Test func aServerDownAtLaunchLeavesTheSystemResolverAndIsRetriedWithBackoff() {
        var h = health()
        _ = h.start()
        #expect(h.checkFinished(healthy: false) == [.apply(.system), .schedule(after: .seconds(30))])
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: false) == [.schedule(after: .seconds(60))])
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: false) == [.schedule(after: .seconds(100))])
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: false) == [.schedule(after: .seconds(100))])
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: true) == [.apply(.encrypted), .schedule(after: .seconds(300))])
    }

    @Test func oneFailureIsConfirmedAndTheSecondFallsBack() {
        var h = health()
        _ = h.start()
        _ = h.checkFinished(healthy: true)
        _ = h.timerFired()
        // One failure: still encrypted, confirmed soon (every lookup of the process fails meanwhile).
        #expect(h.checkFinished(healthy: false) == [.schedule(after: .seconds(5))])
        #expect(h.applied == .encrypted)
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: false) == [.apply(.system), .schedule(after: .seconds(30))])
        #expect(h.applied == .system)
        // A blip that passes resets the count: one failure is again only confirmed.
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: true) == [.apply(.encrypted), .schedule(after: .seconds(300))])
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: false) == [.schedule(after: .seconds(5))])
    }

    @Test func aNetworkChangeChecksAtOnceAndDropsACheckMadeOnTheOldNetwork() {
        var h = health()
        _ = h.start()
        _ = h.checkFinished(healthy: true)
        #expect(h.conditionsChanged() == [.check])
        // Another change while that check runs: its result is stale.
        #expect(h.conditionsChanged() == [])
        #expect(h.checkFinished(healthy: false) == [.check])
        #expect(h.applied == .encrypted)
        #expect(h.checkFinished(healthy: true) == [.schedule(after: .seconds(300))])
        // A timer that fires while a check runs starts no second one.
        _ = h.conditionsChanged()
        #expect(h.timerFired() == [])
    }

    @Test func stopGivesTheSystemResolverBackOnceAndEndsEverything() {
        var h = health()
        _ = h.start()
        _ = h.checkFinished(healthy: true)
        #expect(h.stop() == [.apply(.system)])
        #expect(h.stop() == [])
        #expect(h.timerFired() == [])
        #expect(h.conditionsChanged() == [])
        #expect(h.checkFinished(healthy: true) == [])
        var never = health()
        _ = never.start()
        #expect(never.stop() == [])
    }

    @Test func oneFailureFallsBackWhenThatIsTheSetting() {
        var h = EncryptedDNSHealth(interval: .seconds(10), failuresBeforeFallback: 0, initialBackoff: .seconds(1))
        #expect(h.failuresBeforeFallback == 1)
        _ = h.start()
        _ = h.checkFinished(healthy: true)
        _ = h.timerFired()
        #expect(h.checkFinished(healthy: false) == [.apply(.system), .schedule(after: .seconds(1))])
    }

    @Test func theReportIsEncryptedOnlyWhenEveryLookupWas() {
        #expect(ResolutionReport(lookups: [.https]).isEncrypted)
        #expect(ResolutionReport(lookups: [.https, .tls]).isEncrypted)
        #expect(!ResolutionReport(lookups: [.https, .udp]).isEncrypted)
        #expect(ResolutionReport(lookups: [.https, .udp]).usedCleartext)
        #expect(!ResolutionReport(lookups: [.unknown]).isEncrypted)
        #expect(!ResolutionReport(lookups: [.unknown]).usedCleartext)
        // A task that looked nothing up (a reused connection) proves nothing.
        #expect(!ResolutionReport(lookups: []).isEncrypted)
        #expect(!ResolutionReport(lookups: []).usedCleartext)
    }
}
