// The pool's rules, event by event, without a socket or a clock: requests and connections are numbers,
// time is a deadline the test moves.

@testable import HTTPDNSEngine
import NIOCore
import Testing

@Suite struct PoolStateMachineTests {
    typealias Action = PoolStateMachine.Action
    typealias Connect = PoolStateMachine.Connect

    static let https = ConnectionProfile(
        origin: HTTPURL(scheme: "https", host: "a.test", port: 443),
        versions: .automatic,
        h2c: false
    )
    static let http = ConnectionProfile(
        origin: HTTPURL(scheme: "http", host: "a.test", port: 80),
        versions: .automatic,
        h2c: false
    )
    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func machine(connections: Int = 2, streams: Int = 2, idle: TimeAmount = .seconds(60)) -> PoolStateMachine {
        PoolStateMachine(
            limits: .init(maxConnectionsPerHost: connections, maxConcurrentStreams: streams, idleTimeout: idle)
        )
    }

    /// The connect the pool opens for `key`, on behalf of request `request`'s recipe.
    func connect(_ conn: Int, _ key: ConnectionProfile, for request: Int, deadline: NIODeadline? = nil) -> Connect {
        Connect(connection: conn, key: key, forRequest: request, deadline: deadline)
    }

    /// Opens one connection for a first request, reports it made with `version`, and checks the request
    /// runs on it.
    func open(_ m: inout PoolStateMachine, _ key: ConnectionProfile, request: Int, version: HTTPVersionUsed) -> Int {
        guard case .wait(let connect?) = m.request(request, key: key, deadline: nil) else {
            Issue.record("request \(request) did not make the pool connect")
            return -1
        }
        let conn = connect.connection
        #expect(m.connected(conn, version: version, now: Self.t0) == [.run(request, on: conn)])
        return conn
    }

    /// Two concurrent plain-HTTP requests, each on a connection of its own (1 and 2).
    func twoHTTPConnectionsInUse() -> PoolStateMachine {
        var m = machine(connections: 2)
        #expect(m.request(1, key: Self.http, deadline: nil) == .wait(connect: connect(1, Self.http, for: 1)))
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: connect(2, Self.http, for: 1)))
        #expect(m.connected(1, version: .http1, now: Self.t0) == [.run(1, on: 1)])
        #expect(m.connected(2, version: .http1, now: Self.t0) == [.run(2, on: 2)])
        return m
    }

    // MARK: HTTP/1.1

    @Test func plainHTTPConnectsAndReusesTheIdleConnection() {
        var m = machine()
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.released(conn, reusable: true, now: Self.t0) == [.scheduleIdleTimer(conn, after: .seconds(60))])
        #expect(m.request(2, key: Self.http, deadline: nil) == .run(on: conn))
        // Its timer is still armed: the next release arms none.
        #expect(m.released(conn, reusable: true, now: Self.t0) == [])
    }

    @Test func concurrentHTTPRequestsGetAConnectEachUpToTheLimitThenWait() {
        var m = machine(connections: 2)
        #expect(m.request(1, key: Self.http, deadline: nil) == .wait(connect: connect(1, Self.http, for: 1)))
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: connect(2, Self.http, for: 1)))
        #expect(m.request(3, key: Self.http, deadline: nil) == .wait(connect: nil))
        // Each new connection serves the oldest waiter.
        #expect(m.connected(1, version: .http1, now: Self.t0) == [.run(1, on: 1)])
        #expect(m.connected(2, version: .http1, now: Self.t0) == [.run(2, on: 2)])
        // The released connection goes straight to the waiter, no idle timer.
        #expect(m.released(1, reusable: true, now: Self.t0) == [.run(3, on: 1)])
    }

    @Test func aKeyWithItsOwnLowerLimitGetsNoMoreConnectionsThanThat() {
        // A URLSession configuration with httpMaximumConnectionsPerHost = 1, under an engine limit of 4.
        var m = machine(connections: 4)
        var one = Self.http
        one.terms.connectionLimit = 1
        #expect(m.request(1, key: one, deadline: nil) == .wait(connect: connect(1, one, for: 1)))
        #expect(m.request(2, key: one, deadline: nil) == .wait(connect: nil))
        #expect(m.connected(1, version: .http1, now: Self.t0) == [.run(1, on: 1)])
        #expect(m.released(1, reusable: true, now: Self.t0) == [.run(2, on: 1)])
        // Requests without the lower limit are another key: the engine's limit holds for them.
        #expect(m.request(3, key: Self.http, deadline: nil) == .wait(connect: connect(2, Self.http, for: 3)))
        #expect(m.request(4, key: Self.http, deadline: nil) == .wait(connect: connect(3, Self.http, for: 3)))
    }

    @Test func aConnectionThatCannotBeReusedIsClosedAndCountsUntilItHasClosed() {
        var m = machine(connections: 1)
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: nil))
        #expect(m.released(conn, reusable: false, now: Self.t0) == [.close(conn)])
        #expect(m.openConnections == 1)
        // Once it has closed, the pool opens a new one for the waiter.
        #expect(m.closed(conn) == [.connect(connect(conn + 1, Self.http, for: 2))])
    }

    @Test func theLastReleasedIdleConnectionIsUsedFirst() {
        var m = twoHTTPConnectionsInUse()
        _ = m.released(1, reusable: true, now: Self.t0)
        _ = m.released(2, reusable: true, now: Self.t0)
        #expect(m.request(3, key: Self.http, deadline: nil) == .run(on: 2))
    }

    // MARK: HTTP/2 and ALPN

    @Test func concurrentFirstHTTPSRequestsWaitForOneConnectionAndShareIt() {
        var m = machine(connections: 4, streams: 3)
        #expect(m.request(1, key: Self.https, deadline: nil) == .wait(connect: connect(1, Self.https, for: 1)))
        for request in 2...4 { #expect(m.request(request, key: Self.https, deadline: nil) == .wait(connect: nil)) }
        // h2 with 3 streams: the three oldest run; the fourth waits for a stream to end.
        #expect(m.connected(1, version: .http2, now: Self.t0) == [.run(1, on: 1), .run(2, on: 1), .run(3, on: 1)])
        #expect(m.released(1, reusable: false, now: Self.t0) == [.run(4, on: 1)])
        #expect(m.request(5, key: Self.https, deadline: nil) == .wait(connect: nil))
        #expect(m.openConnections == 1)
    }

    @Test func anHTTP1OnlyHTTPSHostFillsItsLimitInParallelOnceALPNHasSaidSo() {
        var m = machine(connections: 4)
        #expect(m.request(1, key: Self.https, deadline: nil) == .wait(connect: connect(1, Self.https, for: 1)))
        for request in 2...5 { #expect(m.request(request, key: Self.https, deadline: nil) == .wait(connect: nil)) }
        // ALPN chose http/1.1: the pool opens connections for the waiters, up to the limit of 4.
        #expect(
            m.connected(1, version: .http1, now: Self.t0) == [
                .run(1, on: 1),
                .connect(connect(2, Self.https, for: 2)),
                .connect(connect(3, Self.https, for: 2)),
                .connect(connect(4, Self.https, for: 2)),
            ]
        )
        #expect(m.learnedProtocol(Self.https) == .http1)
        #expect(m.connected(2, version: .http1, now: Self.t0) == [.run(2, on: 2)])
        #expect(m.connected(3, version: .http1, now: Self.t0) == [.run(3, on: 3)])
        #expect(m.connected(4, version: .http1, now: Self.t0) == [.run(4, on: 4)])
        #expect(m.released(1, reusable: true, now: Self.t0) == [.run(5, on: 1)])
        // Remembered after the host is dropped: a later burst opens in parallel from the start.
        for conn in 1...4 { _ = m.released(conn, reusable: false, now: Self.t0) }
        for conn in 1...4 { _ = m.closed(conn) }
        #expect(m.hosts.isEmpty)
        #expect(m.request(6, key: Self.https, deadline: nil) == .wait(connect: connect(5, Self.https, for: 6)))
        #expect(m.request(7, key: Self.https, deadline: nil) == .wait(connect: connect(6, Self.https, for: 6)))
    }

    @Test func anHTTP1OnlyPolicyNeverWaitsForAPossibleHTTP2Connection() {
        var m = machine(connections: 2)
        let key = ConnectionProfile(
            origin: HTTPURL(scheme: "https", host: "a.test", port: 443),
            versions: .http1Only,
            h2c: false
        )
        #expect(m.request(1, key: key, deadline: nil) == .wait(connect: connect(1, key, for: 1)))
        #expect(m.request(2, key: key, deadline: nil) == .wait(connect: connect(2, key, for: 1)))
    }

    @Test func ofTwoHTTP2ConnectionsThatRacedTheFirstTakesTheStreamsAndTheSecondCloses() {
        var m = machine(connections: 3)
        let key = ConnectionProfile(
            origin: HTTPURL(scheme: "http", host: "a.test", port: 80),
            versions: .automatic,
            h2c: true
        )
        // Learned as HTTP/1.1, so the next two connect in parallel; both come up as h2.
        _ = open(&m, key, request: 1, version: .http1)
        #expect(m.request(2, key: key, deadline: nil) == .wait(connect: connect(2, key, for: 2)))
        #expect(m.request(3, key: key, deadline: nil) == .wait(connect: connect(3, key, for: 2)))
        #expect(m.connected(2, version: .http2, now: Self.t0) == [.run(2, on: 2), .run(3, on: 2)])
        #expect(m.connected(3, version: .http2, now: Self.t0) == [.close(3)])
        #expect(m.released(2, reusable: false, now: Self.t0) == [])
        #expect(m.request(4, key: key, deadline: nil) == .run(on: 2))
    }

    // MARK: Failed connects

    @Test func aFailureARetryCannotFixFailsEveryWaiterAtOnce() {
        var m = machine(connections: 4)
        #expect(m.request(1, key: Self.https, deadline: nil) == .wait(connect: connect(1, Self.https, for: 1)))
        #expect(m.request(2, key: Self.https, deadline: nil) == .wait(connect: nil))
        #expect(m.request(3, key: Self.https, deadline: nil) == .wait(connect: nil))
        #expect(
            m.connectFailed(1, retryMayHelp: false, now: Self.t0) == [
                .fail(1, .connectFailed(1)), .fail(2, .connectFailed(1)), .fail(3, .connectFailed(1)),
            ]
        )
        #expect(m.hosts.isEmpty)
    }

    @Test func aConnectARetryMayFixIsTriedAgainAfterABackoffForEveryWaiter() {
        var m = machine(connections: 4, streams: 3)
        let late = Self.t0 + .seconds(5)
        #expect(
            m.request(1, key: Self.https, deadline: late)
                == .wait(connect: connect(1, Self.https, for: 1, deadline: late))
        )
        #expect(m.request(2, key: Self.https, deadline: late) == .wait(connect: nil))
        // A reset handshake: nobody fails; the host waits before it connects again.
        #expect(
            m.connectFailed(1, retryMayHelp: true, now: Self.t0) == [
                .scheduleConnectRetry(Self.https, after: .milliseconds(100))
            ]
        )
        // A request that comes during the backoff waits for the retry too.
        #expect(m.request(3, key: Self.https, deadline: Self.t0 + .seconds(1)) == .wait(connect: nil))
        #expect(m.connectRetryDue(Self.https) == [.connect(connect(2, Self.https, for: 1, deadline: late))])
        #expect(m.connected(2, version: .http2, now: Self.t0) == [.run(1, on: 2), .run(2, on: 2), .run(3, on: 2)])
    }

    @Test func aConnectWhoseAskerWasCancelledFailsNobodyAndTheNextWaiterConnectsAtOnce() {
        // Request 1 opens the connect and answers its certificate question; 2 and 3 wait for it. 1 is
        // cancelled during the handshake (an image load scrolled away): 2 and 3 must not fail with it.
        var m = machine(connections: 4, streams: 3)
        #expect(m.request(1, key: Self.https, deadline: nil) == .wait(connect: connect(1, Self.https, for: 1)))
        #expect(m.request(2, key: Self.https, deadline: nil) == .wait(connect: nil))
        #expect(m.request(3, key: Self.https, deadline: nil) == .wait(connect: nil))
        #expect(m.waiterGaveUp(1, .cancelled) == [.fail(1, .cancelled)])
        // No backoff, no attempt counted: a connect at once, with 2's recipe (2 answers its question).
        #expect(m.connectLostItsAsker(1) == [.connect(connect(2, Self.https, for: 2))])
        #expect(m.connected(2, version: .http2, now: Self.t0) == [.run(2, on: 2), .run(3, on: 2)])
        // Three lost askers in a row are no three failures: the host still has its attempts.
        var n = machine(connections: 4, streams: 3)
        _ = n.request(1, key: Self.https, deadline: nil)
        for lost in 1...3 {
            _ = n.request(lost + 1, key: Self.https, deadline: nil)
            _ = n.waiterGaveUp(lost, .cancelled)
            #expect(n.connectLostItsAsker(lost) == [.connect(connect(lost + 1, Self.https, for: lost + 1))])
        }
        #expect(n.hosts[Self.https]?.failedConnects == 0)
    }

    @Test func aWaiterWhoseDeadlineComesBeforeTheNextTryFailsNowWithTheConnectError() {
        var m = machine()
        _ = m.request(1, key: Self.https, deadline: Self.t0 + .milliseconds(50))
        _ = m.request(2, key: Self.https, deadline: Self.t0 + .seconds(5))
        #expect(
            m.connectFailed(1, retryMayHelp: true, now: Self.t0) == [
                .fail(1, .connectFailed(1)), .scheduleConnectRetry(Self.https, after: .milliseconds(100)),
            ]
        )
    }

    @Test func theBackoffDoublesAndTheTriesInARowAreBounded() {
        var m = machine()
        #expect(m.request(1, key: Self.https, deadline: nil) == .wait(connect: connect(1, Self.https, for: 1)))
        #expect(
            m.connectFailed(1, retryMayHelp: true, now: Self.t0) == [
                .scheduleConnectRetry(Self.https, after: .milliseconds(100))
            ]
        )
        #expect(m.connectRetryDue(Self.https) == [.connect(connect(2, Self.https, for: 1))])
        #expect(
            m.connectFailed(2, retryMayHelp: true, now: Self.t0) == [
                .scheduleConnectRetry(Self.https, after: .milliseconds(200))
            ]
        )
        #expect(m.connectRetryDue(Self.https) == [.connect(connect(3, Self.https, for: 1))])
        // The third failure in a row (`connectAttempts`): the waiter fails with it.
        #expect(m.connectFailed(3, retryMayHelp: true, now: Self.t0) == [.fail(1, .connectFailed(3))])
        #expect(m.hosts.isEmpty)
        // A later request starts a new round.
        #expect(m.request(2, key: Self.https, deadline: nil) == .wait(connect: connect(4, Self.https, for: 2)))
        #expect(
            m.connectFailed(4, retryMayHelp: true, now: Self.t0) == [
                .scheduleConnectRetry(Self.https, after: .milliseconds(100))
            ]
        )
    }

    @Test func afterAFinalFailureWaitersWaitForAnOpenConnection() {
        var m = machine(connections: 2)
        let first = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: connect(2, Self.http, for: 2)))
        #expect(m.request(3, key: Self.http, deadline: nil) == .wait(connect: nil))
        #expect(m.connectFailed(2, retryMayHelp: false, now: Self.t0) == [])
        // The open one serves the oldest when released; the next may connect again.
        #expect(
            m.released(first, reusable: true, now: Self.t0) == [
                .run(2, on: first), .connect(connect(3, Self.http, for: 3)),
            ]
        )
    }

    @Test func parallelConnectsThatFailForGoodEachFailOneWaiterOldestFirst() {
        // A refused HTTP/1.1 host with a connect per waiter: no connect storm, one failure each.
        var m = machine(connections: 4)
        #expect(m.request(1, key: Self.http, deadline: nil) == .wait(connect: connect(1, Self.http, for: 1)))
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: connect(2, Self.http, for: 1)))
        #expect(m.connectFailed(1, retryMayHelp: false, now: Self.t0) == [.fail(1, .connectFailed(1))])
        #expect(m.connectFailed(2, retryMayHelp: false, now: Self.t0) == [.fail(2, .connectFailed(2))])
        #expect(m.hosts.isEmpty)
    }

    @Test func aResetAmongParallelConnectsWaitsItsBackoffBeforeConnectingAgain() {
        var m = machine(connections: 4)
        _ = m.request(1, key: Self.http, deadline: nil)
        _ = m.request(2, key: Self.http, deadline: nil)
        // One of two connects reset: the other still covers one waiter, the backoff covers the other.
        #expect(
            m.connectFailed(1, retryMayHelp: true, now: Self.t0) == [
                .scheduleConnectRetry(Self.http, after: .milliseconds(100))
            ]
        )
        #expect(m.connected(2, version: .http1, now: Self.t0) == [.run(1, on: 2)])
        #expect(m.connectRetryDue(Self.http) == [.connect(connect(3, Self.http, for: 2))])
    }

    @Test func aWaiterThatTimesOutOrIsCancelledIsFailedOnce() {
        var m = machine(connections: 1)
        _ = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: nil))
        #expect(m.request(3, key: Self.http, deadline: nil) == .wait(connect: nil))
        #expect(m.waiterGaveUp(2, .timedOut) == [.fail(2, .timedOut)])
        #expect(m.waiterGaveUp(2, .cancelled) == [])
        // The connection skips the one that left.
        #expect(m.released(1, reusable: true, now: Self.t0) == [.run(3, on: 1)])
        // Given a connection already: giving up now changes nothing.
        #expect(m.waiterGaveUp(3, .cancelled) == [])
    }

    @Test func aConnectGoesOnWhenItsWaiterLeavesAndBecomesAnIdleConnection() {
        var m = machine()
        #expect(
            m.request(1, key: Self.http, deadline: Self.t0)
                == .wait(connect: connect(1, Self.http, for: 1, deadline: Self.t0))
        )
        #expect(m.waiterGaveUp(1, .timedOut) == [.fail(1, .timedOut)])
        #expect(m.connected(1, version: .http1, now: Self.t0) == [.scheduleIdleTimer(1, after: .seconds(60))])
        #expect(m.request(2, key: Self.http, deadline: nil) == .run(on: 1))
    }

    // MARK: Idle timeout

    @Test func theIdleTimerClosesAfterTheWholeTimeoutAndReArmsForTheTimeLeft() {
        var m = machine(idle: .seconds(60))
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.released(conn, reusable: true, now: Self.t0) == [.scheduleIdleTimer(conn, after: .seconds(60))])
        // Used again 10 s later and back at 20 s: at 60 s it has been idle 40 s, 20 s are left.
        #expect(m.request(2, key: Self.http, deadline: nil) == .run(on: conn))
        #expect(m.released(conn, reusable: true, now: Self.t0 + .seconds(20)) == [])
        #expect(m.idleTimerFired(conn, now: Self.t0 + .seconds(60)) == [.scheduleIdleTimer(conn, after: .seconds(20))])
        #expect(m.idleTimerFired(conn, now: Self.t0 + .seconds(80)) == [.close(conn)])
        // Closing: no request gets it.
        #expect(m.request(3, key: Self.http, deadline: nil) == .wait(connect: connect(2, Self.http, for: 3)))
    }

    @Test func theIdleTimerStandsDownWhileTheConnectionIsInUse() {
        var m = machine()
        let conn = open(&m, Self.http, request: 1, version: .http1)
        _ = m.released(conn, reusable: true, now: Self.t0)
        #expect(m.request(2, key: Self.http, deadline: nil) == .run(on: conn))
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
        #expect(m.request(3, key: Self.http, deadline: nil) == .wait(connect: nil))
        #expect(m.closed(1) == [.connect(connect(3, Self.http, for: 3))])
    }

    @Test func aNetworkChangeDrainsABusyHTTP2Connection() {
        var m = machine(connections: 2, streams: 10)
        let conn = open(&m, Self.https, request: 1, version: .http2)
        #expect(m.request(2, key: Self.https, deadline: nil) == .run(on: conn))
        #expect(m.networkChanged() == [])
        // No new stream on it: a new request gets a new connection.
        #expect(m.request(3, key: Self.https, deadline: nil) == .wait(connect: connect(2, Self.https, for: 3)))
        #expect(m.released(conn, reusable: false, now: Self.t0) == [])
        #expect(m.released(conn, reusable: false, now: Self.t0) == [.close(conn)])
    }

    @Test func aGOAWAYRetiresTheHTTP2ConnectionAndWaitersGetANewOne() {
        var m = machine(connections: 2, streams: 2)
        let conn = open(&m, Self.https, request: 1, version: .http2)
        #expect(m.request(2, key: Self.https, deadline: nil) == .run(on: conn))
        #expect(m.request(3, key: Self.https, deadline: nil) == .wait(connect: nil))
        // No new stream on it: the pool opens a new connection; the old one closes after its streams.
        #expect(m.goingAway(conn) == [.connect(connect(2, Self.https, for: 3))])
        #expect(m.released(conn, reusable: false, now: Self.t0) == [])
        #expect(m.released(conn, reusable: false, now: Self.t0) == [.close(conn)])
        #expect(m.goingAway(conn) == [])
    }

    @Test func shutdownFailsWaitersWithShutdownAndLaterRequestsToo() {
        var m = machine(connections: 1)
        let conn = open(&m, Self.http, request: 1, version: .http1)
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: nil))
        #expect(m.shutdown() == [.fail(2, .shutdown)])
        #expect(m.request(3, key: Self.http, deadline: nil) == .fail(.shutdown))
        // The connection in use closes when it comes back.
        #expect(m.released(conn, reusable: true, now: Self.t0) == [.close(conn)])
    }

    @Test func aConnectThatFinishesAfterShutdownIsClosed() {
        var m = machine()
        #expect(m.request(1, key: Self.http, deadline: nil) == .wait(connect: connect(1, Self.http, for: 1)))
        #expect(m.shutdown() == [.fail(1, .shutdown)])
        #expect(m.connected(1, version: .http1, now: Self.t0) == [.close(1)])
        // A failed one after shutdown is not tried again.
        #expect(m.request(2, key: Self.http, deadline: nil) == .fail(.shutdown))
    }

    // MARK: Pre-connect

    /// A pre-connect's connect, which names no waiter and has no deadline.
    func preconnect(_ conn: Int, _ key: ConnectionProfile) -> Connect {
        Connect(connection: conn, key: key, forRequest: nil, deadline: nil)
    }

    @Test func aPreconnectOpensOneConnectionThatTheFirstRequestWaitsForAndRunsOn() {
        var m = machine()
        #expect(m.preconnect(Self.https) == preconnect(1, Self.https))
        // Asked again while it is on its way: nothing more.
        #expect(m.preconnect(Self.https) == nil)
        // The first request opens no connect of its own: the pre-connect covers it.
        #expect(m.request(1, key: Self.https, deadline: nil) == .wait(connect: nil))
        #expect(m.connected(1, version: .http2, now: Self.t0) == [.run(1, on: 1)])
        // Up and able to take a request: a pre-connect leaves it as it is.
        #expect(m.preconnect(Self.https) == nil)
    }

    @Test func anUnusedPreconnectedConnectionWaitsIdleAndClosesAfterTheIdleTimeout() {
        var m = machine(idle: .seconds(60))
        #expect(m.preconnect(Self.https) == preconnect(1, Self.https))
        #expect(m.connected(1, version: .http2, now: Self.t0) == [.scheduleIdleTimer(1, after: .seconds(60))])
        // A request that comes within the timeout runs on it, with no connect.
        #expect(m.request(1, key: Self.https, deadline: nil) == .run(on: 1))
        // Its last stream ended: idle again from then on (the armed timer re-arms for the time left).
        #expect(m.released(1, reusable: true, now: Self.t0 + .seconds(10)) == [])
        #expect(m.idleTimerFired(1, now: Self.t0 + .seconds(60)) == [.scheduleIdleTimer(1, after: .seconds(10))])
        #expect(m.idleTimerFired(1, now: Self.t0 + .seconds(70)) == [.close(1)])
        // Gone from the host: the next request connects again.
        #expect(m.request(2, key: Self.https, deadline: nil) == .wait(connect: connect(2, Self.https, for: 2)))
    }

    @Test func aPreconnectedHTTP1ConnectionIsIdleForTheFirstRequest() {
        var m = machine()
        #expect(m.preconnect(Self.http) == preconnect(1, Self.http))
        #expect(m.connected(1, version: .http1, now: Self.t0) == [.scheduleIdleTimer(1, after: .seconds(60))])
        #expect(m.request(1, key: Self.http, deadline: nil) == .run(on: 1))
        // Leased: a pre-connect now warms up a second one for the next request.
        #expect(m.preconnect(Self.http) == preconnect(2, Self.http))
    }

    @Test func aFailedPreconnectLeavesNothingBehind() {
        var m = machine()
        #expect(m.preconnect(Self.https) == preconnect(1, Self.https))
        #expect(m.connectFailed(1, retryMayHelp: true, now: Self.t0) == [])
        #expect(m.hosts.isEmpty)
        // The first request connects on its own.
        #expect(m.request(1, key: Self.https, deadline: nil) == .wait(connect: connect(2, Self.https, for: 1)))
    }

    @Test func aNetworkChangeConnectsAPreconnectedHostAgainButNotOthers() {
        var m = machine()
        var other = Self.https
        other.origin.host = "b.test"
        #expect(m.preconnect(Self.https) == preconnect(1, Self.https))
        _ = m.connected(1, version: .http2, now: Self.t0)
        let conn = open(&m, other, request: 1, version: .http2)
        #expect(m.released(conn, reusable: true, now: Self.t0) == [.scheduleIdleTimer(conn, after: .seconds(60))])
        // Both idle connections close; only the pre-connected host gets a new one, on the new network.
        let actions = m.networkChanged()
        #expect(Set(actions.compactMap { if case .close(let c) = $0 { c } else { nil } }) == [1, conn])
        #expect(
            actions.filter { if case .connect = $0 { true } else { false } } == [.connect(preconnect(3, Self.https))]
        )
    }

    /// A profile of `key`'s origin whose requests' app has a say on certificates, in `partition`.
    func partitioned(_ key: ConnectionProfile, _ partition: UInt64) -> ConnectionProfile {
        var partitioned = key
        partitioned.serverTrust = ServerTrustEvaluation(partition: partition, always: true) { _ in .accept }
        return partitioned
    }

    @Test func aRequestWithASayOnCertificatesAdoptsAPreconnectedConnectionNoRequestHasRunOn() {
        var m = machine()
        let session = partitioned(Self.https, 7)
        #expect(m.preconnect(Self.https) == preconnect(1, Self.https))
        _ = m.connected(1, version: .http2, now: Self.t0)
        // The session's first request: no connect of its own, the pre-connected one, asked about first.
        #expect(m.request(1, key: session, deadline: nil) == .adopt(1))
        #expect(m.hosts[Self.https] == nil && m.hosts[session]?.http2 == 1)
        // It is the session's now: its next requests run on it, asked nothing; others connect anew.
        #expect(m.request(2, key: session, deadline: nil) == .run(on: 1))
        #expect(m.request(3, key: Self.https, deadline: nil) == .wait(connect: connect(2, Self.https, for: 3)))
        #expect(m.request(4, key: partitioned(Self.https, 8), deadline: nil) != .adopt(1))
        // A connection a request has run on is no other partition's to adopt.
        var n = machine()
        let served = open(&n, Self.http, request: 1, version: .http1)
        _ = n.released(served, reusable: true, now: Self.t0)
        #expect(
            n.request(2, key: partitioned(Self.http, 7), deadline: nil)
                == .wait(connect: connect(2, partitioned(Self.http, 7), for: 2))
        )
        // Refused by the app (the executor retires and releases it): it closes, and serves nobody.
        var r = machine()
        let plain = partitioned(Self.http, 7)
        #expect(r.preconnect(Self.http) == preconnect(1, Self.http))
        _ = r.connected(1, version: .http1, now: Self.t0)
        #expect(r.request(1, key: plain, deadline: nil) == .adopt(1))
        #expect(r.goingAway(1) == [])
        #expect(r.released(1, reusable: false, now: Self.t0) == [.close(1)])
        #expect(r.request(2, key: plain, deadline: nil) == .wait(connect: connect(2, plain, for: 2)))
    }

    @Test func anIdleHTTP1ConnectionRetiredForAMovedAnswerIsNeverLeased() {
        var m = machine()
        let conn = open(&m, Self.http, request: 1, version: .http1)
        _ = m.released(conn, reusable: true, now: Self.t0)
        // Its address left the host's answer: it closes, and the next request connects anew.
        #expect(m.goingAway(conn) == [.close(conn)])
        #expect(m.request(2, key: Self.http, deadline: nil) == .wait(connect: connect(2, Self.http, for: 2)))
    }

    // MARK: Bounded state

    @Test func aHostWithNothingLeftIsDroppedAndALPNMemoryIsBounded() {
        var m = machine()
        for i in 0..<(PoolStateMachine.rememberedLimit + 10) {
            let key = ConnectionProfile(
                origin: HTTPURL(scheme: "https", host: "h\(i).test", port: 443),
                versions: .automatic,
                h2c: false
            )
            let conn = open(&m, key, request: i, version: .http1)
            _ = m.released(conn, reusable: false, now: Self.t0)
            _ = m.closed(conn)
        }
        #expect(m.hosts.isEmpty)
        #expect(m.connections.isEmpty)
        let first = ConnectionProfile(
            origin: HTTPURL(scheme: "https", host: "h0.test", port: 443),
            versions: .automatic,
            h2c: false
        )
        let last = ConnectionProfile(
            origin: HTTPURL(scheme: "https", host: "h\(PoolStateMachine.rememberedLimit + 9).test", port: 443)
        )
        #expect(m.learnedProtocol(first) == nil)
        #expect(m.learnedProtocol(last) == .http1)
    }

    @Test func eventsForUnknownConnectionsAndRequestsAreIgnored() {
        var m = machine()
        #expect(m.released(42, reusable: true, now: Self.t0) == [])
        #expect(m.closed(42) == [])
        #expect(m.idleTimerFired(42, now: Self.t0) == [])
        #expect(m.connectFailed(42, retryMayHelp: true, now: Self.t0) == [])
        #expect(m.connectRetryDue(Self.http) == [])
        #expect(m.waiterGaveUp(42, .cancelled) == [])
        #expect(m.hosts.isEmpty)
    }
}
