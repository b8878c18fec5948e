// The cache file on disk: written 0600 and atomically, read bounded and validated. Hermetic: the
// resolver's only provider is an in-memory fake, so no socket is opened.
/// Answers every name with `addresses` and counts the questions.

@testable import HTTPDNSCore
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
import Foundation
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
}
