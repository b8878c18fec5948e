// The exchange state machine on its own: every transition of one request/response, with time given
// as plain deadlines. No channel, no event loop, no sleeping.

@testable import HTTPDNSEngine
import NIOCore
import NIOHTTP1
import Testing

@Suite struct ExchangeStateMachineTests {
    typealias Machine = ExchangeStateMachine

    /// A point in time, `ms` milliseconds after an arbitrary start.
    func at(_ ms: Int64) -> NIODeadline { .uptimeNanoseconds(UInt64(ms) * 1_000_000) }

    func head(_ status: HTTPResponseStatus, _ headers: [(String, String)] = [], version: HTTPVersion = .http1_1)
        -> HTTPResponseHead
    {
        HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(headers))
    }

    /// A machine whose request has been written in full, with a 1 s idle timeout, added at 0 ms.
    func started(onStream: Bool = false) -> Machine {
        var m = Machine(idleTimeout: .seconds(1), host: "a.test", onStream: onStream)
        _ = m.handlerAdded(now: at(0))
        m.requestHeadWritten(now: at(0))
        m.requestEndWritten(now: at(0))
        return m
    }

    /// A started machine that has received a 200 head.
    func receiving(onStream: Bool = false, _ headers: [(String, String)] = []) -> Machine {
        var m = started(onStream: onStream)
        #expect(m.responseHeadReceived(head(.ok, headers), now: at(0)) == .succeedHead(head(.ok, headers)))
        return m
    }

    // MARK: Heads

    @Test func addingTheHandlerSchedulesOneIdleCheck() {
        var m = Machine(idleTimeout: .milliseconds(250), host: "a.test", onStream: false)
        #expect(m.handlerAdded(now: at(0)) == .scheduleIdleCheck(in: .milliseconds(250)))
        #expect(m.state == .waitingForHead)
    }

    @Test func informationalHeadsAreSkipped() {
        var m = started()
        #expect(m.responseHeadReceived(head(.continue), now: at(1)) == .nothing)
        #expect(m.responseHeadReceived(head(.custom(code: 103, reasonPhrase: "Early Hints")), now: at(2)) == .nothing)
        #expect(m.state == .waitingForHead)
        #expect(m.responseHeadReceived(head(.ok), now: at(3)) == .succeedHead(head(.ok)))
        #expect(m.state == .receivingBody)
    }

    @Test func switchingProtocolsIsAFinalHead() {
        var m = started()
        let upgrade = head(.switchingProtocols, [("upgrade", "websocket"), ("connection", "upgrade")])
        #expect(m.responseHeadReceived(upgrade, now: at(1)) == .succeedHead(upgrade))
        #expect(m.state == .receivingBody)
    }

    @Test func aSecondHeadIsAProtocolError() {
        var m = receiving()
        let action = m.responseHeadReceived(head(.ok), now: at(1))
        #expect(action == .fail(HTTPEngineError(.protocolError, ""), failHead: false, close: true))
        #expect(m.state == .finished)
    }

    // MARK: Keep-alive or close

    @Test func keepAliveResponseLeavesTheConnectionForTheNextRequest() {
        var m = receiving()
        #expect(m.responseBodyPartReceived(now: at(1)) == .yieldBodyPart)
        #expect(m.bodyPartYielded(.produceMore) == .nothing)
        #expect(m.responseEndReceived() == .finish(reusable: true, cleanup: .removeHandlers))
        #expect(m.state == .finished)
    }

    @Test func connectionCloseIsNotReusable() {
        var m = receiving([("connection", "close")])
        #expect(m.responseEndReceived() == .finish(reusable: false, cleanup: .close))
    }

    @Test func http10WithoutKeepAliveIsNotReusable() {
        var m = started()
        _ = m.responseHeadReceived(head(.ok, version: .http1_0), now: at(1))
        #expect(m.responseEndReceived() == .finish(reusable: false, cleanup: .close))
    }

    @Test func responseEndBeforeRequestEndIsNotReusable() {
        var m = Machine(idleTimeout: .seconds(1), host: "a.test", onStream: false)
        _ = m.handlerAdded(now: at(0))
        m.requestHeadWritten(now: at(0))
        m.requestBodyPartWritten(now: at(1))
        // A 413 while the upload is still going: the request's framing is left unfinished on the wire.
        _ = m.responseHeadReceived(head(.payloadTooLarge), now: at(2))
        #expect(m.responseEndReceived() == .finish(reusable: false, cleanup: .close))
    }

    @Test func streamIsLeftToCloseByItself() {
        var m = receiving(onStream: true)
        #expect(m.responseEndReceived() == .finish(reusable: true, cleanup: .leaveAsIs))
        var closing = receiving(onStream: true, [("connection", "close")])
        #expect(closing.responseEndReceived() == .finish(reusable: false, cleanup: .leaveAsIs))
    }

    @Test func endWithoutHeadIsAProtocolError() {
        var m = started()
        #expect(m.responseEndReceived() == .fail(HTTPEngineError(.protocolError, ""), failHead: true, close: true))
    }

    // MARK: Back-pressure

    @Test func readsPassBeforeTheHeadAndWhileTheConsumerKeepsUp() {
        var m = started()
        #expect(m.readRequested() == .read)
        _ = m.responseHeadReceived(head(.ok), now: at(1))
        #expect(m.readRequested() == .read)
        _ = m.responseBodyPartReceived(now: at(2))
        #expect(m.bodyPartYielded(.produceMore) == .nothing)
        #expect(m.readRequested() == .read)
    }

    @Test func stopProducingHoldsReadsAndProduceMoreReleasesExactlyOne() {
        var m = receiving()
        #expect(m.responseBodyPartReceived(now: at(1)) == .yieldBodyPart)
        #expect(m.bodyPartYielded(.stopProducing) == .nothing)
        #expect(m.readRequested() == .nothing)
        #expect(m.readRequested() == .nothing)  // still one held read, not two
        #expect(m.produceMore(now: at(2)) == .read)
        #expect(m.produceMore(now: at(3)) == .nothing)
        #expect(m.readRequested() == .read)
    }

    @Test func produceMoreWithoutAHeldReadReadsNothing() {
        var m = receiving()
        _ = m.responseBodyPartReceived(now: at(1))
        _ = m.bodyPartYielded(.stopProducing)
        #expect(m.produceMore(now: at(2)) == .nothing)
        #expect(m.readRequested() == .read)
    }

    @Test func droppedBodyCancelsAndCloses() {
        var m = receiving()
        _ = m.responseBodyPartReceived(now: at(1))
        #expect(m.bodyPartYielded(.dropped) == .fail(HTTPEngineError(.cancelled, ""), failHead: false, close: true))
        #expect(m.responseBodyPartReceived(now: at(2)) == .nothing)
    }

    @Test func readsPassAfterTheEnd() {
        var m = receiving()
        _ = m.responseBodyPartReceived(now: at(1))
        _ = m.bodyPartYielded(.stopProducing)
        _ = m.responseEndReceived()
        #expect(m.readRequested() == .read)
        #expect(m.produceMore(now: at(2)) == .nothing)
    }

    // MARK: Idle timeout

    @Test func idleCheckReArmsForTheTimeLeft() {
        var m = receiving()
        _ = m.responseBodyPartReceived(now: at(600))
        _ = m.bodyPartYielded(.produceMore)
        #expect(m.idleCheckFired(now: at(1000)) == .scheduleIdleCheck(in: .milliseconds(600)))
        let timeout = m.idleCheckFired(now: at(1600))
        #expect(timeout == .fail(HTTPEngineError(.readTimeout, ""), failHead: false, close: true))
        if case .fail(let error, _, _) = timeout { #expect(error.message == "no data from a.test for 1000 ms") }
    }

    @Test func silentServerTimesOutBeforeTheHead() {
        var m = started()
        #expect(m.idleCheckFired(now: at(999)) == .scheduleIdleCheck(in: .milliseconds(1)))
        #expect(
            m.idleCheckFired(now: at(1000)) == .fail(HTTPEngineError(.readTimeout, ""), failHead: true, close: true)
        )
    }

    @Test func uploadCountsAsActivity() {
        var m = started()
        m.requestBodyPartWritten(now: at(900))
        #expect(m.idleCheckFired(now: at(1000)) == .scheduleIdleCheck(in: .milliseconds(900)))
    }

    @Test func slowConsumerNeverTimesOut() {
        var m = receiving()
        _ = m.responseBodyPartReceived(now: at(100))
        _ = m.bodyPartYielded(.stopProducing)
        _ = m.readRequested()
        // Long past the idle timeout, but it is the consumer that is behind, not the server.
        for second in 1...20 {
            #expect(m.idleCheckFired(now: at(Int64(second) * 1000)) == .scheduleIdleCheck(in: .seconds(1)))
        }
        // The server's idle period starts when the consumer asks for more.
        #expect(m.produceMore(now: at(20_200)) == .read)
        #expect(m.idleCheckFired(now: at(21_000)) == .scheduleIdleCheck(in: .milliseconds(200)))
        #expect(
            m.idleCheckFired(now: at(21_200)) == .fail(HTTPEngineError(.readTimeout, ""), failHead: false, close: true)
        )
    }

    // MARK: Total timeout, cancellation, errors

    @Test func totalTimeoutFailsAndCloses() {
        var m = started()
        #expect(m.totalTimeoutFired() == .fail(HTTPEngineError(.totalTimeout, ""), failHead: true, close: true))
        var streaming = receiving()
        #expect(
            streaming.totalTimeoutFired() == .fail(HTTPEngineError(.totalTimeout, ""), failHead: false, close: true)
        )
    }

    @Test func cancelFailsOnceAndEverythingAfterIsANoOp() {
        var m = started()
        #expect(m.cancelled() == .fail(HTTPEngineError(.cancelled, ""), failHead: true, close: true))
        #expect(m.cancelled() == .nothing)
        #expect(m.responseHeadReceived(head(.ok), now: at(1)) == .nothing)
        #expect(m.channelInactive() == .nothing)
    }

    @Test func cancelAfterFinishIsANoOp() {
        var m = receiving()
        _ = m.responseEndReceived()
        #expect(m.cancelled() == .nothing)
        #expect(m.totalTimeoutFired() == .nothing)
        #expect(m.idleCheckFired(now: at(10_000)) == .nothing)
        #expect(m.bodyAbandoned() == .nothing)
        #expect(m.errorCaught(HTTPEngineError(.protocolError, "late")) == .nothing)
        #expect(m.channelInactive() == .nothing)
        #expect(m.handlerRemoved() == .nothing)
        #expect(m.handlerAdded(now: at(10_000)) == .nothing)
    }

    @Test func inactiveBeforeTheHeadFailsTheHead() {
        var m = started()
        let action = m.channelInactive()
        #expect(action == .fail(HTTPEngineError(.protocolError, ""), failHead: true, close: false))
        if case .fail(let error, _, _) = action {
            #expect(error.message == "a.test closed the connection before the response was complete")
        }
    }

    @Test func inactiveDuringTheBodyFailsTheBody() {
        var m = receiving()
        #expect(m.channelInactive() == .fail(HTTPEngineError(.protocolError, ""), failHead: false, close: false))
    }

    @Test func removedHandlerAbandonsTheExchange() {
        var m = receiving()
        #expect(m.handlerRemoved() == .fail(HTTPEngineError(.protocolError, ""), failHead: false, close: true))
    }

    @Test func errorsMapToTheEnginesCodes() {
        // The engine's own errors keep their code.
        var own = receiving()
        let tooLarge = own.errorCaught(HTTPEngineError(.responseTooLarge, "too large"))
        #expect(tooLarge == .fail(HTTPEngineError(.responseTooLarge, ""), failHead: false, close: true))

        // A parser error (a truncated body, for one) is a protocol error that keeps the original.
        var parser = receiving()
        let truncated = parser.errorCaught(HTTPParserError.invalidEOFState)
        #expect(truncated == .fail(HTTPEngineError(.protocolError, ""), failHead: false, close: true))
        if case .fail(let error, _, _) = truncated {
            #expect(error.underlying as? HTTPParserError == .invalidEOFState)
            #expect(error.message.hasPrefix("the response from a.test was cut short or malformed"))
        }

        // A request that could not be written: a protocol error, so a stale kept-alive connection is retried.
        var write = started()
        let writeFailed = write.requestWriteFailed(ChannelError.ioOnClosedChannel)
        #expect(writeFailed == .fail(HTTPEngineError(.protocolError, ""), failHead: true, close: true))

        var abandoned = receiving()
        #expect(abandoned.bodyAbandoned() == .fail(HTTPEngineError(.cancelled, ""), failHead: false, close: true))
    }
}
