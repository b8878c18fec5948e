// The proxy's per-connection state machine, pure: every transition, fed in orders a real client sends
// and in orders only a hostile one (or a race with the event loop) produces. No channels, no clocks.

import HTTPDNSEngine
@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy
import NIOCore
import NIOHTTP1
import Testing

private typealias Machine = ProxyConnectionStateMachine
private typealias Reply = ProxyConnectionStateMachine.Reply

private func makeMachine(allowedPorts: Set<Int> = [443, 80], authorization: String? = nil) -> Machine {
    Machine(limits: .init(allowedPorts: allowedPorts, expectedAuthorization: authorization))
}

private func head(
    _ method: HTTPMethod,
    _ uri: String,
    _ headers: HTTPHeaders = [:],
    version: HTTPVersion = .http1_1
) -> HTTPRequestHead {
    HTTPRequestHead(version: version, method: method, uri: uri, headers: headers)
}

/// A machine that has read a whole CONNECT head and is connecting to `a.test:443`.
private func connectingMachine() -> Machine {
    var m = makeMachine()
    _ = m.headReceived(head(.CONNECT, "a.test:443"))
    return m
}

/// A machine forwarding `GET http://a.test/` (HTTP/1.1, keep-alive unless `headers` say otherwise).
private func forwardingMachine(_ headers: HTTPHeaders = [:], version: HTTPVersion = .http1_1) -> Machine {
    var m = makeMachine()
    _ = m.headReceived(head(.GET, "http://a.test/", headers, version: version))
    _ = m.endReceived()
    return m
}

@Suite struct ProxyConnectionStateMachineTests {
    // MARK: before a head

    @Test func headTimerBeforeAHeadAnswers408AndCloses() {
        var m = makeMachine()
        #expect(m.headTimerFired() == .reply(.bare(.requestTimeout)))
        #expect(m.state == .closed)
    }

    @Test func the408And431AreTheBytesTheProxyHasAlwaysSent() {
        // Written by the response encoder, these headers come out exactly as the old raw replies.
        #expect(Reply.bare(.requestTimeout).headers == ["Content-Length": "0", "Connection": "close"])
        #expect(Reply.bare(.requestTimeout).body.isEmpty)
        #expect(Reply.bare(.requestHeaderFieldsTooLarge).close)
    }

    @Test func headTimerAfterTheHeadIsIgnored() {
        var m = connectingMachine()
        #expect(m.headTimerFired() == .none)
        #expect(m.state == .connecting(host: "a.test", port: 443))
    }

    @Test func headTooLargeAnswers431AndCloses() {
        var m = makeMachine()
        #expect(m.headTooLarge() == .reply(.bare(.requestHeaderFieldsTooLarge)))
        #expect(m.state == .closed)
        #expect(m.headTimerFired() == .none)
    }

    @Test func headTooLargeAfterTheHeadIsIgnored() {
        var m = connectingMachine()
        #expect(m.headTooLarge() == .none)
        #expect(m.state == .connecting(host: "a.test", port: 443))
    }

    @Test func malformedRequestAnswers400WithTheParserError() {
        var m = makeMachine()
        #expect(m.malformedRequest("invalid method") == .reply(.text(.badRequest, "malformed request: invalid method")))
        #expect(m.state == .closed)
    }

    @Test func halfCloseBeforeAWholeHeadCloses() {
        var m = makeMachine()
        #expect(m.inputClosed() == .close)
        #expect(m.state == .closed)
    }

    @Test func bodyOrEndBeforeAHeadIsIgnored() {
        var m = makeMachine()
        #expect(m.bodyReceived(ByteBuffer(string: "x")) == .none)
        #expect(m.endReceived() == .none)
        #expect(m.state == .awaitingHead(.first))
        // The head that follows is still served.
        #expect(
            m.headReceived(head(.CONNECT, "a.test:443"))
                == .cancelHeadTimer(then: .openTunnel(host: "a.test", port: 443))
        )
    }

    // MARK: routing a head

    @Test func connectToAnAllowedPortStopsTheHeadTimerAndOpensATunnel() {
        var m = makeMachine()
        #expect(
            m.headReceived(head(.CONNECT, "a.test:443"))
                == .cancelHeadTimer(then: .openTunnel(host: "a.test", port: 443))
        )
        #expect(m.state == .connecting(host: "a.test", port: 443))
    }

    @Test func connectToADisallowedPortIsRefusedWith403AndRecorded() {
        var m = makeMachine()
        let expected = Machine.Action.failTunnel(
            host: "127.0.0.1",
            port: 22,
            error: "port not allowed",
            reply: .text(.forbidden, "CONNECT to port 22 is not allowed (allowed: 80, 443)")
        )
        #expect(m.headReceived(head(.CONNECT, "127.0.0.1:22")) == .cancelHeadTimer(then: expected))
        #expect(m.state == .closed)
    }

    @Test func forwardToADisallowedPortIsRefusedWith403() {
        var m = makeMachine()
        let reply = Reply.text(.forbidden, "forwarding to port 8080 is not allowed (allowed: 80, 443)")
        #expect(m.headReceived(head(.GET, "http://127.0.0.1:8080/")) == .cancelHeadTimer(then: .reply(reply)))
        #expect(m.state == .closed)
    }

    @Test func aRequestThatIsNoProxyRequestGets400SayingWhy() {
        var m = makeMachine()
        let reply = Reply.text(
            .badRequest,
            "this is a proxy: send CONNECT host:port or an absolute http:// URL (or GET /proxy.pac)"
        )
        #expect(m.headReceived(head(.GET, "/index.html")) == .cancelHeadTimer(then: .reply(reply)))
        #expect(m.state == .closed)
    }

    @Test func missingOrWrongCredentialsGet407() {
        for headers: HTTPHeaders in [[:], ["proxy-authorization": "Basic d3Jvbmc6d3Jvbmc="]] {
            var m = makeMachine(authorization: "Basic dTpw")
            let reply = Reply.text(
                .proxyAuthenticationRequired,
                "proxy authentication required",
                headers: ["proxy-authenticate": "Basic realm=\"httpdns\""]
            )
            #expect(m.headReceived(head(.CONNECT, "a.test:443", headers)) == .cancelHeadTimer(then: .reply(reply)))
            #expect(m.state == .closed)
        }
    }

    @Test func rightCredentialsLetTheRequestThrough() {
        var m = makeMachine(authorization: "Basic dTpw")
        #expect(
            m.headReceived(head(.CONNECT, "a.test:443", ["proxy-authorization": "Basic dTpw"]))
                == .cancelHeadTimer(then: .openTunnel(host: "a.test", port: 443))
        )
    }

    @Test func credentialsComeFromTheConfiguration() {
        var configuration = HTTPDNSProxy.Configuration()
        configuration.credentials = ("u", "p")
        configuration.allowedPorts = [443]
        let limits = Machine.Limits(configuration)
        #expect(limits == .init(allowedPorts: [443], expectedAuthorization: "Basic dTpw"))
    }

    @Test func pacWithKeepAliveIsServedAndTheConnectionWaitsForAnotherHead() {
        var m = makeMachine()
        #expect(
            m.headReceived(head(.GET, "/proxy.pac"))
                == .cancelHeadTimer(then: .startKeepAliveTimer(then: .servePAC(close: false)))
        )
        #expect(m.endReceived() == .none)
        #expect(m.state == .awaitingHead(.keptAlive))
        // Waiting for a next request is bounded by the keep-alive timer, not the head timer.
        #expect(m.headTimerFired() == .none)
        #expect(m.bytesArrived() == .cancelHeadTimer(then: .startHeadTimer))
        #expect(m.state == .awaitingHead(.next))
        #expect(
            m.headReceived(head(.GET, "/proxy.pac", ["connection": "close"]))
                == .cancelHeadTimer(then: .servePAC(close: true))
        )
        #expect(m.state == .closed)
    }

    @Test func pacOverHTTP10IsServedAndClosed() {
        var m = makeMachine()
        #expect(
            m.headReceived(head(.GET, "/proxy.pac", version: .http1_0))
                == .cancelHeadTimer(then: .servePAC(close: true))
        )
        #expect(m.state == .closed)
    }

    // MARK: CONNECT

    @Test func aConnectedTargetBecomesATunnel() {
        var m = connectingMachine()
        #expect(m.connectSucceeded() == .establishTunnel(host: "a.test", port: 443, passOnHalfClose: false))
        #expect(m.state == .tunnelling)
    }

    @Test func aTargetThatIsTheProxyItselfIsRefusedWith508() {
        var m = connectingMachine()
        let expected = Machine.Action.failTunnel(
            host: "a.test",
            port: 443,
            error: "the target is this proxy",
            reply: .text(.loopDetected, "a.test:443 is this proxy itself: a tunnel to it would loop")
        )
        #expect(m.connectSucceeded(toItself: true) == expected)
        #expect(m.state == .closed)
    }

    @Test func aHalfCloseWhileConnectingIsPassedOnOnceTheTunnelIsOpen() {
        var m = connectingMachine()
        #expect(m.inputClosed() == .none)
        #expect(m.clientHalfClosed)
        #expect(m.connectSucceeded() == .establishTunnel(host: "a.test", port: 443, passOnHalfClose: true))
    }

    @Test func aFailedConnectAnswers502AndIsRecorded() {
        var m = connectingMachine()
        let expected = Machine.Action.failTunnel(
            host: "a.test",
            port: 443,
            error: "name not resolved: NXDOMAIN",
            reply: .text(.badGateway, "could not connect to a.test:443: name not resolved: NXDOMAIN")
        )
        #expect(m.connectFailed("name not resolved: NXDOMAIN") == expected)
        #expect(m.state == .closed)
    }

    @Test func aFailedConnectToAnIPv6TargetNamesItBracketed() {
        var m = makeMachine()
        _ = m.headReceived(head(.CONNECT, "[::1]:443"))
        guard case .failTunnel(_, _, _, let reply) = m.connectFailed("refused") else {
            Issue.record("no failTunnel")
            return
        }
        #expect(reply.body == "could not connect to [::1]:443: refused\n")
    }

    @Test func aTargetThatConnectsAfterTheClientLeftIsClosed() {
        var m = connectingMachine()
        #expect(m.channelInactive() == .none)
        #expect(m.connectSucceeded() == .closeUpstream)
        #expect(m.state == .closed)
    }

    @Test func aConnectFailureAfterTheClientLeftDoesNothing() {
        var m = connectingMachine()
        _ = m.channelInactive()
        #expect(m.connectFailed("refused") == .none)
    }

    @Test func aSecondConnectResultIsIgnored() {
        var m = connectingMachine()
        _ = m.connectSucceeded()
        #expect(m.connectSucceeded() == .closeUpstream)
        #expect(m.connectFailed("late") == .none)
        #expect(m.state == .tunnelling)
    }

    @Test func aSecondHeadWhileConnectingIsDropped() {
        var m = connectingMachine()
        #expect(m.headReceived(head(.CONNECT, "b.test:443")) == .none)
        #expect(m.bodyReceived(ByteBuffer(string: "x")) == .none)
        #expect(m.endReceived() == .none)
        #expect(m.state == .connecting(host: "a.test", port: 443))
    }

    @Test func aMalformedRequestWhileConnectingAnswers400AndTheLateTargetIsClosed() {
        var m = connectingMachine()
        #expect(m.malformedRequest("x") == .reply(.text(.badRequest, "malformed request: x")))
        #expect(m.connectSucceeded() == .closeUpstream)
    }

    @Test func eventsAfterTheTunnelOpenedAreIgnored() {
        var m = connectingMachine()
        _ = m.connectSucceeded()
        #expect(m.malformedRequest("x") == .none)
        #expect(m.errorCaught() == .none)
        #expect(m.inputClosed() == .none)
        #expect(m.headTimerFired() == .none)
        #expect(m.state == .tunnelling)
    }

    // MARK: forwarding http://

    @Test func aForwardedRequestGoesOnAtItsHeadAndItsBodyFollowsPartByPart() {
        var m = makeMachine()
        let post = head(.POST, "http://a.test/upload", ["content-length": "6"])
        let url = HTTPURL(scheme: "http", host: "a.test", port: 80, target: "/upload")
        #expect(m.headReceived(post) == .cancelHeadTimer(then: .forward(post, url)))
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: false, responseStarted: false))
        #expect(m.bodyReceived(ByteBuffer(string: "abc")) == .forwardBody(ByteBuffer(string: "abc")))
        #expect(m.bodyReceived(ByteBuffer(string: "def")) == .forwardBody(ByteBuffer(string: "def")))
        #expect(m.endReceived() == .forwardBodyEnd)
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: true, responseStarted: false))
    }

    @Test func aBodyThatStallsIsAnswered408UnlessTheResponseStarted() {
        var m = makeMachine()
        _ = m.headReceived(head(.POST, "http://a.test/", ["content-length": "10"]))
        _ = m.bodyReceived(ByteBuffer(string: "abc"))
        let why = "request body not complete in time"
        #expect(m.bodyTimedOut() == .abortForwardBody(why, reply: .text(.requestTimeout, why)))
        #expect(m.state == .closed)
        // The origin already answering: only the connection's end is left to say it.
        var started = makeMachine()
        _ = started.headReceived(head(.POST, "http://a.test/", ["content-length": "10"]))
        _ = started.forwardResponseStarted()
        #expect(started.bodyTimedOut() == .abortForwardBody(why, reply: nil))
        // A body that ended cannot stall.
        var ended = forwardingMachine()
        #expect(ended.bodyTimedOut() == .none)
    }

    @Test func aResponseBeforeTheBodyEndedClosesTheConnection() {
        var m = makeMachine()
        _ = m.headReceived(head(.POST, "http://a.test/", ["content-length": "10"]))
        _ = m.forwardResponseStarted()
        #expect(m.forwardFinished() == .close)
        #expect(m.state == .closed)
    }

    @Test func aKeepAliveForwardWaitsForAnotherHeadForTheKeepAliveTimeout() {
        var m = forwardingMachine()
        #expect(m.forwardResponseStarted() == .none)
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: true, responseStarted: true))
        #expect(m.forwardFinished() == .startKeepAliveTimer(then: .none))
        #expect(m.state == .awaitingHead(.keptAlive))
        #expect(m.headTimerFired() == .none)
        // Hostile round 4, item 9: a silent kept-alive connection was never closed. Now the keep-alive
        // timer closes it, without a reply.
        var silent = m
        #expect(silent.keepAliveTimerFired() == .close)
        #expect(silent.state == .closed)
        // A next request's first bytes start the head timer; its head ends it.
        #expect(m.bytesArrived() == .cancelHeadTimer(then: .startHeadTimer))
        #expect(m.bytesArrived() == .none)
        #expect(m.keepAliveTimerFired() == .none)
        #expect(
            m.headReceived(head(.CONNECT, "a.test:443"))
                == .cancelHeadTimer(then: .openTunnel(host: "a.test", port: 443))
        )
    }

    @Test func aNextHeadTrickledPastTheHeadTimeoutGets408() {
        var m = forwardingMachine()
        _ = m.forwardResponseStarted()
        _ = m.forwardFinished()
        _ = m.bytesArrived()
        // Hostile round 4, item 9: a next head at 1 byte every 3 s was answered at 30 s. Bytes that keep
        // coming do not restart the head timer.
        #expect(m.bytesArrived() == .none)
        #expect(m.headTimerFired() == .reply(.bare(.requestTimeout)))
        #expect(m.state == .closed)
    }

    @Test func bytesDuringAForwardOrBeforeTheFirstHeadChangeNothing() {
        var first = makeMachine()
        #expect(first.bytesArrived() == .none)
        #expect(first.state == .awaitingHead(.first))
        var m = forwardingMachine()
        #expect(m.bytesArrived() == .none)
    }

    @Test func aForwardWithoutKeepAliveClosesWhenDone() {
        for var m in [forwardingMachine(["connection": "close"]), forwardingMachine(version: .http1_0)] {
            _ = m.forwardResponseStarted()
            #expect(m.forwardFinished() == .close)
            #expect(m.state == .closed)
        }
    }

    @Test func aClientThatHalfClosedAfterItsRequestIsClosedAfterTheResponse() {
        var m = forwardingMachine()
        #expect(m.inputClosed() == .none)
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: true, responseStarted: false))
        _ = m.forwardResponseStarted()
        #expect(m.forwardFinished() == .close)
    }

    @Test func aHalfCloseInTheMiddleOfABodyGivesTheRequestUp() {
        var m = makeMachine()
        _ = m.headReceived(head(.POST, "http://a.test/", ["content-length": "10"]))
        _ = m.bodyReceived(ByteBuffer(string: "abc"))
        let why = "the client closed its side before the request body ended"
        #expect(m.inputClosed() == .abortForwardBody(why, reply: .text(.badRequest, why)))
        #expect(m.state == .closed)
    }

    @Test func aFailureBeforeTheResponseAnswers502() {
        var m = forwardingMachine()
        let reply = Reply.text(.badGateway, "could not fetch http://a.test/: refused")
        #expect(m.forwardFailed("could not fetch http://a.test/: refused") == .reply(reply))
        #expect(m.state == .closed)
    }

    @Test func aFailureInTheMiddleOfTheResponseCloses() {
        var m = forwardingMachine()
        _ = m.forwardResponseStarted()
        #expect(m.forwardFailed("reset") == .close)
        #expect(m.state == .closed)
    }

    @Test func aMalformedRequestWhileForwardingClosesInsteadOfAnswering() {
        var m = forwardingMachine()
        #expect(m.malformedRequest("x") == .close)
        #expect(m.state == .closed)
        // In the middle of its body (bad chunked framing): the body is given up, never sent as complete.
        var body = makeMachine()
        _ = body.headReceived(head(.POST, "http://a.test/", ["transfer-encoding": "chunked"]))
        let why = "malformed request body: x"
        #expect(body.malformedRequest("x") == .abortForwardBody(why, reply: .text(.badRequest, why)))
    }

    @Test func aResponseThatEndsAfterTheClientLeftDoesNothing() {
        var m = forwardingMachine()
        _ = m.channelInactive()
        #expect(m.forwardResponseStarted() == .none)
        #expect(m.forwardFinished() == .none)
        #expect(m.forwardFailed("late") == .none)
        #expect(m.state == .closed)
    }

    // MARK: requests queued behind the one being answered (issue 74, item 4)

    /// A keep-alive client's next GET read after the response went out but before the engine told the loop
    /// it had ended is kept and served once it has; it used to be dropped (`.none`, and `forwardFinished`
    /// started the keep-alive timer), and the client waited out the keep-alive timeout.
    @Test func aHeadReadWhileAResponseIsUnderWayIsKeptAndServedAfterIt() {
        var m = forwardingMachine()
        _ = m.forwardResponseStarted()
        let next = head(.GET, "http://b.test/next")
        // The client is read no more until the queue is served.
        #expect(m.headReceived(next) == .pauseReading)
        #expect(m.endReceived() == .none)
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: true, responseStarted: true))
        #expect(Array(m.pipelined) == [.head(next), .end(nil)])
        #expect(!m.isIdle)
        let url = HTTPURL(scheme: "http", host: "b.test", port: 80, target: "/next")
        #expect(
            m.forwardFinished()
                == .sequence([.cancelHeadTimer(then: .forward(next, url)), .forwardBodyEnd, .resumeReading])
        )
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: true, responseStarted: false))
        #expect(m.pipelined.isEmpty)
        _ = m.forwardResponseStarted()
        #expect(m.forwardFinished() == .startKeepAliveTimer(then: .none))
        #expect(m.state == .awaitingHead(.keptAlive))
    }

    /// Three GETs in one read are answered one after the other, in the order they came; the second and
    /// third used to be dropped.
    @Test func headsInOneReadAreAnsweredInOrder() {
        var m = makeMachine()
        let (a, b, c) = (head(.GET, "http://a.test/1"), head(.GET, "http://a.test/2"), head(.GET, "http://a.test/3"))
        let url = { (target: String) in HTTPURL(scheme: "http", host: "a.test", port: 80, target: target) }
        #expect(m.headReceived(a) == .cancelHeadTimer(then: .forward(a, url("/1"))))
        #expect(m.endReceived() == .forwardBodyEnd)
        #expect(m.headReceived(b) == .pauseReading)
        #expect(m.endReceived() == .none)
        #expect(m.headReceived(c) == .none)
        #expect(m.endReceived() == .none)
        _ = m.forwardResponseStarted()
        // The second only: the third waits for its answer, and reading stays stopped.
        #expect(m.forwardFinished() == .sequence([.cancelHeadTimer(then: .forward(b, url("/2"))), .forwardBodyEnd]))
        #expect(Array(m.pipelined) == [.head(c), .end(nil)])
        _ = m.forwardResponseStarted()
        #expect(
            m.forwardFinished()
                == .sequence([.cancelHeadTimer(then: .forward(c, url("/3"))), .forwardBodyEnd, .resumeReading])
        )
        _ = m.forwardResponseStarted()
        #expect(m.forwardFinished() == .startKeepAliveTimer(then: .none))
    }

    /// A queued POST keeps its body: the parts that came with it go on after its head, and the rest, read
    /// once reading resumes, follows them; the body used to be dropped with its head.
    @Test func aQueuedRequestKeepsItsBody() {
        var m = forwardingMachine()
        let post = head(.POST, "http://a.test/upload", ["content-length": "9"])
        let url = HTTPURL(scheme: "http", host: "a.test", port: 80, target: "/upload")
        #expect(m.headReceived(post) == .pauseReading)
        #expect(m.bodyReceived(ByteBuffer(string: "abc")) == .none)
        #expect(m.bodyReceived(ByteBuffer(string: "def")) == .none)
        _ = m.forwardResponseStarted()
        #expect(
            m.forwardFinished()
                == .sequence([
                    .cancelHeadTimer(then: .forward(post, url)),
                    .forwardBody(ByteBuffer(string: "abc")),
                    .forwardBody(ByteBuffer(string: "def")),
                    .resumeReading,
                ])
        )
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: false, responseStarted: false))
        #expect(m.bodyReceived(ByteBuffer(string: "ghi")) == .forwardBody(ByteBuffer(string: "ghi")))
        #expect(m.endReceived() == .forwardBodyEnd)
    }

    /// A queued PAC request is answered at once, and the request queued after it is served in the same
    /// turn; both used to be dropped.
    @Test func aQueuedPACIsAnsweredAndTheNextQueuedRequestServed() {
        var m = forwardingMachine()
        let pac = head(.GET, "/proxy.pac")
        let next = head(.GET, "http://b.test/")
        _ = m.headReceived(pac)
        _ = m.endReceived()
        _ = m.headReceived(next)
        _ = m.endReceived()
        _ = m.forwardResponseStarted()
        let url = HTTPURL(scheme: "http", host: "b.test", port: 80, target: "/")
        #expect(
            m.forwardFinished()
                == .sequence([
                    .cancelHeadTimer(then: .startKeepAliveTimer(then: .servePAC(close: false))),
                    .cancelHeadTimer(then: .forward(next, url)),
                    .forwardBodyEnd,
                    .resumeReading,
                ])
        )
    }

    /// Past `maxPipelined` requests are dropped, and the connection closes after the queued ones (the
    /// last of which says so), so the client sends the rest again; they used to be dropped without a word.
    @Test func requestsPastTheQueueAreDroppedAndTheConnectionClosesAfterTheQueued() {
        var m = Machine(limits: .init(allowedPorts: [80], maxPipelined: 1))
        _ = m.headReceived(head(.GET, "http://a.test/1"))
        _ = m.endReceived()
        let queued = head(.GET, "http://a.test/2")
        #expect(m.headReceived(queued) == .pauseReading)
        #expect(m.endReceived() == .none)
        #expect(m.headReceived(head(.GET, "http://a.test/3")) == .none)
        #expect(m.endReceived() == .none)
        #expect(m.pipelineOverflowed)
        #expect(Array(m.pipelined) == [.head(queued), .end(nil)])
        _ = m.forwardResponseStarted()
        var closing = queued
        closing.headers.replaceOrAdd(name: "connection", value: "close")
        let url = HTTPURL(scheme: "http", host: "a.test", port: 80, target: "/2")
        #expect(
            m.forwardFinished()
                == .sequence([.cancelHeadTimer(then: .forward(closing, url)), .forwardBodyEnd, .resumeReading])
        )
        #expect(m.state == .forwarding(keepAlive: false, requestEnded: true, responseStarted: false))
        _ = m.forwardResponseStarted()
        #expect(m.forwardFinished() == .close)
        #expect(m.state == .closed)
    }

    /// A client that pipelines and then half-closes gets every answer before the close; it used to get the
    /// first only.
    @Test func aClientThatHalfClosedAfterPipeliningGetsEveryAnswer() {
        var m = forwardingMachine()
        let next = head(.GET, "http://b.test/")
        _ = m.headReceived(next)
        _ = m.endReceived()
        #expect(m.inputClosed() == .none)
        _ = m.forwardResponseStarted()
        let url = HTTPURL(scheme: "http", host: "b.test", port: 80, target: "/")
        #expect(
            m.forwardFinished()
                == .sequence([.cancelHeadTimer(then: .forward(next, url)), .forwardBodyEnd, .resumeReading])
        )
        _ = m.forwardResponseStarted()
        #expect(m.forwardFinished() == .close)
    }

    @Test func aResponseThatClosesTheConnectionLeavesTheQueueUnanswered() {
        var m = forwardingMachine(["connection": "close"])
        _ = m.headReceived(head(.GET, "http://b.test/"))
        _ = m.endReceived()
        _ = m.forwardResponseStarted()
        #expect(m.forwardFinished() == .close)
        #expect(m.state == .closed)
        // A queued request refused: the rest is not served either.
        var refused = forwardingMachine()
        _ = refused.headReceived(head(.GET, "http://b.test:22/"))
        _ = refused.endReceived()
        _ = refused.headReceived(head(.GET, "http://b.test/"))
        _ = refused.endReceived()
        _ = refused.forwardResponseStarted()
        let reply = Reply.text(.forbidden, "forwarding to port 22 is not allowed (allowed: 80, 443)")
        #expect(refused.forwardFinished() == .cancelHeadTimer(then: .reply(reply)))
        #expect(refused.state == .closed)
        #expect(refused.pipelined.isEmpty)
    }

    @Test func bodyOrEndAfterTheRequestEndedWithNothingQueuedIsIgnored() {
        var m = forwardingMachine()
        #expect(m.bodyReceived(ByteBuffer(string: "x")) == .none)
        #expect(m.endReceived() == .none)
        #expect(m.pipelined.isEmpty)
        #expect(m.state == .forwarding(keepAlive: true, requestEnded: true, responseStarted: false))
    }

    @Test func forwardEventsOutsideAForwardAreIgnored() {
        var m = connectingMachine()
        #expect(m.forwardResponseStarted() == .none)
        #expect(m.forwardFinished() == .none)
        #expect(m.forwardFailed("x") == .none)
        #expect(m.state == .connecting(host: "a.test", port: 443))
    }

    // MARK: closed

    @Test func otherErrorsClose() {
        var m = makeMachine()
        #expect(m.errorCaught() == .close)
        #expect(m.state == .closed)
        #expect(m.errorCaught() == .none)
    }

    @Test func everyEventAfterCloseIsIgnored() {
        var m = makeMachine()
        _ = m.headTimerFired()
        #expect(m.headTimerFired() == .none)
        #expect(m.headTooLarge() == .none)
        #expect(m.malformedRequest("x") == .none)
        #expect(m.headReceived(head(.CONNECT, "a.test:443")) == .none)
        #expect(m.bodyReceived(ByteBuffer(string: "x")) == .none)
        #expect(m.endReceived() == .none)
        #expect(m.forwardResponseStarted() == .none)
        #expect(m.forwardFinished() == .none)
        #expect(m.forwardFailed("x") == .none)
        #expect(m.connectSucceeded() == .closeUpstream)
        #expect(m.connectFailed("x") == .none)
        #expect(m.inputClosed() == .none)
        #expect(m.errorCaught() == .none)
        #expect(m.channelInactive() == .none)
        #expect(m.state == .closed)
    }
}

@Suite struct RequestHeadCounterTests {
    @Test func bytesUpToTheBlankLineAreCountedAndTheRestPass() {
        var c = RequestHeadCounter(maxBytes: 30)
        #expect(c.received(Array("CONNECT a:443 HTTP/1.1\r\n\r\n".utf8)) == .pass)
        #expect(c.headEnded)
        #expect(c.seen == 26)
        // Tunnel bytes after the head are not counted, however many.
        #expect(c.received([UInt8](repeating: 0x41, count: 1000)) == .pass)
        #expect(c.seen == 26)
    }

    @Test func theBlankLineIsFoundAcrossReads() {
        var c = RequestHeadCounter(maxBytes: 100)
        #expect(c.received(Array("GET / HTTP/1.1\r\n\r".utf8)) == .pass)
        #expect(!c.headEnded)
        #expect(c.received(Array("\nbody".utf8)) == .pass)
        #expect(c.headEnded)
        #expect(c.seen == 18)
    }

    @Test func aBlankLineWithoutCRsEndsTheHeadToo() {
        for end in ["\n\n", "\r\n\n", "\n\r\n"] {
            var c = RequestHeadCounter(maxBytes: 100)
            _ = c.received(Array("GET / HTTP/1.1\(end)".utf8))
            #expect(c.headEnded, "\(end.debugDescription)")
        }
        var c = RequestHeadCounter(maxBytes: 100)
        _ = c.received(Array("GET / HTTP/1.1\r\nA: b\r\r\n".utf8))
        #expect(!c.headEnded)
    }

    @Test func aHeadPastTheLimitIsReportedOnceThenDropped() {
        var c = RequestHeadCounter(maxBytes: 10)
        #expect(c.received(Array("CONNECT a".utf8)) == .pass)
        #expect(c.received(Array(":443 HTTP/1.1".utf8)) == .tooLarge)
        #expect(c.received(Array("\r\n\r\n".utf8)) == .drop)
        #expect(c.received(Array("x".utf8)) == .drop)
    }

    @Test func aWholeHeadLargerThanTheLimitInOneReadIsTooLarge() {
        var c = RequestHeadCounter(maxBytes: 10)
        #expect(c.received(Array("CONNECT a:443 HTTP/1.1\r\n\r\n".utf8)) == .tooLarge)
    }

    @Test func aHeadOfExactlyTheLimitPasses() {
        var c = RequestHeadCounter(maxBytes: 26)
        #expect(c.received(Array("CONNECT a:443 HTTP/1.1\r\n\r\n".utf8)) == .pass)
    }
}
