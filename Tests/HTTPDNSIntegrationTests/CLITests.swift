// The `httpdns resolve` contract, run as a user would: the built binary, its stdout, stderr and exit code.

@testable import HTTPDNSTestSupport
import Foundation
import HTTPDNSEngine
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
        #expect(array.first?["ttl"] as? Int == 5)
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
        #expect(lines.first?.hasPrefix(";; c.test ttl=5s source=dns:127.0.0.1:") == true)
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
        #expect((first["localDNS"] as? [String: Any])?["addresses"] as? [String] == ["127.0.0.66"])
        #expect(first["addresses"] as? [String] == ["127.0.0.1"])
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
