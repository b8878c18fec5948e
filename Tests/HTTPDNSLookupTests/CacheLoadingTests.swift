import Foundation
import Testing

@testable import HTTPDNSCore
@testable import HTTPDNSLookup

@Suite struct CacheLoadingTests {
    static let stored = Timestamp.seconds(1_700_000_000)

    static func item(
        network: String = "default",
        name: String = "example.com",
        family: AddressFamily = .ipv4,
        addresses: [String] = ["93.184.216.34"],
        ttl: UInt32 = 300,
        expiresIn: Int64? = nil,
        source: String = "doh:https://1.1.1.1:443/dns-query"
    ) -> CacheSnapshot.Item {
        CacheSnapshot.Item(
            key: CacheKey(network: network, normalizedName: name, family: family),
            entry: CacheEntry(
                addresses: addresses.map { IPAddress($0)! },
                ttl: ttl,
                storedAt: stored,
                expiresAt: stored + .seconds(expiresIn ?? Int64(ttl)),
                source: source,
                lastUsed: stored
            )
        )
    }

    static func file(_ items: [CacheSnapshot.Item]) throws -> [UInt8] {
        try CacheSnapshot(entries: items).fileBytes()
    }

    @Test func aSavedSnapshotLoadsBackWhole() throws {
        let items = [
            Self.item(),
            Self.item(family: .ipv6, addresses: ["2606:2800:220:1:248:1893:25c8:1946"]),
            Self.item(network: "wifi-home", name: "www.example.org", addresses: ["104.16.1.1", "104.16.1.2"]),
        ]
        let loaded = try CacheSnapshot.load(from: try Self.file(items))
        #expect(loaded.snapshot == CacheSnapshot(entries: items))
        #expect(loaded.dropped == 0)
    }

    @Test(arguments: [
        ("name that is not a hostname", item(name: "bad_name!.com")),
        ("name not normalized", item(name: "Example.COM")),
        ("name with a trailing dot", item(name: "example.com.")),
        ("network id over 256 bytes", item(network: String(repeating: "n", count: 257))),
        ("IPv6 address under an IPv4 key", item(addresses: ["2001:db8::1"])),
        ("IPv4 address under an IPv6 key", item(family: .ipv6, addresses: ["1.2.3.4"])),
        ("unspecified IPv4", item(addresses: ["1.2.3.4", "0.0.0.0"])),
        ("unspecified IPv6", item(family: .ipv6, addresses: ["::"])),
        ("65 addresses", item(addresses: (0..<65).map { "10.0.\($0 / 256).\($0 % 256 + 1)" })),
        ("TTL over 7 days", item(ttl: 7 * 24 * 3600 + 1)),
        ("expires before it was stored", item(expiresIn: -1)),
        ("source over 512 bytes", item(source: String(repeating: "s", count: 513))),
    ])
    func invalidEntryIsDroppedAndTheRestKept(_ why: String, _ bad: CacheSnapshot.Item) throws {
        let good = Self.item(name: "good.example.com")
        let loaded = try CacheSnapshot.load(from: try Self.file([bad, good]))
        #expect(loaded.snapshot.entries == [good], "\(why)")
        #expect(loaded.dropped == 1, "\(why)")
    }

    @Test func limitsAreInclusive() throws {
        let items = [
            Self.item(network: String(repeating: "n", count: 256)),
            Self.item(name: "a.example", addresses: (0..<64).map { "10.0.0.\($0 + 1)" }),
            Self.item(name: "b.example", ttl: 7 * 24 * 3600),
            Self.item(name: "c.example", source: String(repeating: "s", count: 512)),
            Self.item(name: "d.example", expiresIn: 0),
        ]
        let loaded = try CacheSnapshot.load(from: try Self.file(items))
        #expect(loaded.snapshot.entries == items)
    }

    @Test func aMalformedEntryCostsOnlyItself() throws {
        let good = Self.item()
        var json = String(decoding: try Self.file([good]), as: UTF8.self)
        json = json.replacingOccurrences(
            of: "\"entries\":[",
            with: "\"entries\":[{\"key\":{\"network\":\"x\"},\"entry\":7},"
                + "{\"key\":{\"network\":\"d\",\"name\":\"a.com\",\"family\":\"ipv4\"},\"entry\":"
                + "{\"addresses\":[\"not-an-ip\"],\"ttl\":1,\"storedAt\":{\"nanoseconds\":0},"
                + "\"expiresAt\":{\"nanoseconds\":1},\"source\":\"\",\"lastUsed\":{\"nanoseconds\":0}}},"
        )
        let loaded = try CacheSnapshot.load(from: Array(json.utf8))
        #expect(loaded.snapshot.entries == [good])
        #expect(loaded.dropped == 2)
    }

    @Test func aRepeatedKeyKeepsTheFirst() throws {
        let first = Self.item(addresses: ["1.1.1.1"])
        let loaded = try CacheSnapshot.load(from: try Self.file([first, Self.item(addresses: ["2.2.2.2"])]))
        #expect(loaded.snapshot.entries == [first])
        #expect(loaded.dropped == 1)
    }

    @Test func keepsAtMostCapacityEntriesTheMostRecentlyUsed() throws {
        var items = (0..<10).map { Self.item(name: "n\($0).example") }
        for i in items.indices { items[i].entry.lastUsed = Self.stored + .seconds(Int64(i)) }
        let loaded = try CacheSnapshot.load(from: try Self.file(items), capacity: 3)
        #expect(Set(loaded.snapshot.entries.map(\.key.name)) == ["n9.example", "n8.example", "n7.example"])
        #expect(loaded.dropped == 7)
        #expect(try CacheSnapshot.load(from: try Self.file(items), capacity: 0).snapshot.entries.isEmpty)
    }

    @Test func refusesAFileOverTheLimitWithoutParsingIt() {
        let bytes = [UInt8](repeating: 0x20, count: CacheSnapshot.maxFileBytes + 1)
        #expect(throws: CacheFileError(.tooLarge(bytes: CacheSnapshot.maxFileBytes + 1))) {
            try CacheSnapshot.load(from: bytes)
        }
        #expect("\(CacheFileError(.tooLarge(bytes: 9_000_000)))".contains("9000000 bytes"))
    }

    @Test func refusesAnotherVersion() {
        let body = Array(#"{"version":2,"entries":"whatever the new format is"}"#.utf8)
        #expect(throws: CacheFileError(.otherVersion(2))) { try CacheSnapshot.load(from: body) }
    }

    @Test(arguments: [
        "", "not json", "[]", "{}", #"{"version":"1","entries":[]}"#, #"{"version":1}"#,
        #"{"version":1,"entries":{}}"#, #"{"version":1,"entries":[{"key":"#, "\u{0}\u{1}\u{2}",
    ])
    func refusesGarbage(_ text: String) {
        #expect(throws: CacheFileError(.notACacheFile)) { try CacheSnapshot.load(from: Array(text.utf8)) }
    }
}
