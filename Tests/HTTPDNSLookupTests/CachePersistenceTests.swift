// The cache file on disk: written 0600 and atomically, read bounded and validated. Hermetic: the
// resolver's only provider is an in-memory fake, so no socket is opened.
/// Answers every name with `addresses` and counts the questions.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import Testing

@Suite struct CachePersistenceTests {
    static func temporaryPath(_ label: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-\(label)-\(UUID()).json").path
    }

    static func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test func savedCacheFileIsReadableByItsOwnerOnly() async throws {
        let path = Self.temporaryPath("mode")
        defer { try? FileManager.default.removeItem(atPath: path) }
        // An older file that others could read is replaced, not rewritten in place.
        _ = FileManager.default.createFile(
            atPath: path,
            contents: Data("{}".utf8),
            attributes: [.posixPermissions: 0o644]
        )
        #expect(try Self.mode(path) == 0o644)
        let resolver = makeResolver([FixedProvider(["93.184.216.50"])]) { $0.persistencePath = path }
        _ = try await resolver.resolve("mode.example.com", .ipv4)
        try resolver.persist()
        #expect(try Self.mode(path) == 0o600)
        let loaded = try CacheSnapshot.load(from: Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        #expect(loaded.snapshot.entries.map(\.key.name) == ["mode.example.com"])
        // No temporary file is left beside it.
        let directory = (path as NSString).deletingLastPathComponent
        let base = (path as NSString).lastPathComponent
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasPrefix(base + ".tmp")
        }
        #expect(leftovers.isEmpty)
    }

    @Test func savingIntoAMissingDirectoryFailsAndSaysWhere() throws {
        let path = "/nonexistent-\(UUID())/cache.json"
        #expect(throws: CacheWriteError.self) { try CachePersistence.save(CacheSnapshot(entries: []), path: path) }
        do {
            try CachePersistence.save(CacheSnapshot(entries: []), path: path)
        } catch {
            #expect("\(error)".contains(path))
        }
    }

    @Test func invalidEntriesInTheFileAreDroppedAndTheRestServed() async throws {
        let path = Self.temporaryPath("drop")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let now = SystemWallClock().now()
        func item(_ name: String, _ ip: String) -> CacheSnapshot.Item {
            CacheSnapshot.Item(
                key: CacheKey(network: "default", normalizedName: name, family: .ipv4),
                entry: CacheEntry(
                    addresses: [IPAddress(ip)!],
                    ttl: 300,
                    storedAt: now,
                    expiresAt: now + .seconds(300),
                    source: "fixed",
                    lastUsed: now
                )
            )
        }
        // A name that would never be cached, and a v6 address under a v4 key: both dropped.
        let snapshot = CacheSnapshot(entries: [
            item("kept.example.com", "93.184.216.51"), item("Not A Name", "93.184.216.52"),
            item("wrong.example.com", "2001:db8::1"),
        ])
        try CachePersistence.save(snapshot, path: path)
        let provider = FixedProvider(["93.184.216.53"])
        let resolver = makeResolver([provider]) {
            $0.persistencePath = path
            $0.network.networkID = "default"
        }
        #expect(try await resolver.resolve("kept.example.com", .ipv4).ipv4 == [IPAddress("93.184.216.51")!])
        #expect(provider.calls == 0)
        #expect(try await resolver.resolve("wrong.example.com", .ipv4).ipv4 == [IPAddress("93.184.216.53")!])
        #expect(provider.calls == 1)
    }

    @Test func aCacheFileOverTheLimitIsIgnored() async throws {
        let path = Self.temporaryPath("big")
        defer { try? FileManager.default.removeItem(atPath: path) }
        // A valid file padded with whitespace past the limit: refused by size alone.
        var bytes = try CacheSnapshot(entries: []).fileBytes()
        bytes += [UInt8](repeating: 0x20, count: CacheSnapshot.maxFileBytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(CachePersistence.load(path: path, logger: testLogger) == nil)
        try Data(bytes.prefix(CacheSnapshot.maxFileBytes)).write(to: URL(fileURLWithPath: path))
        #expect(CachePersistence.load(path: path, logger: testLogger) == CacheSnapshot(entries: []))
    }

    /// Hostile round 5, item 6: a cache file of mode 0666, or of another owner, with a planted answer,
    /// was served as if the upstream had said it, with no warning. Such a file is now ignored.
    @Test func aCacheFileOthersCanWriteOrThatAnotherUserOwnsIsIgnored() throws {
        let path = Self.temporaryPath("planted")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(try CacheSnapshot(entries: []).fileBytes()).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
        #expect(CachePersistence.load(path: path, logger: testLogger) == CacheSnapshot(entries: []))
        chmod(path, 0o666)
        #expect(CachePersistence.load(path: path, logger: testLogger) == nil)
        chmod(path, 0o620)
        #expect(CachePersistence.load(path: path, logger: testLogger) == nil)
        chmod(path, 0o644)
        #expect(CachePersistence.load(path: path, logger: testLogger) == CacheSnapshot(entries: []))
        // Another owner: only root can give a file away, so the rule is shown pure as well (below).
        if geteuid() == 0 {
            chown(path, 4242, 4242)
            #expect(CachePersistence.load(path: path, logger: testLogger) == nil)
        }
    }

    @Test func onlyARegularFileTheUserOwnsAndNobodyElseMayWriteIsTrusted() {
        typealias Trust = CachePersistence.FileTrust
        #expect(Trust.refusal(regular: true, permissions: 0o600, owner: 501, user: 501) == nil)
        #expect(Trust.refusal(regular: true, permissions: 0o644, owner: 501, user: 501) == nil)
        #expect(Trust.refusal(regular: true, permissions: 0o600, owner: 0, user: 501) != nil)
        #expect(Trust.refusal(regular: true, permissions: 0o666, owner: 501, user: 501) != nil)
        #expect(Trust.refusal(regular: true, permissions: 0o602, owner: 501, user: 501) != nil)
        #expect(Trust.refusal(regular: false, permissions: 0o600, owner: 501, user: 501) != nil)
    }

    /// Hostile round 5, item 6: a FIFO as the cache file hung `resolve` for ever (the open waited for a
    /// writer). It is now refused at once, unread.
    @Test func aFIFOAsTheCacheFileIsRefusedWithoutWaiting() async throws {
        let path = Self.temporaryPath("fifo")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(mkfifo(path, 0o600) == 0)
        let loaded = try await withHangGuard("loading a FIFO as the cache file", within: .seconds(60)) {
            CachePersistence.load(path: path, logger: testLogger).map { _ in true } ?? false
        }
        #expect(!loaded)
    }
}
