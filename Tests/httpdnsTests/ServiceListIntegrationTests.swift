// Service-IP lists against a vendor-style peer this project did not write
// (Tests/Fixtures/vendors/ecs_peer.py, listening on 127.0.0.1, .2 and .3 at one port, logging which
// address each request came in on) and against `httpdns serve` moving its clients to a replica: the list
// is fetched as the vendors' SDKs fetch it, queries go to the listed addresses in order (a dead one
// skipped), the bootstrap address is the last resort, a one-shot CLI run fetches the list before its
// first query, the list is saved beside the cache file and used by the next run without a fetch, and a
// scheduler's "disable" stops queries.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOPosix
import Testing

@Suite(.serialized) struct ServiceListIntegrationTests {
    typealias Peer = ClientSubnetTests.Peer
    let bootstrap = IPAddress("127.0.0.1")!
    let replica = IPAddress("127.0.0.2")!
    let dead = IPAddress("127.0.0.4")!

    @Test func alibabaListIsFetchedUsedInOrderSavedAndRestored() async throws {
        let peer = try await Peer.start(serviceIPs: "127.0.0.4,127.0.0.2")
        defer { peer.stop() }
        let cache = peer.dir + "/cache.json"
        func resolver() throws -> HTTPDNSResolver {
            try peer.alibabaResolver("/139450/d") {
                $0.serviceLists = ServiceListSettings()
                $0.persistencePath = cache
            }
        }
        let first = try resolver()
        // The first query goes out at once to the bootstrap address; the list is fetched beside it.
        _ = try await first.resolve("a.test", .ipv4)
        await first.refreshServiceLists()
        let routes = try #require(first.serviceAddresses(0))
        #expect(routes.list?.ipv4 == [dead, replica])
        #expect(routes.addresses == [dead, replica, bootstrap])
        #expect(peer.seen.contains("alibaba-ss region=global platform=linux"), "\(peer.seen)")
        // Next: the dead address refuses, the replica answers and is used first from then on.
        _ = try await first.resolve("b.test", .ipv4)
        #expect(first.serviceAddresses(0)?.preferred == replica)
        #expect(peer.seen.contains("at=127.0.0.2 /139450/sign_d"), "\(peer.seen)")
        await first.shutdown()
        let saved = try String(contentsOfFile: cache + ".servers", encoding: .utf8)
        #expect(saved.contains("127.0.0.2") && !saved.contains(ClientSubnetTests.aliSecret))

        // A restart uses the saved list without asking again.
        let second = try resolver()
        #expect(second.serviceAddresses(0)?.list?.ipv4 == [dead, replica])
        let before = peer.seen.filter { $0.hasPrefix("at=127.0.0.2 ") }.count
        _ = try await second.resolve("c.test", .ipv4)
        await second.waitForBackgroundWork()
        #expect(peer.seen.filter { $0.hasPrefix("alibaba-ss") }.count == 1, "\(peer.seen)")
        #expect(peer.seen.filter { $0.hasPrefix("at=127.0.0.2 ") }.count == before + 1, "\(peer.seen)")
        await second.shutdown()
    }

    @Test func bootstrapIsTheLastResortAndADisablingSchedulerStopsQueries() async throws {
        // Every listed address dead: the query still gets through, to the bootstrap address.
        let peer = try await Peer.start(serviceIPs: "127.0.0.4,127.0.0.5")
        defer { peer.stop() }
        let resolver = try peer.alibabaResolver("/139450/d") { $0.serviceLists = ServiceListSettings() }
        await resolver.refreshServiceLists()
        #expect(resolver.serviceAddresses(0)?.addresses.last == bootstrap)
        let answer = try await resolver.resolve("a.test", .ipv4)
        #expect(answer.ipv4 == [IPAddress("192.0.2.1")!])
        #expect(peer.seen.contains("at=127.0.0.1 /139450/sign_d"), "\(peer.seen)")
        await resolver.shutdown()

        let off = try await Peer.start(serviceIPs: "disable")
        defer { off.stop() }
        let stopped = try off.alibabaResolver("/139450/d") { $0.serviceLists = ServiceListSettings() }
        await stopped.refreshServiceLists()
        let error = await #expect(throws: ResolverError.self) { try await stopped.resolve("a.test", .ipv4) }
        #expect(
            error?.description.contains("switched off by its scheduling endpoint") == true,
            "\(String(describing: error))"
        )
        #expect(!off.seen.contains { $0.contains("sign_d") }, "no query is sent: \(off.seen)")
        await stopped.shutdown()
    }

    @Test func dnspodConfIsDecryptedAndTheNextRunQueriesTheReplica() async throws {
        let peer = try await Peer.start(serviceIPs: "127.0.0.4,127.0.0.2")
        defer { peer.stop() }
        let cache = peer.dir + "/cache.json"
        let flags = peer.flags("dnspod-aes") + ["--service-list", "--cache-file", cache, "--no-fallback"]
        for name in ["a.test", "b.test"] {
            let r = try await runCLI(["resolve", name, "--type", "a", "--timeout", "5"] + flags)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout.contains("192.0.2.1"), "\(r.stdout)")
        }
        let seen = peer.seen
        // One /conf (its ttl is a minute), fetched before the first run's query, as the SDKs fetch it at
        // start: both runs asked the replica (the dead address first), never the start IP.
        #expect(seen.filter { $0 == "dnspod-conf" }.count == 1, "\(seen)")
        #expect(seen.filter { $0 == "at=127.0.0.2 /d" }.count == 2, "\(seen)")
        #expect(!seen.contains("at=127.0.0.1 /d") && !seen.contains("at=127.0.0.3 /d"), "\(seen)")
    }

    @Test func serveMovesItsClientsToTheReplicaItLists() async throws {
        let ws = try CommercialCLITests.Workspace()
        let binary = httpdnsBinary
        /// The server and its port; throws when it printed no address (it could not listen), with its stderr.
        func start(_ listen: String, _ extra: [String]) async throws -> (ChildProcess, Int) {
            let (process, line) = try await startInBackground(
                binary,
                [
                    "serve", "--listen", listen, "--hosts", ws.path("hosts"),
                    "--alibaba-account", "139450:\(ws.path("alibaba.secret"))",
                    "--dnspod-token", "1003:\(ws.path("token"))",
                    "--tls-cert", ws.path("cert.pem"), "--tls-key", ws.path("key.pem"),
                ] + extra,
                stderr: ws.path("serve-\(listen).log")
            )
            let host = String(listen.prefix { $0 != ":" }) + ":"
            guard let after = line.range(of: host), let port = Int(line[after.upperBound...].prefix { $0.isNumber })
            else {
                process.stopNow()
                let stderr = (try? String(contentsOfFile: ws.path("serve-\(listen).log"), encoding: .utf8)) ?? ""
                throw ServeDidNotStart(listen: listen, stderr: stderr)
            }
            return (process, port)
        }
        // The replica first, on 127.0.0.2; the server clients know, on 127.0.0.1 at the same port, lists it.
        let ((replicaServer, port), (frontServer, _)) = try await onOnePort(
            { port in try await start("127.0.0.2:\(port)", ["--access-log", ws.path("replica.log")]) },
            port: { $0.1 },
            { port in
                try await start(
                    "127.0.0.1:\(port)",
                    ["--service-ip", "127.0.0.2", "--service-list-ttl", "5", "--access-log", ws.path("front.log")]
                )
            },
            release: { $0.0.stopNow() }
        )
        defer {
            for p in [frontServer, replicaServer] {
                p.stopNow()
            }
        }
        let cache = ws.path("cache.json")
        // Over HTTPS to a hostname: the certificate is checked for localhost on whichever address is used.
        let forms: [[String]] = [
            [
                "--resolver", "json:https://localhost:\(port)/139450/d", "--alibaba-secret-file",
                ws.path("alibaba.secret"),
            ],
            [
                "--resolver", "dnspod:https://localhost:\(port)/d", "--dnspod-id", "1003", "--dnspod-token-file",
                ws.path("token"),
            ],
        ]
        for (i, form) in forms.enumerated() {
            let flags =
                form + [
                    "--bootstrap", "localhost=127.0.0.1", "--cacert", ws.path("ca.pem"), "--service-list",
                    "--cache-file", "\(cache)\(i)", "--no-fallback", "--type", "a",
                ]
            for _ in 0..<2 {
                let r = try await runCLI(["resolve", "a.test", "--timeout", "5"] + flags)
                #expect(r.status == 0 && r.stdout.contains("127.0.0.1"), "\(form): \(r.stderr)")
                // The answer's cache goes, the list (saved beside it) stays: the next run asks again.
                try FileManager.default.removeItem(atPath: "\(cache)\(i)")
                #expect(FileManager.default.fileExists(atPath: "\(cache)\(i).servers"))
            }
        }
        // The paths each server was asked for, from its access log.
        func paths(_ log: String) -> [String] {
            ((try? String(contentsOfFile: ws.path(log), encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                let object = try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                return object?["path"] as? String
            }
        }
        // Each client asked the front for the list only, once, before its first query; both runs' queries
        // went to the replica.
        let front = paths("front.log")
        let replicated = paths("replica.log")
        #expect(front.sorted() == ["/139450/ss", "/conf"], "\(front)")
        #expect(replicated.sorted() == ["/139450/sign_d", "/139450/sign_d", "/d", "/d"], "\(replicated)")
        // Usage errors name the flag.
        for wrong in ["not-an-ip", "127.0.0.2:0", "127.0.0.2:99999", "[::1]:x", "::1:80x"] {
            let bad = try await runCLI(["serve", "--listen", "127.0.0.1:0", "--service-ip", wrong])
            #expect(bad.status == 64 && bad.stderr.contains("--service-ip"), "\(wrong): \(bad.stderr)")
        }
        let region = try await runCLI([
            "resolve", "a.test", "--resolver", "dns:127.0.0.1:9", "--service-list-region", "cn",
        ])
        #expect(region.status == 64 && region.stderr.contains("--service-list"), "\(region.stderr)")
    }
}

/// `httpdns serve` exited without printing the address it listens on.
struct ServeDidNotStart: Error, CustomStringConvertible {
    let listen: String
    let stderr: String
    var description: String { "serve --listen \(listen) did not start: \(stderr)" }
}
