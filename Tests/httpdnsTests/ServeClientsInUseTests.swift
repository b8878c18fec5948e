// Hostile round 5, items 1 and 2, against `httpdns serve` as an operator runs it: a client using its
// HTTP/2 connection keeps it through a flood of silent newcomers, and a steady slow reader gets its whole
// answer. The rules behind them are tested without a process in ConnectionSlotsTests (HTTPDNSEngineTests).

import Foundation
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOCore
import Testing

@Suite struct ServeClientsInUseTests {
    /// One h2c connection's frames as they arrive.
    struct FrameReader {
        var iterator: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
        var bytes: [UInt8] = []
        var frames: [H2.Frame] { H2.frames(in: bytes) }

        /// Reads until `done` holds of the frames so far; false when the connection closed first.
        mutating func read(until done: ([H2.Frame]) -> Bool) async throws -> Bool {
            while !done(frames) {
                guard let chunk = try await iterator.next() else { return false }
                bytes += chunk.readableBytesView
            }
            return true
        }
    }

    /// Item 1: a hosts answer went from its request to its last frame within one read, so its
    /// connection never counted as used, and a flood of silent newcomers closed it first ("never carried
    /// a request"): 8 of 8 times. Now it is a client in use and the newcomers make room among themselves.
    @Test func anHTTP2ClientAnsweredFromTheHostsFileKeepsItsConnectionThroughAFlood() async throws {
        // Timeouts a starved machine cannot miss: the client's connection must not close for them.
        let serve = try await ServeProcess.start([
            "--max-connections", "8", "--request-timeout", "600", "--idle-timeout", "600",
        ])
        defer { Task { await serve.stop() } }
        try await withRawConnection(port: serve.port) { inbound, outbound in
            var reader = FrameReader(iterator: inbound.makeAsyncIterator())
            func answered(_ stream: UInt32) -> ([H2.Frame]) -> Bool {
                { frames in frames.contains { $0.stream == stream && $0.type == 0 && $0.flags & 1 != 0 } }
            }
            try await outbound.write(
                ByteBuffer(
                    bytes: H2.preface + H2.settings() + H2.settingsAck
                        + H2.getHeaders(stream: 1, path: "/d?dn=served.example.com")
                )
            )
            #expect(try await reader.read(until: answered(1)))
            var crowd: [any Channel] = []
            defer { for channel in crowd { channel.close(promise: nil) } }
            for round in 0..<3 {
                // 40 silent newcomers against 8 slots, then a query on the kept connection.
                for _ in 0..<40 {
                    if let channel = try? await rawTCPConnection(port: serve.port) { crowd.append(channel) }
                }
                try await Task.sleep(for: .milliseconds(1500))
                let stream = UInt32(3 + 2 * round)
                try await outbound.write(
                    ByteBuffer(bytes: H2.getHeaders(stream: stream, path: "/d?dn=served.example.com"))
                )
                let kept = try await reader.read(until: answered(stream))
                #expect(kept, "round \(round): the client's connection was closed")
                guard kept else { return }
            }
        }
        #expect(serve.process.isRunning, "\(serve.errors)")
    }

    /// Item 2: a 118 KB answer read at 8 KB a second through a 16 KiB window got RST_STREAM CANCEL once
    /// `--request-timeout` had passed since it was written, though it never stalled: the send timeout
    /// timed the whole answer. It now times each gap (nginx's send_timeout), so the reader gets it all.
    /// Here: a DNSPod batch answer of about 25 KB, read at 2 KB a second (about 12 s, twice the timeout).
    @Test func aSteadySlowReaderGetsAnAnswerThatTakesLongerThanTheRequestTimeout() async throws {
        let hosts = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-big-\(UUID())").path
        // 50 names of 40 addresses each.
        let lines = (0..<2000).map { "10.\($0 / 250).\($0 % 250).1 n\($0 / 40).big.example" }
        try (lines.joined(separator: "\n") + "\n").write(toFile: hosts, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: hosts) }
        let path = "/d?dn=" + (0..<50).map { "n\($0).big.example" }.joined(separator: ",")
        let serve = try await ServeProcess.launch([
            "--listen", "127.0.0.1:0", "--hosts", hosts, "--request-timeout", "6", "--idle-timeout", "600",
        ])
        defer { Task { await serve.stop() } }
        let (received, ended, reset) = try await withHangGuard("the slow read did not end") {
            try await withRawConnection(port: serve.port) { inbound, outbound in
                var reader = FrameReader(iterator: inbound.makeAsyncIterator())
                try await outbound.write(
                    ByteBuffer(
                        bytes: H2.preface + H2.settings([(4, 2048)]) + H2.settingsAck
                            + H2.getHeaders(stream: 1, path: path)
                    )
                )
                var taken = 0
                while true {
                    // Whatever the window let through, then 2 KB more a second.
                    try await Task.sleep(for: .seconds(1))
                    try await outbound.write(
                        ByteBuffer(bytes: H2.windowUpdate(stream: 1, 2048) + H2.windowUpdate(2048))
                    )
                    let over = try await reader.read { frames in
                        let data = frames.filter { $0.stream == 1 && $0.type == 0 }.reduce(0) { $0 + $1.payload.count }
                        return data > taken || frames.contains { $0.stream == 1 && ($0.type == 3 || $0.flags & 1 != 0) }
                    }
                    let frames = reader.frames.filter { $0.stream == 1 }
                    taken = frames.filter { $0.type == 0 }.reduce(0) { $0 + $1.payload.count }
                    let ended = frames.contains { $0.type == 0 && $0.flags & 1 != 0 }
                    let reset = frames.contains { $0.type == 3 }
                    if !over || ended || reset { return (taken, ended, reset) }
                }
            }
        }
        #expect(received > 14_000, "the answer is \(received) bytes: too small to outlast the timeout")
        #expect(ended && !reset, "\(received) bytes, then \(reset ? "RST_STREAM" : "the end")")
    }
}
