// Attacks by hostile peers, each against the real binary or the real handler, each asserting the bound
// that now holds: exit code, time, bytes delivered, memory (RSS from /proc). Hermetic: the hostile peers
// are written in HostilePeers.swift and run on loopback; no external peer is needed.
// MARK: - A hostile HTTP/2 origin against `httpdns fetch`
/// What a raw-frame origin sends once the client has opened stream 1.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSKit
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

@Suite(.serialized) struct HostileResolverTests {
    @Test func twentyThousandAddressesCostLittleAndKeepSixtyFour() async throws {
        let many = (0..<20_000).map { "1.0.\($0 / 256).\($0 % 256)" }.joined(separator: ";") + ",60"
        let resolver = try await HTTPFixtureServer.start { _, _, _ in (.ok, "text/plain", Array(many.utf8)) }
        defer { Task { await resolver.stop() } }
        let (r, took) = try await timedCLI([
            "resolve", "big.example.com", "--resolver", "dnspod:http://127.0.0.1:\(resolver.port)/d",
            "--no-fallback", "--timeout", "5",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").filter { !$0.hasPrefix(";;") }
        #expect(lines.count == 64)
        // A blow-up check, not a speed target: the quadratic handling took ~21 s of CPU; a fraction of a
        // second is expected. The process's own CPU time is measured, not the wall time, which plain
        // `swift test` with busy loops beside it stretched to 19 s.
        #expect(r.cpuTime < .seconds(8), "used \(r.cpuTime) of CPU (\(took) of wall time)")
    }

    @Test func twentyThousandRejectedAddressesGiveAShortMessage() async throws {
        let many = (0..<20_000).map { "10.0.\($0 / 256).\($0 % 256)" }.joined(separator: ";") + ",60"
        let resolver = try await HTTPFixtureServer.start { _, _, _ in (.ok, "text/plain", Array(many.utf8)) }
        defer { Task { await resolver.stop() } }
        // 5 s: the answer is 300 KB, and under plain `swift test` (every suite at once, two cores) a 1 s
        // timeout ended one run in 20 before the answer was read, with another message.
        let r = try await runCLI([
            "resolve", "big.example.com", "--resolver", "dnspod:http://127.0.0.1:\(resolver.port)/d",
            "--no-fallback", "--timeout", "5",
        ])
        #expect(r.status == 1)
        #expect(r.stderr.utf8.count < 2000, "\(r.stderr.utf8.count) bytes of error")  // was 1.1 MB
        #expect(r.stderr.contains("non-global"))
    }

    @Test func anAlibabaAnswerForAnotherNameIsRefused() async throws {
        let resolver = try await HTTPFixtureServer.start { _, _, _ in
            (.ok, "application/json", Array(#"{"host":"evil.example.com","ips":["1.2.3.4"],"ttl":60}"#.utf8))
        }
        defer { Task { await resolver.stop() } }
        let r = try await runCLI([
            "resolve", "a.example.com", "--resolver", "json:http://127.0.0.1:\(resolver.port)/resolve",
            "--no-fallback",
        ])
        #expect(r.status == 1, "\(r.stdout)")
        #expect(r.stderr.contains("not for the name asked"), "\(r.stderr)")
        #expect(!r.stdout.contains("1.2.3.4"))
    }

    @Test func aLookupWithItsFallbackEndsWithinTheTimeout() async throws {
        let (dead1, port1) = try await startBlackhole()
        let (dead2, port2) = try await startBlackhole()
        defer {
            dead1.close(promise: nil)
            dead2.close(promise: nil)
        }
        let (r, took) = try await timedCLI([
            "resolve", "x.example.com", "--resolver", "dns:127.0.0.1:\(port1)", "--local-dns", "dns:127.0.0.1:\(port2)",
            "--timeout", "30",
        ])
        #expect(r.status == 1)
        // The bug gave the fallback a whole timeout of its own: 60 s here. Correct is 30 s plus the start
        // and exit of the process; 48 s leaves that 18 s, more than a starved 2-core machine has been seen
        // to add (12 s), and still tells the two apart. (--timeout 6 with a 10 s bound failed under load.)
        #expect(took < .seconds(48), "took \(took) with --timeout 30")
    }

    @Test func fetchMaxTimeCoversTheLookup() async throws {
        let (dead, port) = try await startBlackhole()
        defer { dead.close(promise: nil) }
        let (r, took) = try await timedCLI([
            "fetch", "http://x.example.com/", "--resolver", "dns:127.0.0.1:\(port)", "--no-fallback", "--timeout",
            "300", "--max-time", "2",
        ])
        #expect(r.status == 28, "\(r.stderr)")  // was 6 (after 5.2 s with --timeout 10)
        // --max-time 2 must end the lookup, not the lookup's own 300 s timeout: 60 s (many times the
        // 2 s expected, a fifth of 300 s) tells the two apart without timing this machine.
        #expect(took < .seconds(60), "took \(took) with --max-time 2 and --timeout 300")
    }

    @Test func aDatagramWithOurIDButAnotherQuestionIsIgnored() async throws {
        // Answers every query twice: first a forgery (right id, other question), then the real answer.
        let channel = try await startUDPPeer { ForgingDNSHandler() }
        defer { channel.close(promise: nil) }
        let provider = try Do53Provider(server: IPAddress("127.0.0.1")!, port: channel.localAddress!.port!)
        let answer = try await provider.resolve("a.example.com", family: .ipv4, deadline: .now() + .seconds(3))
        #expect(answer.addresses == [IPAddress("198.51.0.1")!])  // before: "answered another question"
    }
}
