// HTTPS records (RFC 9460) as BIND 9.18 sends them: each answer below is the UDP response of a real
// BIND to the query `DNSMessage.query` builds (id 0, EDNS), for the zone in Tests/Fixtures/peers/https.zone.
// The parser reads them without a server; ServiceBindingPeerTests asks a running BIND.

import Foundation
import HTTPDNSCore
@testable import HTTPDNSLookup
import Testing

@Suite struct ServiceBindingTests {
    static let fromBIND: [String: String] = [
        "a.svcb.test.":
            "0000850000010001000000020161047376636204746573740000410001c00c004100010000003c002c000100000100030268320003000220fb000400047f0000010006001000000000000000000000000000000001c00c000100010000003c00047f00000100002904d0000000000000",
        "alias.svcb.test.":
            "00008500000100010000000305616c696173047376636204746573740000410001c00c004100010000003c000f000001610473766362047465737400c02f000100010000003c00047f000001c02f004100010000003c002c000100000100030268320003000220fb000400047f000001000600100000000000000000000000000000000100002904d0000000000000",
        "h3.svcb.test.":
            "000085000001000100000002026833047376636204746573740000410001c00c004100010000003c00190001000001000602683302683200020000000400047f000002c00c000100010000003c00047f00000200002904d0000000000000",
        "ech.svcb.test.":
            "00008500000100010000000203656368047376636204746573740000410001c00c004100010000003c005500010000010003026832000500470045fe0d0041a50020002065dafbe4f5b626c93120ae6cf404f2bfd9d31bdad1bf70beb2396e6b3e36d86a0004000100010012636c6f7564666c6172652d6563682e636f6d0000c00c000100010000003c00047f00000100002904d0000000000000",
        "multi.svcb.test.":
            "000085000001000200000002056d756c7469047376636204746573740000410001c00c004100010000003c0010000200000100030268320003000220fcc00c004100010000003c0010000100000100030268320003000220fbc00c000100010000003c00047f00000100002904d0000000000000",
        "plain.svcb.test.":
            "00008500000100000001000105706c61696e047376636204746573740000410001c012000600010000003c0026026e73c0120a686f73746d6173746572c0120000000100000e1000000258000151800000003c00002904d0000000000000",
    ]

    func bindings(_ name: String) throws -> (bindings: [ServiceBinding], ttl: UInt32?) {
        let hex = Array(try #require(Self.fromBIND[name]).utf8)
        let bytes = stride(from: 0, to: hex.count, by: 2).map {
            UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)!
        }
        let answer = try DNSMessage(parsing: bytes).serviceBindings()
        return (answer.bindings, answer.ttl)
    }

    @Test func aServiceRecordGivesItsALPNPortAndHints() throws {
        let (records, ttl) = try bindings("a.svcb.test.")
        #expect(ttl == 60)
        let record = try #require(records.first)
        #expect(records.count == 1)
        #expect(record.priority == 1 && record.target == "." && !record.isAlias)
        #expect(record.alpn == ["h2"] && record.protocols == ["h2", "http/1.1"])
        #expect(record.port == 8443)
        #expect(record.ipv4Hints == [IPAddress("127.0.0.1")!] && record.ipv6Hints == [IPAddress("::1")!])
        #expect(record.description == "1 . alpn=\"h2\" port=8443 ipv4hint=127.0.0.1 ipv6hint=::1")
    }

    @Test func anAliasNamesItsTargetAndNothingElse() throws {
        let (records, _) = try bindings("alias.svcb.test.")
        // The additional section carries the target's own HTTPS record: not an answer to this question.
        #expect(records == [ServiceBinding(priority: 0, target: "a.svcb.test")])
        #expect(records.first?.isAlias == true)
    }

    @Test func noDefaultALPNLeavesHTTP1Out() throws {
        let record = try #require(try bindings("h3.svcb.test.").bindings.first)
        #expect(record.noDefaultALPN && record.protocols == ["h3", "h2"])
        #expect(record.ipv4Hints == [IPAddress("127.0.0.2")!])
    }

    @Test func theECHConfigurationIsKeptAsItCame() throws {
        let record = try #require(try bindings("ech.svcb.test.").bindings.first)
        let ech = try #require(record.ech)
        #expect(
            Data(ech).base64EncodedString()
                == "AEX+DQBBpQAgACBl2vvk9bYmyTEgrmz0BPK/2dMb2tG/cL6yOW5rPjbYagAEAAEAAQASY2xvdWRmbGFyZS1lY2guY29tAAA="
        )
    }

    @Test func recordsComeInPriorityOrderWhateverTheWireOrder() throws {
        // BIND rotated this answer: priority 2 came first on the wire.
        let records = try bindings("multi.svcb.test.").bindings
        #expect(records.map(\.priority) == [1, 2])
        #expect(records.map(\.port) == [8443, 8444])
    }

    @Test func aNameWithoutRecordsHasNone() throws {
        let (records, ttl) = try bindings("plain.svcb.test.")
        #expect(records.isEmpty && ttl == nil)
    }

    @Test func theWireFormRoundTripsAndThePresentationFormReadsBack() throws {
        for name in Self.fromBIND.keys.sorted() {
            for record in try bindings(name).bindings {
                #expect(try ServiceBinding(rdata: try record.rdata()) == record, "\(name)")
                #expect(try ServiceBinding(parsing: record.description) == record, "\(name)")
            }
        }
        // RFC 3597's generic form, as some JSON DoH services send type 65.
        let generic = try ServiceBinding(parsing: "\\# 9 0001 00 0003 0002 20fb")
        #expect(generic.priority == 1 && generic.port == 8443)
    }

    @Test func unusableRecordsAreRefusedWithAReason() throws {
        // Keys out of order, an unknown mandatory key, a port of three bytes, no-default-alpn alone, a
        // compressed target, a hint that is not whole addresses.
        let bad: [[UInt8]] = [
            [0, 1, 0, 0, 3, 0, 2, 0x20, 0xFB, 0, 1, 0, 3, 2, 0x68, 0x32],
            [0, 1, 0, 0, 0, 0, 2, 0, 99],
            [0, 1, 0, 0, 3, 0, 3, 0, 0, 1],
            [0, 1, 0, 0, 2, 0, 0],
            [0, 1, 0xC0, 12],
            [0, 1, 0, 0, 4, 0, 3, 127, 0, 0],
        ]
        for rdata in bad {
            #expect(throws: DNSWireError.self, "\(rdata)") { try ServiceBinding(rdata: rdata) }
        }
        // An unknown key that is not mandatory is skipped.
        #expect(try ServiceBinding(rdata: [0, 1, 0, 0, 3, 0, 2, 0x20, 0xFB, 0x01, 0x00, 0, 1, 7]).port == 8443)
    }
}
