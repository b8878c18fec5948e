// The rules a full listener follows (ConnectionSlots): the connection idle longest makes room, a busy
// one never does, and one client address can be capped. Pure: no socket, no clock.

@testable import HTTPDNSPlumbing
import Testing

@Suite struct ConnectionSlotsTests {
    @Test func aFullTableClosesTheConnectionIdleLongestForANewOne() {
        var slots = ConnectionSlots<Int>(limit: 3)
        for id in 1...3 { #expect(accept(&slots, id, "a") == .admit) }
        // 1 and 3 start a request; 1 finishes it, so 2 has been idle longest (since it was accepted).
        slots.busy(1)
        slots.busy(3)
        slots.idle(1)
        #expect(accept(&slots, 4, "b") == .admitEvicting(2))
        #expect(slots.count == 3)
        // Next idle longest: 1 (idle again before 4 arrived); 3 is busy and stays.
        #expect(accept(&slots, 5, "b") == .admitEvicting(1))
        #expect(accept(&slots, 6, "b") == .admitEvicting(4))
        #expect(!slots.isIdle(3))
    }

    @Test func whenEveryConnectionIsBusyANewOneIsRefused() {
        var slots = ConnectionSlots<Int>(limit: 2)
        for id in 1...2 {
            #expect(accept(&slots, id, "a") == .admit)
            slots.busy(id)
        }
        #expect(accept(&slots, 3, "a") == .refuseFull)
        // A connection that closes frees its slot.
        slots.closed(1)
        #expect(accept(&slots, 3, "a") == .admit)
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
