// Attacks from issue 10, each against the real binary or the real handler, each asserting the bound
// that now holds: exit code, time, bytes delivered, memory (RSS from /proc). Hermetic: the hostile peers
// are written in HostilePeers.swift and run on loopback; no external peer is needed.
// MARK: - A hostile HTTP/2 origin against `httpdns fetch`
/// What a raw-frame origin sends once the client has opened stream 1.

@testable import HTTPDNSTestSupport
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLocalProxy
import HTTPDNSLookup
import HTTPDNSServer
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@Suite struct HostileProxyClientTests {
    /// An echo server that half-closes back when the client half-closes, so "everything arrived" shows.
    func startHalfCloseEcho() async throws -> ScriptedServer {
        try await ScriptedServer.start { inbound, outbound in
            for try await chunk in inbound { try await outbound.write(chunk) }
            outbound.finish()
        }
    }

    @Test func bytesBehindTheConnectHeadAndAHalfCloseReachTheTarget() async throws {
        let echo = try await startHalfCloseEcho()
        defer { Task { await echo.stop() } }
        let proxy = try await startProxy(makeResolver([]), engine: try HTTPEngine()) {
            $0.allowedPorts.insert(echo.port)
            $0.tunnelIdleTimeout = .seconds(20)
        }
        defer { Task { await proxy.stop() } }
        let payload = "hello through the tunnel"
        let started = ContinuousClock.now
        let reply = try await withRawConnection(port: proxy.port) { inbound, outbound -> String in
            try await outbound.write(
                ByteBuffer(string: "CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: x\r\n\r\n\(payload)")
            )
            outbound.finish()  // shutdown(SHUT_WR) before the 200 has come back
            return String(decoding: try await readToEnd(inbound), as: UTF8.self)
        }
        // Before: the bytes never reached the target and the tunnel hung.
        #expect(reply.hasPrefix("HTTP/1.1 200"), "\(reply)")
        #expect(reply.hasSuffix("\r\n\r\n\(payload)"), "\(reply)")
        // The target saw the half-close and ended the tunnel; nothing waited for the idle timeout. A hang
        // check, not a speed target: the tunnel ends in milliseconds, the idle timeout is 20 s.
        let took = ContinuousClock.now - started
        #expect(took < .seconds(10), "the tunnel ended after \(took) (idle timeout 20 s)")
    }

    /// Hostile round 2 (issue 29): a CONNECT to the proxy's own address and port, with that port allowed
    /// (an operator who allows every port). Refused with 508 instead of a tunnel into itself, which a
    /// client could nest without end; other clients are still served.
    @Test func aTunnelToTheProxyItselfIsRefused() async throws {
        let echo = try await startHalfCloseEcho()
        defer { Task { await echo.stop() } }
        let proxy = try await startProxy(makeResolver([]), engine: try HTTPEngine()) {
            $0.allowedPorts = Set(1...65535)
        }
        defer { Task { await proxy.stop() } }
        let started = ContinuousClock.now
        let reply = try await withRawConnection(port: proxy.port) { inbound, outbound -> String in
            try await outbound.write(ByteBuffer(string: "CONNECT 127.0.0.1:\(proxy.port) HTTP/1.1\r\nHost: x\r\n\r\n"))
            return String(decoding: try await readToEnd(inbound), as: UTF8.self)
        }
        #expect(reply.hasPrefix("HTTP/1.1 508"), "\(reply)")
        #expect(reply.contains("is this proxy itself"), "\(reply)")
        #expect(ContinuousClock.now - started < .seconds(10), "the refusal hung")
        // Another client, another target: served.
        let other = try await withRawConnection(port: proxy.port) { inbound, outbound -> String in
            try await outbound.write(
                ByteBuffer(string: "CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: x\r\n\r\nping")
            )
            outbound.finish()
            return String(decoding: try await readToEnd(inbound), as: UTF8.self)
        }
        #expect(other.hasPrefix("HTTP/1.1 200") && other.hasSuffix("ping"), "\(other)")
    }

    @Test func absoluteFormToAPortConnectWouldRefuseIsRefused() async throws {
        let hits = NIOLockedValueBox(0)
        let target = try await HTTPFixtureServer.start { _, _, _ in
            hits.withLockedValue { $0 += 1 }
            return (.ok, "text/plain", Array("internal".utf8))
        }
        defer { Task { await target.stop() } }
        let proxy = try await startProxy(makeResolver([]), engine: try HTTPEngine())
        defer { Task { await proxy.stop() } }
        let reply = try await withRawConnection(port: proxy.port) { inbound, outbound -> String in
            try await outbound.write(
                ByteBuffer(string: "GET http://127.0.0.1:\(target.port)/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            )
            return String(decoding: try await readToEnd(inbound), as: UTF8.self)
        }
        #expect(reply.hasPrefix("HTTP/1.1 403"), "\(reply)")
        #expect(hits.withLockedValue { $0 } == 0)
    }

    @Test func headersNamedInConnectionAreNotForwarded() async throws {
        let seen = NIOLockedValueBox<HTTPHeaders>([:])
        let target = try await HTTPFixtureServer.start { _, _, headers in
            seen.withLockedValue { $0 = headers }
            return (.ok, "text/plain", Array("ok".utf8))
        }
        defer { Task { await target.stop() } }
        let proxy = try await startProxy(makeResolver([]), engine: try HTTPEngine()) {
            $0.allowedPorts.insert(target.port)
        }
        defer { Task { await proxy.stop() } }
        let reply = try await withRawConnection(port: proxy.port) { inbound, outbound -> String in
            try await outbound.write(
                ByteBuffer(
                    string:
                        "GET http://127.0.0.1:\(target.port)/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close, X-Secret\r\nX-Secret: token\r\nX-Kept: yes\r\n\r\n"
                )
            )
            return String(decoding: try await readToEnd(inbound), as: UTF8.self)
        }
        #expect(reply.hasPrefix("HTTP/1.1 200"), "\(reply)")
        let headers = seen.withLockedValue { $0 }
        #expect(headers["x-secret"].isEmpty)
        #expect(headers["x-kept"] == ["yes"])
    }
}
