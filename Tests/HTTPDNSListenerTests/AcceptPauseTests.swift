// What a listener does when accept fails for lack of resources (AcceptPause): accepting stops at the
// first such failure, once however many follow, and starts again after the pause; other errors pass on.
// On EmbeddedChannel, with the loop's clock moved by hand.

@testable import HTTPDNSListener
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@Suite struct AcceptPauseTests {
    final class ErrorRecorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = Any
        let seen = NIOLockedValueBox<[String]>([])
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            seen.withLockedValue { $0.append("\(error)") }
        }
    }

    @Test func acceptingPausesOnEMFILEAndResumesAfterThePause() throws {
        let toggles = NIOLockedValueBox<[Bool]>([])
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        let recorder = ErrorRecorder()
        try channel.pipeline.syncOperations.addHandler(
            AcceptPause(pause: .milliseconds(500)) { _, on in toggles.withLockedValue { $0.append(on) } }
        )
        try channel.pipeline.syncOperations.addHandler(recorder)
        for code in [EMFILE, ENFILE, EMFILE] {
            channel.pipeline.fireErrorCaught(IOError(errnoCode: code, reason: "accept"))
        }
        #expect(toggles.withLockedValue { $0 } == [false], "paused once, however many failures follow")
        loop.advanceTime(by: .milliseconds(499))
        #expect(toggles.withLockedValue { $0 } == [false])
        loop.advanceTime(by: .milliseconds(1))
        #expect(toggles.withLockedValue { $0 } == [false, true])
        // Failing again after the pause pauses again.
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ENOBUFS, reason: "accept"))
        #expect(toggles.withLockedValue { $0 } == [false, true, false])
        #expect(recorder.seen.withLockedValue { $0 }.isEmpty, "the failures it handles go no further")
    }

    @Test func otherErrorsPassOnWithoutAPause() throws {
        let toggles = NIOLockedValueBox<[Bool]>([])
        let channel = EmbeddedChannel()
        let recorder = ErrorRecorder()
        try channel.pipeline.syncOperations.addHandler(
            AcceptPause { _, on in toggles.withLockedValue { $0.append(on) } }
        )
        try channel.pipeline.syncOperations.addHandler(recorder)
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNABORTED, reason: "accept"))
        #expect(toggles.withLockedValue { $0 }.isEmpty)
        #expect(recorder.seen.withLockedValue { $0 }.count == 1)
    }
}
