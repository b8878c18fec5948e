// The `httpdns resolve` contract, run as a user would: the built binary, its stdout, stderr and exit code.

import Foundation
import HTTPDNSEngine
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOPosix
import Testing

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct CLIPeerTests {
    @Test func resolveJSONThroughKresdDoH() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "b.test", "--json", "--cacert", peers.ca, "--resolver",
            "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 2)
        #expect(array.first?["name"] as? String == "a.test")
        #expect(array.first?["addresses"] as? [String] == ["127.0.0.1", "::1"])
        // kresd's TTL, 5, as the cache keeps it: raised to its minTTL, 10 (the first answer says what
        // every later one from the cache says).
        #expect(array.first?["ttl"] as? Int == 10)
        #expect((array.first?["source"] as? String)?.hasPrefix("doh:https://127.0.0.1") == true)
        #expect(array.first?["elapsedMs"] is Double)
    }

    @Test func plainOutputIsLikeDigShortWithSourceAndTTL() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "c.test", "--type", "a", "--resolver", "dns:127.0.0.1:\(peers.kresdDNS.1)",
        ])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix(";; c.test ttl=10s source=dns:127.0.0.1:") == true, "\(lines)")
        #expect(lines.dropFirst() == ["127.0.0.1"])
    }

    @Test func compareReportsTheHijackingLocalDNS() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "--compare", "--json", "--type", "a", "--cacert", peers.ca,
            "--resolver", "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query",
            "--local-dns", "dns:127.0.0.2:\(peers.hijacker.1)",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let first = try #require(
            (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])?.first
        )
        #expect(first["hijacked"] as? Bool == true)
        #expect(first["verdict"] as? String == "hijacked")
        #expect((first["localDNS"] as? [String: Any])?["addresses"] as? [String] == ["127.0.0.66"])
        #expect(first["addresses"] as? [String] == ["127.0.0.1"])
    }

    /// One verdict per name, from real resolvers: dnsmasq hijacks a.test and answers NXDOMAIN for
    /// doh.test (which kresd resolves), kresd's own Do53 agrees with its DoH, the system resolver knows
    /// no .test name, and a dead HTTPDNS leaves nothing to judge by.
    @Test func compareGivesOneVerdictPerNameAgainstRealResolvers() async throws {
        let peers = try Peers.require()
        let doh = "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query"
        let kresd = "dns:127.0.0.1:\(peers.kresdDNS.1)"
        func verdicts(_ r: CLIResult) throws -> [String: (String?, Bool?)] {
            let all = try #require(
                try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]],
                "\(r.stdout)"
            )
            return Dictionary(
                uniqueKeysWithValues: all.map {
                    ($0["name"] as! String, ($0["verdict"] as? String, $0["hijacked"] as? Bool))
                }
            )
        }

        let hijacker = try await runCLI([
            "resolve", "a.test", "doh.test", "--compare", "--json", "--type", "a", "--cacert", peers.ca,
            "--resolver", doh, "--local-dns", "dns:127.0.0.2:\(peers.hijacker.1)",
        ])
        #expect(hijacker.status == 0, "\(hijacker.stderr)")
        let fromHijacker = try verdicts(hijacker)
        #expect(fromHijacker["a.test"]?.0 == "hijacked" && fromHijacker["a.test"]?.1 == true)
        #expect(fromHijacker["doh.test"]?.0 == "blocked" && fromHijacker["doh.test"]?.1 == true)

        let honest = try await runCLI([
            "resolve", "c.test", "--compare", "--json", "--type", "a", "--cacert", peers.ca,
            "--resolver", doh, "--local-dns", kresd,
        ])
        let fromHonest = try verdicts(honest)
        #expect(fromHonest["c.test"]?.0 == "consistent" && fromHonest["c.test"]?.1 == false, "\(honest.stdout)")

        // Text: the system resolver has no c.test (NXDOMAIN, or no answer where it cannot reach a server).
        let system = try await runCLI([
            "resolve", "c.test", "--compare", "--type", "a", "--timeout", "3", "--resolver", kresd,
            "--local-dns", "system",
        ])
        #expect(system.status == 0, "\(system.stderr)")
        #expect(system.stdout.contains("c.test localdns(system): "), "\(system.stdout)")
        #expect(system.stdout.hasSuffix("-> BLOCKED\n"), "\(system.stdout)")

        let dead = try await runCLI([
            "resolve", "c.test", "--compare", "--json", "--type", "a", "--no-fallback", "--resolver",
            "dns:127.0.0.1:1", "--local-dns", kresd,
        ])
        #expect(dead.status == 1)
        let fromDead = try verdicts(dead)
        #expect(fromDead["c.test"]?.0 == "unverified" && fromDead["c.test"]?.1 == false, "\(dead.stdout)")
    }

    /// Cold start against a real short-TTL upstream (kresd, c.test at 5 s): a run writes its cache
    /// file, the file is aged by an hour (as if the app were relaunched an hour later; an injected clock
    /// is not possible across processes, and waiting an hour is not a test), then the next run answers
    /// from it at once with --serve-expired, and with a round trip without it.
    @Test func serveExpiredAnswersARelaunchAnHourLaterFromTheCacheFile() async throws {
        let peers = try Peers.require()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cold-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let kresd = "dns:127.0.0.1:\(peers.kresdDNS.1)"
        let base = [
            "resolve", "c.test", "--type", "a", "--json", "--resolver", kresd, "--cache-file", file.path,
            "--network-id", "cold-start",
        ]
        func first(_ r: CLIResult) throws -> [String: Any] {
            try #require(
                (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])?.first,
                "\(r.stdout)"
            )
        }
        func ageFile(by seconds: Int64) throws {
            var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
            var entries = try #require(json["entries"] as? [[String: Any]])
            for i in entries.indices {
                var entry = try #require(entries[i]["entry"] as? [String: Any])
                for field in ["storedAt", "expiresAt", "lastUsed"] {
                    var stamp = try #require(entry[field] as? [String: Any])
                    stamp["nanoseconds"] = try #require(stamp["nanoseconds"] as? Int64) - seconds * 1_000_000_000
                    entry[field] = stamp
                }
                entries[i]["entry"] = entry
            }
            json["entries"] = entries
            try JSONSerialization.data(withJSONObject: json).write(to: file)
        }

        let yesterday = try first(try await runCLI(base))
        #expect(yesterday["source"] as? String == kresd)
        try ageFile(by: 3600)
        let saved = try Data(contentsOf: file)

        let relaunched = try first(try await runCLI(base + ["--serve-expired", "86400"]))
        #expect(relaunched["source"] as? String == "stale(\(kresd))", "\(relaunched)")
        #expect(relaunched["addresses"] as? [String] == ["127.0.0.1"])
        let expired = try #require(relaunched["expiredFor"] as? Double)
        #expect(expired > 3500 && expired < 3700, "\(expired)")

        try saved.write(to: file)  // the same hour-old file, without the window: a round trip first
        let cold = try first(try await runCLI(base))
        #expect(cold["source"] as? String == kresd, "\(cold)")
        #expect(cold["expiredFor"] == nil)

        let bad = try await runCLI(base + ["--serve-expired", "700000"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--serve-expired"), "\(bad.stderr)")
    }

    @Test func failedNameExitsOneWithAnErrorPerName() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "www.nx.test", "--no-fallback", "--resolver", "dns:127.0.0.1:\(peers.kresdDNS.1)",
        ])
        #expect(r.status == 1)
        #expect(r.stdout.contains("127.0.0.1"))
        #expect(r.stderr.contains("www.nx.test: no A or AAAA record"))
        #expect(!r.stderr.contains("a.test:"))
    }

    @Test func deadFirstResolverStillResolvesWithinTheTimeout() async throws {
        let peers = try Peers.require()
        let r = try await runCLI([
            "resolve", "a.test", "--timeout", "3", "--no-fallback", "--resolver", "dns:127.0.0.1:1", "--resolver",
            "dns:127.0.0.1:\(peers.kresdDNS.1)",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("127.0.0.1"))
    }
}
