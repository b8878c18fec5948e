// HTTP/2 abuse (the corners the first hostile round left), against `httpdns serve` as an operator
// runs it and against the engine (`httpdns fetch`). Each case asserts the bound it must hold: the connection is closed (within the timeout, or
// before the flood ends), memory stays bounded, and other clients are still served.

import Foundation
import HTTPDNSEngine
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@Suite(.serialized) struct HTTP2AbuseTests {
    /// A client that keeps the server's response window shut (SETTINGS_INITIAL_WINDOW_SIZE 0, and no
    /// WINDOW_UPDATE ever), or stops in the middle of a frame, must not hold its connection forever.
    @Test(arguments: [
        "window never opened", "stalled mid-frame", "stalled mid-body", "DoH POST body never ends (h2)",
        "DoH POST body never ends (HTTP/1.1)", "vendor request head never ends (HTTP/1.1)",
    ])
    func aStalledClientIsClosedWithinTheTimeoutsAndOthersAreServed(_ stall: String) async throws {
        let serve = try await ServeProcess.start(["--request-timeout", "1", "--idle-timeout", "1"])
        defer { Task { await serve.stop() } }
        let started = ContinuousClock.now
        let (bytes, closedAt) = try await withRawConnection(port: serve.port) { inbound, outbound in
            switch stall {
            case "window never opened":
                // The response (404 to GET /) can never be sent: its window is 0.
                try await outbound.write(
                    ByteBuffer(
                        bytes: H2.preface + H2.settings([(4, 0)]) + H2.settingsAck + H2.requestHeaders(stream: 1)
                    )
                )
            case "stalled mid-frame":
                // Half a HEADERS frame's 9-byte header, then nothing.
                try await outbound.write(
                    ByteBuffer(bytes: H2.preface + H2.settings() + Array(H2.requestHeaders(stream: 1).prefix(5)))
                )
            case "DoH POST body never ends (h2)":
                // A DoH POST that sends 10 of the bytes of a query and then nothing.
                try await outbound.write(
                    ByteBuffer(
                        bytes: H2.preface + H2.settings() + H2.postHeaders(stream: 1, path: "/dns-query")
                            + H2.data(stream: 1, [UInt8](repeating: 0, count: 10))
                    )
                )
            case "DoH POST body never ends (HTTP/1.1)":
                try await outbound.write(
                    ByteBuffer(
                        string: "POST /dns-query HTTP/1.1\r\nHost: x\r\nContent-Type: application/dns-message\r\n"
                            + "Content-Length: 100\r\n\r\n0123456789"
                    )
                )
            case "vendor request head never ends (HTTP/1.1)":
                try await outbound.write(ByteBuffer(string: "GET /d?dn=a.test HTTP/1.1\r\nHost: x\r\n"))
            default:
                // A POST whose body never comes.
                try await outbound.write(
                    ByteBuffer(bytes: H2.preface + H2.settings() + H2.requestHeaders(stream: 1, endStream: false))
                )
            }
            // The server's close, timed apart from the other client's visit below.
            async let closed = { (try await readToEnd(inbound), ContinuousClock.now) }()
            // Other clients still get in meanwhile. (A client is held to the same 1 s timeouts: under plain
            // `swift test`'s parallel load one was once too slow to send its request in time, and was
            // closed as it should be; a second try gets in.)
            let engine = try HTTPEngine()
            defer { engine.shutdown() }
            try await eventually("another client served") {
                (try? await rawGet(engine, "http://127.0.0.1:\(serve.port)/healthz").0) == 200
            }
            return try await closed
        }
        let waited = closedAt - started
        // Closed by the server (the read ended) within the timeouts plus slack, not after minutes.
        // 60 s: what a starved 2-core machine cannot miss, far below "minutes".
        #expect(waited < .seconds(60), "\(stall): held \(waited)")
        #expect(bytes.count < 64 << 10, "\(stall): \(bytes.count) bytes")
    }

    /// The engine's side of the same stalls: an origin that stops in the middle of a frame, or never
    /// opens the window an upload needs (SETTINGS_INITIAL_WINDOW_SIZE 0, no WINDOW_UPDATE ever). fetch
    /// must end at its --max-time with curl's 28, not hang, and nothing past the window may be sent.
    @Test(arguments: ["stalled mid-frame", "upload window never opened"])
    func aStalledOriginEndsFetchAtItsMaxTime(_ stall: String) async throws {
        let seen = NIOLockedValueBox(0)
        let origin = try await ScriptedServer.start { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            var bytes: [UInt8] = []
            if stall == "upload window never opened" {
                // Before the client can send a byte of body: no window for any stream.
                try await outbound.write(ByteBuffer(bytes: H2.settings([(4, 0)])))
            }
            while !containsFrame(bytes, type: 1) {
                guard let chunk = try await iterator.next() else { return }
                bytes += chunk.readableBytesView
            }
            if stall == "stalled mid-frame" {
                // SETTINGS, then the first 5 bytes of a HEADERS frame's 9-byte header, then nothing.
                try await outbound.write(
                    ByteBuffer(bytes: H2.settings() + Array(H2.responseHeaders(stream: 1).prefix(5)))
                )
            }
            while let chunk = try await iterator.next() {
                bytes += chunk.readableBytesView
                seen.withLockedValue { $0 = bytes.count }
            }
        }
        defer { Task { await origin.stop() } }
        let body = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-upload-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: body) }
        #expect(FileManager.default.createFile(atPath: body, contents: Data(repeating: 0x61, count: 1 << 20)))
        let upload = stall == "upload window never opened" ? ["-d", "@" + body] : []
        let (r, took) = try await timedCLI(
            ["fetch", "--http2", "http://127.0.0.1:\(origin.port)/", "--max-time", "2"] + upload
        )
        #expect(r.status == 28, "\(stall): \(r.stderr)")
        // A stalled transfer without --max-time never ends; 60 s is a bound a starved machine cannot miss.
        #expect(took < .seconds(60), "\(stall) took \(took)")
        if !upload.isEmpty {
            // Nothing past the window: at most the default 65,535 bytes, which a client may send before
            // the server's SETTINGS reach it (RFC 9113 §6.9.2), plus a few hundred bytes of frames, of
            // the 1 MiB body.
            #expect(seen.withLockedValue { $0 } < 65_535 + 4096, "the engine sent \(seen.withLockedValue { $0 }) bytes")
        }
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
