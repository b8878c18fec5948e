// The rules a full listener follows (ConnectionSlots): the connection idle longest that never carried a
// request makes room, a kept-alive one only after a newcomer waited, a busy one never does, and one
// client address can be capped. Pure: no socket, no clock.

@testable import HTTPDNSEngine
import Testing

@Suite struct ConnectionSlotsTests {
    @Test func aFullTableClosesTheConnectionIdleLongestThatNeverCarriedARequest() {
        var slots = ConnectionSlots<Int>(limit: 3)
        for id in 1...3 { #expect(accept(&slots, id, "a") == .admit) }
        // 1 and 3 start a request; 1 finishes it, so 2 has been idle longest (since it was accepted).
        slots.busy(1)
        slots.busy(3)
        slots.idle(1)
        #expect(accept(&slots, 4, "b") == .admitEvicting(2))
        #expect(slots.count == 3)
        // Next: 4, which never carried a request, not 1, idle longer but kept alive; 3 is busy and stays.
        #expect(accept(&slots, 5, "b") == .admitEvicting(4))
        #expect(accept(&slots, 6, "b") == .admitEvicting(5))
        #expect(slots.isIdle(1) && !slots.isIdle(3))
    }

    /// Hostile round 4, item 8: a DoH client querying every 2 s was evicted 8 times of 8 under 150 new
    /// idle connections a second. Its connection is kept alive: newcomers take each other's slots.
    @Test func aKeptAliveClientOutlastsACrowdOfIdleNewcomers() {
        var slots = ConnectionSlots<Int>(limit: 40)
        #expect(accept(&slots, 0, "browser") == .admit)
        for id in 1...39 { #expect(accept(&slots, id, "crowd") == .admit) }
        for round in 0..<8 {
            slots.busy(0)
            slots.idle(0)
            for n in 0..<300 {
                let admission = accept(&slots, 1000 * (round + 1) + n, "crowd")
                #expect(admission != .admitEvicting(0) && admission != .wait, "\(admission)")
            }
        }
        #expect(slots.isIdle(0))
    }

    @Test func whenOnlyKeptAliveConnectionsCouldMakeRoomANewcomerWaitsForAClose() {
        var slots = ConnectionSlots<Int>(limit: 2, maxWaiting: 1)
        for id in 1...2 {
            #expect(accept(&slots, id, "a") == .admit)
            slots.busy(id)
        }
        slots.idle(1)
        #expect(accept(&slots, 3, "b") == .wait)
        #expect(slots.waitingCount == 1)
        // Too many waiting: refused.
        #expect(accept(&slots, 4, "b") == .refuseFull)
        // A close gives its slot to the newcomer waiting longest.
        #expect(slots.closed(2) == 3)
        #expect(slots.waitingCount == 0 && slots.count == 2)
        // Its wait is over: nothing happens when its timer fires.
        #expect(slots.waitExpired(3) == nil)
    }

    @Test func aWaitThatRunsOutTakesTheKeptAliveConnectionIdleLongestOrIsRefused() {
        var slots = ConnectionSlots<Int>(limit: 2)
        for id in 1...2 {
            #expect(accept(&slots, id, "a") == .admit)
            slots.busy(id)
        }
        #expect(accept(&slots, 3, "b") == .wait)
        // Every connection busy: refused at the end of the wait.
        #expect(slots.waitExpired(3) == .refuseFull)
        #expect(accept(&slots, 4, "b") == .wait)
        slots.idle(2)
        slots.idle(1)
        // Kept alive, but idle for the whole wait: 2, idle longest, makes room.
        #expect(slots.waitExpired(4) == .admitEvicting(2))
        #expect(slots.count == 2 && slots.waitingCount == 0)
    }

    @Test func aWaitingNewcomerCountsForItsClientUntilItsWaitEnds() {
        var slots = ConnectionSlots<Int>(limit: 1, maxPerClient: 1)
        #expect(accept(&slots, 1, "a") == .admit)
        slots.busy(1)
        #expect(accept(&slots, 2, "b") == .wait)
        #expect(accept(&slots, 3, "b") == .refuseClientLimit)
        // Given up (closed while waiting): "b" may come again.
        slots.closed(2)
        #expect(accept(&slots, 4, "b") == .wait)
    }

    @Test func aHeadStillArrivingCountsAsIdle() {
        // Accepted and never busy: a TLS handshake in progress, a head still coming, nothing sent.
        var slots = ConnectionSlots<Int>(limit: 1)
        #expect(accept(&slots, 1, "a") == .admit)
        #expect(slots.isIdle(1))
        #expect(accept(&slots, 2, "a") == .admitEvicting(1))
    }

    @Test func oneClientAddressIsCapped() {
        var slots = ConnectionSlots<Int>(limit: 10, maxPerClient: 2)
        #expect(accept(&slots, 1, "a") == .admit)
        #expect(accept(&slots, 2, "a") == .admit)
        #expect(accept(&slots, 3, "a") == .refuseClientLimit)
        #expect(accept(&slots, 4, "b") == .admit)
        slots.closed(1)
        #expect(accept(&slots, 5, "a") == .admit)
    }

    @Test func anEvictedConnectionNoLongerCountsForItsClient() {
        var slots = ConnectionSlots<Int>(limit: 2, maxPerClient: 1)
        #expect(accept(&slots, 1, "a") == .admit)
        #expect(accept(&slots, 2, "b") == .admit)
        #expect(accept(&slots, 3, "c") == .admitEvicting(1))
        // 1 is gone (its close, reported later, changes nothing), so "a" may come back.
        slots.closed(1)
        #expect(accept(&slots, 4, "a") == .admitEvicting(2))
        #expect(slots.count == 2)
    }
}

/// `slots.accepted(id, client:)`, outside `#expect` (which cannot call a mutating method).
private func accept(_ slots: inout ConnectionSlots<Int>, _ id: Int, _ client: String)
    -> ConnectionSlots<Int>.Admission
{
    slots.accepted(id, client: client)
}
