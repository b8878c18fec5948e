// Alibaba Cloud EMAS v2's encrypted modes and batches, against a vendor-style endpoint this
// project did not write (Tests/Fixtures/vendors/ecs_peer.py: AES-CBC and AES-GCM from Python's
// cryptography): the CLI with --alibaba-aes-key-file in each mode, several names in one query (v2 and
// the older sign_resolve), and AES-key mistakes as usage errors naming the flag.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

@Suite(.serialized) struct AlibabaV2Tests {
    static let aesKey = "000102030405060708090a0b0c0d0e0f"

    @Test(arguments: ["cbc", "gcm"])
    func encryptedQueriesAreAnsweredAndBatched(_ mode: String) async throws {
        let peer = try await ClientSubnetTests.Peer.start(v2Key: Self.aesKey)
        defer { peer.stop() }
        try Self.aesKey.write(toFile: peer.dir + "/v2.key", atomically: true, encoding: .utf8)
        let r = try await runCLI(
            [
                "resolve", "a.test", "b.test", "c.test", "--no-fallback", "--timeout", "5", "--alibaba-mode", mode,
                "--alibaba-aes-key-file", peer.dir + "/v2.key", "--client-subnet", "203.0.113.0/24",
            ]
                + peer.flags("alibaba-v2")
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.components(separatedBy: "203.0.113.99").count - 1 == 3, "\(r.stdout)")
        let seen = peer.seen.filter { $0.hasPrefix("alibaba-v2 ") }
        let m = mode == "cbc" ? "m=1" : "m=2"
        #expect(!seen.isEmpty && seen.allSatisfy { $0.contains(m) && $0.hasSuffix("subnet=203.0.113.0") }, "\(seen)")
        // The key never appears in output.
        #expect(!r.stdout.contains(Self.aesKey) && !r.stderr.contains(Self.aesKey))

        // The library's resolve([names]) asks for them in one query per batch of 5.
        let resolver = try peer.alibabaResolver(
            "/v2/d?id=139450",
            encryption: AlibabaEncryption(mode: mode == "cbc" ? .cbc : .gcm, key: ResolverSecret(Self.aesKey))
        )
        let before = peer.seen.count
        let names = ["d.test", "e.test", "f.test", "g.test", "h.test", "i.test"]
        let results = await resolver.resolve(names, .ipv4)
        #expect(names.allSatisfy { (try? results[$0]?.get().ipv4) == [IPAddress("192.0.2.1")!] }, "\(results)")
        let batched = peer.seen.dropFirst(before).filter { $0.hasPrefix("alibaba-v2 ") }
        // Six names: a batch of 5 and one of 1 (the vendor's limit).
        #expect(batched.contains { $0.contains("d.test,e.test,f.test,g.test,h.test") }, "\(batched)")
        #expect(batched.count == 2, "\(batched)")
    }

    /// The older signed batch, `/ACCOUNT/sign_resolve`: several names signed as one string, answered
    /// with one item per name (and family).
    @Test func signedBatchesGoToSignResolve() async throws {
        let peer = try await ClientSubnetTests.Peer.start()
        defer { peer.stop() }
        let resolver = try peer.alibabaResolver("/139450/d")
        let names = ["a.test", "b.test", "c.test"]
        let results = await resolver.resolve(names, .ipv4)
        #expect(names.allSatisfy { (try? results[$0]?.get().ipv4) == [IPAddress("192.0.2.1")!] }, "\(results)")
        #expect(peer.seen.contains("alibaba-batch a.test,b.test,c.test query=4 subnet=none"), "\(peer.seen)")
        // One name alone still goes to sign_d.
        _ = try await resolver.resolve("d.test", .ipv4)
        #expect(peer.seen.contains("alibaba d.test subnet=none"), "\(peer.seen)")
    }

    @Test func aesKeyMistakesAreUsageErrors() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-v2key-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "not-hex-at-all".write(toFile: dir + "/bad.key", atomically: true, encoding: .utf8)
        try Self.aesKey.write(toFile: dir + "/good.key", atomically: true, encoding: .utf8)
        let v2 = ["--resolver", "json:http://127.0.0.1:9/v2/d?id=139450"]
        let cases: [([String], String)] = [
            (v2 + ["--alibaba-aes-key-file", dir + "/bad.key"], "--alibaba-aes-key-file"),
            (v2 + ["--alibaba-aes-key-file", dir + "/none.key"], "--alibaba-aes-key-file"),
            (v2 + ["--alibaba-mode", "ecb", "--alibaba-aes-key-file", dir + "/good.key"], "--alibaba-mode"),
            (v2 + ["--alibaba-mode", "gcm"], "--alibaba-mode"),
            (
                ["--resolver", "json:http://127.0.0.1:9/139450/d", "--alibaba-aes-key-file", dir + "/good.key"],
                "--alibaba-aes-key-file"
            ),
            (["--resolver", "dns:127.0.0.1:9", "--alibaba-aes-key-file", dir + "/good.key"], "--alibaba-aes-key-file"),
        ]
        for (flags, named) in cases {
            let r = try await runCLI(["resolve", "a.test"] + flags)
            #expect(r.status == 64, "\(flags): \(r.stderr)")
            #expect(r.stderr.contains(named), "\(flags): \(r.stderr)")
            #expect(!r.stderr.contains(Self.aesKey), "\(r.stderr)")
        }
    }
}
