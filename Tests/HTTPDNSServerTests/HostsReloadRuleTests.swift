// When the hosts-file poll reads a changed file (HostsReloadRule): once the file has stopped changing for
// the settle time, so a file rewritten in place is never read half written. On a virtual clock; the
// executor's test (a service polling every 20 ms) is below.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSServer
import Testing
@testable import HTTPDNSTestSupport

@Suite struct HostsReloadRuleTests {
    let t0 = ContinuousClock.now

    @Test func aChangeIsReadOnceItHasStayedTheSameForTheSettleTime() {
        var rule = HostsReloadRule(settle: .seconds(2))
        #expect(rule.polled("v1", current: "v1", now: t0) == .wait, "unchanged")
        #expect(rule.polled("v2", current: "v1", now: t0 + .seconds(1)) == .wait, "just changed")
        #expect(rule.polled("v2", current: "v1", now: t0 + .seconds(2)) == .wait, "1 s quiet")
        #expect(rule.polled("v2", current: "v1", now: t0 + .seconds(3)) == .read, "2 s quiet")
        #expect(rule.polled("v2", current: "v2", now: t0 + .seconds(4)) == .wait, "read")
    }

    @Test func aFileWrittenInTwoHalvesIsReadOnlyWhole() {
        var rule = HostsReloadRule(settle: .seconds(2))
        // The first half at 0 s, the second at 1.5 s (hostile round 4), polled every second.
        #expect(rule.polled("half", current: "old", now: t0 + .seconds(1)) == .wait)
        #expect(rule.polled("whole", current: "old", now: t0 + .seconds(2)) == .wait, "the half was never read")
        #expect(rule.polled("whole", current: "old", now: t0 + .seconds(3)) == .wait)
        #expect(rule.polled("whole", current: "old", now: t0 + .seconds(4)) == .read)
    }

    @Test func aFileThatCannotBeReadIsNotAChangeToRead() {
        var rule = HostsReloadRule(settle: .seconds(2))
        #expect(rule.polled(nil, current: "v1", now: t0) == .wait)
        #expect(rule.polled(nil, current: "v1", now: t0 + .seconds(10)) == .wait)
    }

    @Test func withoutASettleTimeAChangeIsReadAtOnce() {
        var rule = HostsReloadRule(settle: .zero)
        #expect(rule.polled("v2", current: "v1", now: t0) == .read)
    }

    /// The poll of a running service (every 20 ms) leaves a file written in place alone until it has
    /// settled; `reloadHosts(force:)` (SIGHUP) reads it at once.
    @Test func thePollWaitsForAHalfWrittenFileAndSIGHUPDoesNot() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-settle-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "198.51.0.20 first.example.com\n198.51.0.21 second.example.com\n".write(
            toFile: path,
            atomically: true,
            encoding: .utf8
        )
        let service = try await startService {
            $0.hostsFile = path
            $0.hostsReloadInterval = .milliseconds(20)
            // Far longer than this test waits: the poll must not read the half file meanwhile.
            $0.hostsSettle = .seconds(600)
        }
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        /// What serve answers for `name` in DNSPod's form: its address, or "0" for none.
        func answer(_ name: String) async throws -> String {
            try await rawGet(engine, "http://127.0.0.1:\(service.ports[0])/d?dn=\(name)").1
        }
        #expect(try await answer("second.example.com") == "198.51.0.21")
        // Half of the new version, written in place.
        try "198.51.0.20 first.example.com\n".write(toFile: path, atomically: false, encoding: .utf8)
        // Many polls happen meanwhile (each 20 ms); none reads it.
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await answer("second.example.com") == "198.51.0.21", "the half-written file was read")
        // The whole new version; the operator sends SIGHUP.
        try "198.51.0.20 first.example.com\n198.51.0.22 third.example.com\n".write(
            toFile: path,
            atomically: false,
            encoding: .utf8
        )
        #expect(try service.reloadHosts(force: true))
        #expect(try await answer("third.example.com") == "198.51.0.22")
        #expect(try await answer("second.example.com") == "0")
    }
}
