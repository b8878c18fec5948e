// The rules a full listener follows (ConnectionSlots): a silent connection that never carried a request
// makes room once past its floor, a stalled sender or a client idle past its floor only after a newcomer
// waited, a busy one or a client in use never does, and one client address can be capped. Pure: no
// socket; the time is given with each event.

@testable import HTTPDNSListener
import NIOCore
import Testing

@Suite struct ConnectionSlotsTests {
    /// A clock the tests move by hand.
    struct Clock {
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        mutating func advance(_ amount: TimeAmount) { now = now + amount }
    }

    @Test func aFullTableClosesTheSilentConnectionIdleLongestThatNeverCarriedARequest() {
        var slots = ConnectionSlots<Int>(limit: 3)
        var clock = Clock()
        for id in 1...3 { #expect(accept(&slots, id, "a", clock.now) == .admit) }
        // 1 and 3 start a request; 1 finishes it, so 2 has been idle longest (since it was accepted).
        slots.use(1, .busy, now: clock.now)
        slots.use(3, .busy, now: clock.now)
        slots.use(1, .idle, now: clock.now)
        clock.advance(.seconds(1))
        #expect(accept(&slots, 4, "b", clock.now) == .admitEvicting(2))
        #expect(slots.count == 3)
        clock.advance(.seconds(1))
        // Next: 4, which never carried a request, not 1, idle longer but kept alive; 3 is busy and stays.
        #expect(accept(&slots, 5, "b", clock.now) == .admitEvicting(4))
        #expect(slots.isIdle(1) && !slots.isIdle(3))
    }

    /// Hostile round 5, item 1: every newcomer took the slot of the one before it at once, so a real
    /// client still in its handshake was closed. A connection younger than the floor is not closed while
    /// the newcomer can wait instead; with the waiting room full (a flood), the oldest silent one goes.
    @Test func aNewcomerStillInItsHandshakeIsNotClosedForTheNextOne() {
        var slots = ConnectionSlots<Int>(limit: 2, maxWaiting: 1)
        var clock = Clock()
        #expect(accept(&slots, 1, "a", clock.now) == .admit)
        clock.advance(.milliseconds(100))
        #expect(accept(&slots, 2, "a", clock.now) == .admit)
        clock.advance(.milliseconds(400))
        #expect(accept(&slots, 3, "b", clock.now) == .wait)
        #expect(accept(&slots, 4, "b", clock.now) == .admitEvicting(1))
        clock.advance(.milliseconds(600))
        // 2 is a second old; 4 is not yet.
        #expect(slots.admitWaiting(now: clock.now).map { [$0.admitted, $0.evicted] } == [[3, 2]])
        // Nothing silent past the floor and nobody waiting: a newcomer waits; the room full, it takes
        // the oldest silent one.
        #expect(accept(&slots, 5, "b", clock.now) == .wait)
        #expect(accept(&slots, 6, "b", clock.now) == .admitEvicting(4))
    }

    /// With the floor, a flood against a full table would turn over one wait (2 s) at a time, and a real
    /// client queued behind it would wait that long for each few ahead of it. Waiting newcomers take the
    /// slots of silent connections the moment those pass the floor.
    @Test func waitingNewcomersTakeSilentSlotsAsSoonAsThosePassTheFloor() {
        var slots = ConnectionSlots<Int>(limit: 2, maxWaiting: 2)
        var clock = Clock()
        let start = clock.now
        #expect(accept(&slots, 1, "crowd", clock.now) == .admit)
        clock.advance(.milliseconds(300))
        #expect(accept(&slots, 2, "crowd", clock.now) == .admit)
        #expect(accept(&slots, 3, "crowd", clock.now) == .wait)
        #expect(accept(&slots, 4, "client", clock.now) == .wait)
        #expect(slots.nextFloorPass() == start + .seconds(1))
        clock.advance(.milliseconds(700))
        #expect(slots.admitWaiting(now: clock.now).map { [$0.admitted, $0.evicted] } == [[3, 1]])
        #expect(slots.nextFloorPass() == start + .milliseconds(1300))
        clock.advance(.milliseconds(300))
        #expect(slots.admitWaiting(now: clock.now).map { [$0.admitted, $0.evicted] } == [[4, 2]])
        #expect(slots.nextFloorPass() == nil)
        #expect(slots.count == 2 && slots.waitingCount == 0)
    }

    /// A full waiting room with silent connections to take over is no reason to stop accepting (a flood
    /// throttled to one batch a second fills the kernel's backlog, and real clients' SYNs are dropped);
    /// one with only clients in use is.
    @Test func theListenerRefusesNewcomersOnlyWhenNoSilentConnectionCouldMakeRoom() {
        var slots = ConnectionSlots<Int>(limit: 2, maxWaiting: 1)
        let clock = Clock()
        #expect(accept(&slots, 1, "crowd", clock.now) == .admit)
        #expect(accept(&slots, 2, "client", clock.now) == .admit)
        #expect(accept(&slots, 3, "crowd", clock.now) == .wait)
        #expect(!slots.refusesNewcomers)
        slots.use(1, .busy, now: clock.now)
        slots.use(2, .busy, now: clock.now)
        #expect(slots.refusesNewcomers)
    }

    /// Hostile round 5, item 1: a hosts answer is written and sent within the read that brought its
    /// request, so the connection reports busy and idle together. It is kept alive all the same.
    @Test func aRequestAnsweredWithinOneReadKeepsItsConnectionAlive() {
        var slots = ConnectionSlots<Int>(limit: 2)
        var clock = Clock()
        #expect(accept(&slots, 1, "doh", clock.now) == .admit)
        #expect(accept(&slots, 2, "crowd", clock.now) == .admit)
        slots.use(1, .busy, now: clock.now)
        slots.use(1, .idle, now: clock.now)
        clock.advance(.seconds(5))
        #expect(accept(&slots, 3, "crowd", clock.now) == .admitEvicting(2))
        clock.advance(.seconds(5))
        #expect(accept(&slots, 4, "crowd", clock.now) == .admitEvicting(3))
    }

    /// Hostile round 5, item 1: a DoH client querying every 2 s was evicted 8 times of 8 under 150 new
    /// idle connections a second, and 9–11 of 16 clients in use were closed when newcomers' waits ran
    /// out. Newcomers now take each other's slots, or wait and are refused; the client stays.
    @Test func aClientInUseOutlastsAFloodOfSilentNewcomers() {
        var slots = ConnectionSlots<Int>(limit: 40)
        var clock = Clock()
        #expect(accept(&slots, 0, "doh", clock.now) == .admit)
        for id in 1...39 { #expect(accept(&slots, id, "crowd", clock.now) == .admit) }
        var next = 1000
        // A flood of 150 a second, each waiting newcomer's wait running out 2 s after it came.
        var waiters: [(id: Int, until: NIODeadline)] = []
        for _ in 0..<20 {
            // The client's query every 2 s.
            slots.use(0, .busy, now: clock.now)
            slots.use(0, .idle, now: clock.now)
            for _ in 0..<300 {
                clock.advance(.nanoseconds(6_666_667))
                for waiter in waiters where waiter.until <= clock.now {
                    #expect(expire(&slots, waiter.id, clock.now) != .admitEvicting(0))
                }
                waiters.removeAll { $0.until <= clock.now }
                let admission = accept(&slots, next, "crowd", clock.now)
                #expect(admission != .admitEvicting(0), "\(admission)")
                if admission == .wait { waiters.append((next, clock.now + .seconds(2))) }
                next += 1
            }
        }
        #expect(slots.isIdle(0))
    }

    @Test func whenNoSilentConnectionCanMakeRoomANewcomerWaitsForAClose() {
        var slots = ConnectionSlots<Int>(limit: 2, maxWaiting: 1)
        let clock = Clock()
        for id in 1...2 {
            #expect(accept(&slots, id, "a", clock.now) == .admit)
            slots.use(id, .busy, now: clock.now)
        }
        slots.use(1, .idle, now: clock.now)
        #expect(accept(&slots, 3, "b", clock.now) == .wait)
        #expect(slots.waitingCount == 1)
        // Too many waiting: refused.
        #expect(accept(&slots, 4, "b", clock.now) == .refuseFull)
        // A close gives its slot to the newcomer waiting longest.
        #expect(slots.closed(2, now: clock.now) == 3)
        #expect(slots.waitingCount == 0 && slots.count == 2)
        // Its wait is over: nothing happens when its timer fires.
        #expect(expire(&slots, 3, clock.now) == nil)
    }

    /// Hostile round 5, item 1: a wait that ran out took the kept-alive connection idle longest, however
    /// briefly idle: a client between two queries. Now only a client idle past the floor makes room.
    @Test func aWaitThatRunsOutTakesOnlyAClientIdlePastTheFloor() {
        var slots = ConnectionSlots<Int>(limit: 2)
        var clock = Clock()
        for id in 1...2 {
            #expect(accept(&slots, id, "a", clock.now) == .admit)
            slots.use(id, .busy, now: clock.now)
        }
        #expect(accept(&slots, 3, "b", clock.now) == .wait)
        clock.advance(.seconds(2))
        // Every connection busy: refused at the end of the wait.
        #expect(expire(&slots, 3, clock.now) == .refuseFull)
        slots.use(2, .idle, now: clock.now)
        clock.advance(.milliseconds(100))
        slots.use(1, .idle, now: clock.now)
        #expect(accept(&slots, 4, "b", clock.now) == .wait)
        clock.advance(.seconds(2))
        // Answered 2 s ago: in use.
        #expect(expire(&slots, 4, clock.now) == .refuseFull)
        clock.advance(.seconds(8))
        #expect(accept(&slots, 5, "b", clock.now) == .wait)
        // Idle 10 s: 2, idle longest, makes room.
        #expect(expire(&slots, 5, clock.now) == .admitEvicting(2))
        #expect(slots.count == 2 && slots.waitingCount == 0)
    }

    /// Hostile round 5, item 1: a slow reader taking a 118 KB answer was closed for a newcomer after
    /// 16 KB (a stream in the sending phase counted as idle). A sender makes room only when it stalls, or
    /// when it has been sending past the bound while the listener is full.
    @Test func aSenderMakesRoomOnlyWhenItStallsOrPassesTheBound() {
        var slots = ConnectionSlots<Int>(limit: 1)
        var clock = Clock()
        #expect(accept(&slots, 1, "reader", clock.now) == .admit)
        slots.use(1, .busy, now: clock.now)
        slots.use(1, .sending, now: clock.now)
        #expect(!slots.isIdle(1))
        // Progress every second: never stalled, until the whole answer has taken 30 s.
        for second in 1...29 {
            clock.advance(.seconds(1))
            slots.progress(1, now: clock.now)
            #expect(accept(&slots, 100 + second, "new", clock.now) == .wait)
            #expect(expire(&slots, 100 + second, clock.now) == .refuseFull)
        }
        clock.advance(.seconds(1))
        #expect(accept(&slots, 200, "new", clock.now) == .wait)
        #expect(expire(&slots, 200, clock.now) == .admitEvicting(1))
        // A stalled one: no progress for 2 s.
        slots.use(200, .busy, now: clock.now)
        slots.use(200, .sending, now: clock.now)
        clock.advance(.seconds(1))
        #expect(accept(&slots, 201, "new", clock.now) == .wait)
        #expect(expire(&slots, 201, clock.now) == .refuseFull)
        clock.advance(.seconds(1))
        #expect(accept(&slots, 202, "new", clock.now) == .wait)
        #expect(expire(&slots, 202, clock.now) == .admitEvicting(200))
    }

    @Test func aWaitingNewcomerCountsForItsClientUntilItsWaitEnds() {
        var slots = ConnectionSlots<Int>(limit: 1, maxPerClient: 1)
        let clock = Clock()
        #expect(accept(&slots, 1, "a", clock.now) == .admit)
        slots.use(1, .busy, now: clock.now)
        #expect(accept(&slots, 2, "b", clock.now) == .wait)
        #expect(accept(&slots, 3, "b", clock.now) == .refuseClientLimit)
        // Given up (closed while waiting): "b" may come again.
        slots.closed(2, now: clock.now)
        #expect(accept(&slots, 4, "b", clock.now) == .wait)
    }

    @Test func aHeadStillArrivingCountsAsIdle() {
        // Accepted and never busy: a TLS handshake in progress, a head still coming, nothing sent.
        var slots = ConnectionSlots<Int>(limit: 1)
        var clock = Clock()
        #expect(accept(&slots, 1, "a", clock.now) == .admit)
        #expect(slots.isIdle(1))
        clock.advance(.seconds(1))
        #expect(accept(&slots, 2, "a", clock.now) == .admitEvicting(1))
    }

    @Test func oneClientAddressIsCapped() {
        var slots = ConnectionSlots<Int>(limit: 10, maxPerClient: 2)
        let clock = Clock()
        #expect(accept(&slots, 1, "a", clock.now) == .admit)
        #expect(accept(&slots, 2, "a", clock.now) == .admit)
        #expect(accept(&slots, 3, "a", clock.now) == .refuseClientLimit)
        #expect(accept(&slots, 4, "b", clock.now) == .admit)
        slots.closed(1, now: clock.now)
        #expect(accept(&slots, 5, "a", clock.now) == .admit)
    }

    @Test func anEvictedConnectionNoLongerCountsForItsClient() {
        var slots = ConnectionSlots<Int>(limit: 2, maxPerClient: 1)
        var clock = Clock()
        #expect(accept(&slots, 1, "a", clock.now) == .admit)
        clock.advance(.milliseconds(100))
        #expect(accept(&slots, 2, "b", clock.now) == .admit)
        clock.advance(.seconds(1))
        #expect(accept(&slots, 3, "c", clock.now) == .admitEvicting(1))
        // 1 is gone (its close, reported later, changes nothing), so "a" may come back.
        slots.closed(1, now: clock.now)
        #expect(accept(&slots, 4, "a", clock.now) == .admitEvicting(2))
        #expect(slots.count == 2)
    }
}

/// `slots.accepted(id, client:now:)`, outside `#expect` (which cannot call a mutating method).
private func accept(_ slots: inout ConnectionSlots<Int>, _ id: Int, _ client: String, _ now: NIODeadline)
    -> ConnectionSlots<Int>.Admission
{
    slots.accepted(id, client: client, now: now)
}

/// `slots.waitExpired(id, now:)`, outside `#expect`.
private func expire(_ slots: inout ConnectionSlots<Int>, _ id: Int, _ now: NIODeadline)
    -> ConnectionSlots<Int>.WaitEnd?
{
    slots.waitExpired(id, now: now)
}
