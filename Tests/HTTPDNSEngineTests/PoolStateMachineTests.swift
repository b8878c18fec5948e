// The pool's rules, event by event, without a socket or a clock: requests and connections are numbers,
// time is a deadline the test moves.

@testable import HTTPDNSEngine
import NIOCore
import Testing

@Suite struct PoolStateMachineTests {
    typealias Action = PoolStateMachine.Action

    static let https = PoolKey(scheme: "https", host: "a.test", port: 443, versions: .automatic, h2c: false)
    static let http = PoolKey(scheme: "http", host: "a.test", port: 80, versions: .automatic, h2c: false)
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func machine(connections: Int = 2, streams: Int = 2, idle: TimeAmount = .seconds(60)) -> PoolStateMachine {
        PoolStateMachine(
            limits: .init(maxConnectionsPerHost: connections, maxConcurrentStreams: streams, idleTimeout: idle)
        )
    }

    /// Opens one connection for a first request and reports it made with `version`.
    func open(_ m: inout PoolStateMachine, _ key: PoolKey, request: Int, version: HTTPVersionUsed) -> Int {
        guard case .connect(let conn) = m.request(request, key: key) else {
            Issue.record("request \(request) did not connect")
            return -1
        }
        _ = m.connected(conn, version: version)
        return conn
    }

    /// Two concurrent plain-HTTP requests, each on the connection it opened (1 and 2).
    func twoHTTPConnectionsInUse() -> PoolStateMachine {
        var m = machine(connections: 2)
        #expect(m.request(1, key: Self.http) == .connect(1))
        #expect(m.request(2, key: Self.http) == .connect(2))
        _ = m.connected(1, version: .http1)
        _ = m.connected(2, version: .http1)
        return m
    }

    // MARK: HTTP/1.1

    @Test func plainHTTPConnectsAndReusesTheIdleConnection() {
        var m = machine()
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.released(conn, reusable: true, now: Self.t0) == [.scheduleIdleTimer(conn, after: .seconds(60))])
        #expect(m.request(2, key: Self.http) == .run(on: conn))
        // Its timer is still armed: the next release arms none.
        #expect(m.released(conn, reusable: true, now: Self.t0) == [])
    }

    @Test func aSecondConcurrentHTTPRequestOpensItsOwnUpToTheLimitThenWaits() {
        var m = machine(connections: 2)
        #expect(m.request(1, key: Self.http) == .connect(1))
        #expect(m.request(2, key: Self.http) == .connect(2))
        #expect(m.request(3, key: Self.http) == .wait)
        #expect(m.connected(1, version: .http1) == [])
        // The released connection goes straight to the waiter, no idle timer.
        #expect(m.released(1, reusable: true, now: Self.t0) == [.run(3, on: 1)])
    }

    @Test func aConnectionThatCannotBeReusedIsClosedAndCountsUntilItHasClosed() {
        var m = machine(connections: 1)
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http) == .wait)
        #expect(m.released(conn, reusable: false, now: Self.t0) == [.close(conn)])
        #expect(m.openConnections == 1)
        // Once it has closed, the waiter opens a new one.
        #expect(m.closed(conn) == [.connect(2, conn + 1)])
    }

    @Test func theLastReleasedIdleConnectionIsUsedFirst() {
        var m = twoHTTPConnectionsInUse()
        _ = m.released(1, reusable: true, now: Self.t0)
        _ = m.released(2, reusable: true, now: Self.t0)
        #expect(m.request(3, key: Self.http) == .run(on: 2))
    }

    // MARK: HTTP/2 and ALPN

    @Test func concurrentFirstHTTPSRequestsWaitForOneConnectionAndShareIt() {
        var m = machine(connections: 4, streams: 3)
        #expect(m.request(1, key: Self.https) == .connect(1))
        #expect(m.request(2, key: Self.https) == .wait)
        #expect(m.request(3, key: Self.https) == .wait)
        #expect(m.request(4, key: Self.https) == .wait)
        // h2 with 3 streams: the creator and two waiters; the third waits for a stream to end.
        #expect(m.connected(1, version: .http2) == [.run(2, on: 1), .run(3, on: 1)])
        #expect(m.released(1, reusable: false, now: Self.t0) == [.run(4, on: 1)])
        #expect(m.request(5, key: Self.https) == .wait)
        #expect(m.openConnections == 1)
    }

    @Test func anHTTP1OnlyHTTPSHostFillsItsLimitInParallelOnceALPNHasSaidSo() {
        var m = machine(connections: 4)
        #expect(m.request(1, key: Self.https) == .connect(1))
        #expect(m.request(2, key: Self.https) == .wait)
        #expect(m.request(3, key: Self.https) == .wait)
        #expect(m.request(4, key: Self.https) == .wait)
        #expect(m.request(5, key: Self.https) == .wait)
        // ALPN chose http/1.1: the waiters open their own, up to the limit of 4.
        #expect(m.connected(1, version: .http1) == [.connect(2, 2), .connect(3, 3), .connect(4, 4)])
        #expect(m.learnedProtocol(Self.https) == .http1)
        _ = m.connected(2, version: .http1)
        _ = m.connected(3, version: .http1)
        _ = m.connected(4, version: .http1)
        #expect(m.released(1, reusable: true, now: Self.t0) == [.run(5, on: 1)])
        // Remembered after the host is dropped: a later burst opens in parallel from the start.
        for conn in 1...4 { _ = m.released(conn, reusable: false, now: Self.t0) }
        for conn in 1...4 { _ = m.closed(conn) }
        #expect(m.hosts.isEmpty)
        #expect(m.request(6, key: Self.https) == .connect(5))
        #expect(m.request(7, key: Self.https) == .connect(6))
    }

    @Test func anHTTP1OnlyPolicyNeverWaitsForAPossibleHTTP2Connection() {
        var m = machine(connections: 2)
        let key = PoolKey(scheme: "https", host: "a.test", port: 443, versions: .http1Only, h2c: false)
        #expect(m.request(1, key: key) == .connect(1))
        #expect(m.request(2, key: key) == .connect(2))
    }

    @Test func ofTwoHTTP2ConnectionsThatRacedOneTakesStreamsTheOtherClosesAfterItsOwn() {
        var m = machine(connections: 3)
        let key = PoolKey(scheme: "http", host: "a.test", port: 80, versions: .automatic, h2c: true)
        // Learned as HTTP/1.1, so the next two connect in parallel; both come up as h2.
        _ = open(&m, key, request: 1, version: .http1)
        #expect(m.request(2, key: key) == .connect(2))
        #expect(m.request(3, key: key) == .connect(3))
        #expect(m.connected(2, version: .http2) == [])
        #expect(m.connected(3, version: .http2) == [])
        #expect(m.request(4, key: key) == .run(on: 2))
        #expect(m.released(3, reusable: false, now: Self.t0) == [.close(3)])
    }

    // MARK: Failures

    @Test func aFailedFirstConnectFailsTheRequestsWaitingForIt() {
        var m = machine(connections: 4)
        #expect(m.request(1, key: Self.https) == .connect(1))
        #expect(m.request(2, key: Self.https) == .wait)
        #expect(m.request(3, key: Self.https) == .wait)
        #expect(m.connectFailed(1) == [.fail(2, .connectFailed(1)), .fail(3, .connectFailed(1))])
        #expect(m.hosts.isEmpty)
    }

    @Test func aFailedConnectLetsAWaiterTryWhileOtherConnectionsExist() {
        var m = machine(connections: 2)
        let first = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http) == .connect(2))
        #expect(m.request(3, key: Self.http) == .wait)
        #expect(m.connectFailed(2) == [.connect(3, 3)])
        #expect(first == 1)
    }

    @Test func aWaiterThatTimesOutOrIsCancelledIsFailedOnce() {
        var m = machine(connections: 1)
        _ = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http) == .wait)
        #expect(m.request(3, key: Self.http) == .wait)
        #expect(m.waiterGaveUp(2, .timedOut) == [.fail(2, .timedOut)])
        #expect(m.waiterGaveUp(2, .cancelled) == [])
        // The connection skips the one that left.
        #expect(m.released(1, reusable: true, now: Self.t0) == [.run(3, on: 1)])
        // Given a connection already: giving up now changes nothing.
        #expect(m.waiterGaveUp(3, .cancelled) == [])
    }

    // MARK: Idle timeout

    @Test func theIdleTimerClosesAfterTheWholeTimeoutAndReArmsForTheTimeLeft() {
        var m = machine(idle: .seconds(60))
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.released(conn, reusable: true, now: Self.t0) == [.scheduleIdleTimer(conn, after: .seconds(60))])
        // Used again 10 s later and back at 20 s: at 60 s it has been idle 40 s, 20 s are left.
        #expect(m.request(2, key: Self.http) == .run(on: conn))
        #expect(m.released(conn, reusable: true, now: Self.t0 + .seconds(20)) == [])
        #expect(m.idleTimerFired(conn, now: Self.t0 + .seconds(60)) == [.scheduleIdleTimer(conn, after: .seconds(20))])
        #expect(m.idleTimerFired(conn, now: Self.t0 + .seconds(80)) == [.close(conn)])
        // Closing: no request gets it.
        #expect(m.request(3, key: Self.http) == .connect(2))
    }

    @Test func theIdleTimerStandsDownWhileTheConnectionIsInUse() {
        var m = machine()
        let conn = open(&m, Self.http, request: 1, version: .http1)
        _ = m.released(conn, reusable: true, now: Self.t0)
        #expect(m.request(2, key: Self.http) == .run(on: conn))
        #expect(m.idleTimerFired(conn, now: Self.t0 + .seconds(60)) == [])
        // Disarmed: its next release arms it again.
        #expect(
            m.released(conn, reusable: true, now: Self.t0 + .seconds(61)) == [
                .scheduleIdleTimer(conn, after: .seconds(60))
            ]
        )
    }

    // MARK: Network change and shutdown

    @Test func aNetworkChangeClosesIdleConnectionsAndBusyOnesWhenTheirWorkEnds() {
        var m = twoHTTPConnectionsInUse()
        _ = m.released(1, reusable: true, now: Self.t0)
        #expect(m.networkChanged() == [.close(1)])
        #expect(m.released(2, reusable: true, now: Self.t0) == [.close(2)])
        // Both still count until they have closed; a new request waits, then connects on the new path.
        #expect(m.request(3, key: Self.http) == .wait)
        #expect(m.closed(1) == [.connect(3, 3)])
    }

    @Test func aNetworkChangeDrainsABusyHTTP2Connection() {
        var m = machine(connections: 2, streams: 10)
        let conn = open(&m, Self.https, request: 1, version: .http2)
        #expect(m.request(2, key: Self.https) == .run(on: conn))
        #expect(m.networkChanged() == [])
        // No new stream on it: a new request opens a new connection.
        #expect(m.request(3, key: Self.https) == .connect(2))
        #expect(m.released(conn, reusable: false, now: Self.t0) == [])
        #expect(m.released(conn, reusable: false, now: Self.t0) == [.close(conn)])
    }

    @Test func aGOAWAYRetiresTheHTTP2ConnectionAndWaitersGetANewOne() {
        var m = machine(connections: 2, streams: 2)
        let conn = open(&m, Self.https, request: 1, version: .http2)
        #expect(m.request(2, key: Self.https) == .run(on: conn))
        #expect(m.request(3, key: Self.https) == .wait)
        // No new stream on it: the waiter opens a new connection; the old one closes after its streams.
        #expect(m.goingAway(conn) == [.connect(3, 2)])
        #expect(m.released(conn, reusable: false, now: Self.t0) == [])
        #expect(m.released(conn, reusable: false, now: Self.t0) == [.close(conn)])
        #expect(m.goingAway(conn) == [])
    }

    @Test func shutdownFailsWaitersWithShutdownAndLaterRequestsToo() {
        var m = machine(connections: 1)
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http) == .wait)
        #expect(m.shutdown() == [.fail(2, .shutdown)])
        #expect(m.request(3, key: Self.http) == .fail(.shutdown))
        // The connection in use closes when it comes back.
        #expect(m.released(conn, reusable: true, now: Self.t0) == [.close(conn)])
    }

    @Test func aConnectThatFinishesAfterShutdownIsClosedAndItsRequestFailed() {
        var m = machine()
        #expect(m.request(1, key: Self.http) == .connect(1))
        _ = m.shutdown()
        #expect(m.connected(1, version: .http1) == [.fail(1, .shutdown), .close(1)])
    }

    // MARK: Bounded state

    @Test func aHostWithNothingLeftIsDroppedAndALPNMemoryIsBounded() {
        var m = machine()
        for i in 0..<(PoolStateMachine.rememberedLimit + 10) {
            let key = PoolKey(scheme: "https", host: "h\(i).test", port: 443, versions: .automatic, h2c: false)
            let conn = open(&m, key, request: i, version: .http1)
            _ = m.released(conn, reusable: false, now: Self.t0)
            _ = m.closed(conn)
        }
        #expect(m.hosts.isEmpty)
        #expect(m.connections.isEmpty)
        let first = PoolKey(scheme: "https", host: "h0.test", port: 443, versions: .automatic, h2c: false)
        let last = PoolKey(
            scheme: "https",
            host: "h\(PoolStateMachine.rememberedLimit + 9).test",
            port: 443,
            versions: .automatic,
            h2c: false
        )
        #expect(m.learnedProtocol(first) == nil)
        #expect(m.learnedProtocol(last) == .http1)
    }

    @Test func eventsForUnknownConnectionsAndRequestsAreIgnored() {
        var m = machine()
        #expect(m.released(42, reusable: true, now: Self.t0) == [])
        #expect(m.closed(42) == [])
        #expect(m.idleTimerFired(42, now: Self.t0) == [])
        #expect(m.connectFailed(42) == [])
        #expect(m.waiterGaveUp(42, .cancelled) == [])
        #expect(m.hosts.isEmpty)
    }
}
