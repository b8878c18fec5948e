// DNS semantics `serve` ignored (issue 74 item 7, found by an attacker-style test against unbound's
// answers): an UPDATE was answered NOERROR with the record, and EDNS was not read at all. Wire queries go
// through serve's DoH path (`ServiceCore.answerAtHand`, the hosts table holding a.test) and through the
// Do53 server's (`DNSServer.respond`); the rule itself is tested in HTTPDNSLookupTests (AnswerRuleTests).

@testable import HTTPDNSCore
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
import NIOCore
import NIOHTTP1
import Testing

@Suite struct DNSSemanticsTests {
    /// serve's DoH answer (GET) to `query`, with a.test in the hosts table.
    static func doh(_ query: [UInt8]) throws -> [UInt8] {
        let routing = RoutingDecisionTests()
        let core = routing.core(hosts: ["a.test": [IPAddress("192.0.2.1")!]])
        let response = try #require(core.answerAtHand(routing.get("/dns-query?dns=" + base64url(query))))
        try #require(response.status == .ok, "\(String(buffer: response.body))")
        return Array(response.body.readableBytesView)
    }

    /// The Do53 server's answer to `query`, a.test holding 192.0.2.1.
    static func do53(_ query: [UInt8], truncate: Bool = false) throws -> [UInt8] {
        let responder: DNSServer.Responder = { name, _ in
            name == "a.test" ? DNSServer.Answer(addresses: [IPAddress("192.0.2.1")!]) : .nxdomain
        }
        let answer = DNSServer.respond(to: query, responder: responder, truncate: truncate)
        return try #require(answer)
    }

    /// Both transports' answers to `query`, named for the messages.
    static func answers(_ query: [UInt8]) throws -> [(String, [UInt8])] {
        try [("DoH", doh(query)), ("Do53", do53(query))]
    }

    /// An OPT record as an answer carries it.
    struct OPT: Equatable {
        var udpSize: UInt16
        var extendedRcode: UInt8
        var version: UInt8
        var options: [UInt8]
    }

    /// The OPT records among an answer's additional records, which must be the last thing in it (the
    /// parser reads no additional record of a response).
    static func opts(in answer: [UInt8]) throws -> [OPT] {
        var reader = WireReader(answer)
        reader.offset = 4
        let questions = Int(try reader.readUInt16())
        let records = Int(try reader.readUInt16()) + Int(try reader.readUInt16())
        let additional = Int(try reader.readUInt16())
        for _ in 0..<questions {
            _ = try reader.readName()
            _ = try reader.readUInt32()
        }
        for _ in 0..<records { _ = try reader.readRecord() }
        var opts: [OPT] = []
        for _ in 0..<additional {
            _ = try reader.readName()
            let type = try reader.readUInt16()
            let udpSize = try reader.readUInt16()
            let ttl = try reader.readUInt32()
            let length = Int(try reader.readUInt16())
            guard reader.offset + length <= answer.count else { throw DNSWireError("OPT data runs past the end") }
            if type == DNSRecordType.opt.rawValue {
                opts.append(
                    OPT(
                        udpSize: udpSize,
                        extendedRcode: UInt8(ttl >> 24),
                        version: UInt8(truncatingIfNeeded: ttl >> 16),
                        options: Array(answer[reader.offset..<(reader.offset + length)])
                    )
                )
            }
            reader.offset += length
        }
        #expect(reader.remaining == 0, "bytes after the additional section")
        return opts
    }

    /// Our OPT record: 1232 bytes, version 0, the rcode's upper bits, `options`.
    static func ours(extendedRcode: UInt8 = 0, options: [UInt8] = []) -> OPT {
        OPT(udpSize: 1232, extendedRcode: extendedRcode, version: 0, options: options)
    }

    /// The header's RCODE bits, and ANCOUNT.
    static func rcode(_ answer: [UInt8]) -> UInt8 { answer[3] & 0x0F }
    static func answerCount(_ answer: [UInt8]) -> Int { Int(answer[6]) << 8 | Int(answer[7]) }

    @Test func anUpdateIsNotImplementedWithItsHeaderAndQuestionEchoedAndNoRecord() throws {
        let update = try EDNSQuery.make(opcode: 5, opts: [])
        for (transport, answer) in try Self.answers(update) {
            #expect(answer[0...1] == [0x42, 0x42], "\(transport): the id")
            #expect(answer[2] == 0x80 | 5 << 3 | 0x01, "\(transport): QR, UPDATE, RD")
            #expect(Self.rcode(answer) == 4, "\(transport): NOTIMP")
            #expect(Array(answer[4..<12]) == [0, 1, 0, 0, 0, 0, 0, 0], "\(transport): the question alone")
            #expect(Array(answer[12...]) == Array(update[12...]), "\(transport): the question echoed")
        }
        // With an OPT record, NOTIMP carries ours.
        for (transport, answer) in try Self.answers(try EDNSQuery.make(opcode: 5, opts: [(0, [])])) {
            #expect(Self.rcode(answer) == 4, "\(transport)")
            #expect(try Self.opts(in: answer) == [Self.ours()], "\(transport)")
        }
    }

    @Test func anUpdateThatDoesNotParseIsNotImplementedAllTheSame() throws {
        // An answer count the message cannot hold; a QUERY like it stays a bad request (400, FORMERR).
        var update = try EDNSQuery.make(opcode: 5, opts: [])
        update[7] = 9
        #expect(try Self.doh(update) == [0x42, 0x42, 0xA9, 0x84, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(try Self.do53(update) == [0x42, 0x42, 0xA9, 0x84, 0, 0, 0, 0, 0, 0, 0, 0])
        var malformed = try EDNSQuery.make(opts: [])
        malformed[7] = 9
        let routing = RoutingDecisionTests()
        let response = try #require(
            routing.core().answerAtHand(routing.get("/dns-query?dns=" + base64url(malformed)))
        )
        #expect(response.status == .badRequest)
        #expect(Self.rcode(try Self.do53(malformed)) == 1)
    }

    @Test func anEDNSVersionAbove0IsBADVERSWithItsUpperBitsInOurOPTRecord() throws {
        for (transport, answer) in try Self.answers(try EDNSQuery.make(opts: [(1, [])])) {
            // BADVERS is 16: 0 in the header, 1 in the OPT record's EXTENDED-RCODE, and our version 0.
            #expect(Self.rcode(answer) == 0, "\(transport)")
            #expect(Self.answerCount(answer) == 0, "\(transport): no record")
            #expect(try Self.opts(in: answer) == [Self.ours(extendedRcode: 1)], "\(transport)")
        }
    }

    @Test func twoOPTRecordsAreFORMERRAnsweredWithOneOfOurs() throws {
        for (transport, answer) in try Self.answers(try EDNSQuery.make(opts: [(0, []), (0, [])])) {
            #expect(Self.rcode(answer) == 1, "\(transport): FORMERR")
            #expect(Self.answerCount(answer) == 0, "\(transport): no record")
            #expect(try Self.opts(in: answer) == [Self.ours()], "\(transport)")
        }
    }

    @Test func anAnswerCarriesOneOPTRecordOfOursExactlyWhenTheQueryHadOne() throws {
        for name in ["a.test", "nowhere.test"] {
            for (transport, answer) in try Self.answers(try EDNSQuery.make(name, opts: [(0, [])])) {
                #expect(Self.rcode(answer) == (name == "a.test" ? 0 : 3), "\(transport) \(name)")
                #expect(answer[10...11] == [0, 1], "\(transport) \(name): ARCOUNT")
                // Last, after the answer or the NXDOMAIN's SOA (`opts` reads through them).
                #expect(try Self.opts(in: answer) == [Self.ours()], "\(transport) \(name)")
                let message = try DNSMessage(parsing: answer)
                #expect(message.addresses(for: .a).addresses == (name == "a.test" ? [IPAddress("192.0.2.1")!] : []))
            }
            for (transport, answer) in try Self.answers(try EDNSQuery.make(name, opts: [])) {
                #expect(answer[10...11] == [0, 0], "\(transport) \(name): ARCOUNT")
                #expect(try Self.opts(in: answer).isEmpty, "\(transport) \(name)")
            }
        }
    }

    @Test func aDoHQueryThatAsksForPaddingGetsItsAnswerPaddedTo468Bytes() throws {
        // An answer, an NXDOMAIN, and a refusal (BADVERS): each fits one block.
        let queries: [[(version: UInt8, options: [UInt8])]] = [[(0, EDNSQuery.padding)], [(1, EDNSQuery.padding)]]
        for name in ["a.test", "nowhere.test"] {
            for opts in queries {
                let answer = try Self.doh(try EDNSQuery.make(name, opts: opts))
                #expect(answer.count == 468, "\(name) v\(opts[0].version): \(answer.count) bytes")
                let found = try Self.opts(in: answer)
                #expect(found.count == 1)
                let opt = try #require(found.first)
                try #require(opt.options.count >= 4)
                #expect(opt.options.prefix(2) == [0, 12], "\(name): a Padding option")
                #expect(Int(opt.options[2]) << 8 | Int(opt.options[3]) == opt.options.count - 4, "\(name): its length")
                #expect(opt.options.dropFirst(4).allSatisfy { $0 == 0 }, "\(name): zeros")
            }
        }
    }

    @Test func aDo53AnswerIsNeverPaddedThoughTheQueryAsks() throws {
        let answer = try Self.do53(try EDNSQuery.make(opts: [(0, EDNSQuery.padding)]))
        #expect(try Self.opts(in: answer) == [Self.ours()])
        #expect(answer.count % 468 != 0)
    }

    @Test func aTruncatedUDPAnswerKeepsItsOPTRecord() throws {
        let answer = try Self.do53(try EDNSQuery.make(opts: [(0, [])]), truncate: true)
        #expect(answer[2] & 0x02 != 0, "TC")
        #expect(Self.answerCount(answer) == 0)
        #expect(try Self.opts(in: answer) == [Self.ours()])
    }
}
