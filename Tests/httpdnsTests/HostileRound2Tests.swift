// Hostile round 2 (issue 29): the HTTP/2 corners round 1 left, against `httpdns serve` as an operator
// runs it. Each case asserts the bound it must hold: the connection is closed (within the timeout, or
// before the flood ends), memory stays bounded, and other clients are still served.

@testable import HTTPDNSTestSupport
import Foundation
import HTTPDNSEngine
import NIOCore
import NIOPosix
import Testing

@Suite(.serialized) struct HostileRound2Tests {
    /// A client that keeps the server's response window shut (SETTINGS_INITIAL_WINDOW_SIZE 0, and no
    /// WINDOW_UPDATE ever), or stops in the middle of a frame, must not hold its connection forever.
    @Test(arguments: ["window never opened", "stalled mid-frame", "stalled mid-body"])
    func aStalledClientIsClosedWithinTheTimeoutsAndOthersAreServed(_ stall: String) async throws {
        let serve = try await ServeProcess.start(["--request-timeout", "1", "--idle-timeout", "1"])
        defer { Task { await serve.stop() } }
        let started = ContinuousClock.now
        let bytes = try await withRawConnection(port: serve.port) { inbound, outbound in
            switch stall {
            case "window never opened":
                // The response (404 to GET /) can never be sent: its window is 0.
                try await outbound.write(
                    ByteBuffer(bytes: H2.preface + H2.settings([(4, 0)]) + H2.settingsAck + H2.requestHeaders(stream: 1))
                )
            case "stalled mid-frame":
                // Half a HEADERS frame's 9-byte header, then nothing.
                try await outbound.write(ByteBuffer(bytes: H2.preface + H2.settings() + Array(H2.requestHeaders(stream: 1).prefix(5))))
            default:
                // A POST whose body never comes.
                try await outbound.write(
                    ByteBuffer(bytes: H2.preface + H2.settings() + H2.requestHeaders(stream: 1, endStream: false))
                )
            }
            // Other clients still get in meanwhile.
            let engine = try HTTPEngine()
            defer { engine.shutdown() }
            #expect(try await rawGet(engine, "http://127.0.0.1:\(serve.port)/healthz").0 == 200)
            return try await readToEnd(inbound)
        }
        let waited = ContinuousClock.now - started
        // Closed by the server (the read ended) within the timeouts plus slack, not after minutes.
        #expect(waited < .seconds(10), "\(stall): held \(waited)")
        #expect(bytes.count < 64 << 10, "\(stall): \(bytes.count) bytes")
    }

    /// Rapid reset (CVE-2023-44487): open a stream and cancel it, over and over. The server must close
    /// the connection long before the client runs out of streams, and stay small.
    @Test func rapidResetIsCutOff() async throws {
        let serve = try await ServeProcess.start()
        defer { Task { await serve.stop() } }
        let before = try #require(serve.rss)
        let limit = 100_000
        let opened = try await withRawConnection(port: serve.port) { inbound, outbound -> Int in
            var stream: UInt32 = 1
            do {
                try await outbound.write(ByteBuffer(bytes: H2.preface + H2.settings()))
                while Int(stream) / 2 < limit {
                    var batch: [UInt8] = []
                    for _ in 0..<100 {
                        batch += H2.requestHeaders(stream: stream) + H2.frame(type: 3, stream: stream, H2.u32(8))
                        stream += 2
                    }
                    try await outbound.write(ByteBuffer(bytes: batch))
                }
            } catch {
                // Closed: what this test waits for.
            }
            return Int(stream) / 2
        }
        let after = try #require(serve.rss)
        #expect(opened < limit, "the server took \(opened) reset streams without closing")
        #expect(after - before < 64 << 20, "serve grew from \(before) to \(after) bytes")
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        #expect(try await rawGet(engine, "http://127.0.0.1:\(serve.port)/healthz").0 == 200)
    }
}
