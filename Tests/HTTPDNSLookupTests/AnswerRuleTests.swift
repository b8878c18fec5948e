// How a server answers a query's opcode and EDNS (AnswerRule, RFC 6891, RFC 7830/8467): what the parser
// keeps of a query's OPT records, the rule's verdicts and their order, the padding arithmetic, and the
// encoder's refusals. Issue 74 item 7: `serve` answered an UPDATE NOERROR and ignored EDNS entirely.
// The answers themselves, through serve's DoH path and the Do53 server, are in HTTPDNSServerTests
// (DNSSemanticsTests).

import HTTPDNSCore
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
import Testing

@Suite struct AnswerRuleTests {
    @Test func aQueryKeepsItsOpcodeAndWhatItsOPTRecordsSaid() throws {
        let update = try DNSMessage(parsing: try EDNSQuery.make(opcode: 5, opts: []))
        #expect(update.opcode == 5)
        #expect(update.edns == nil)
        let plain = try DNSMessage(parsing: try EDNSQuery.make(opts: [(0, [])]))
        #expect(plain.opcode == 0)
        #expect(plain.edns == QueryEDNS(records: 1, version: 0, asksForPadding: false))
        // The Padding option found after another option (an ECS of family 1, /24).
        let ecs: [UInt8] = [0, 8, 0, 7, 0, 1, 24, 0, 192, 0, 2]
        let padded = try DNSMessage(parsing: try EDNSQuery.make(opts: [(1, ecs + EDNSQuery.padding)]))
        #expect(padded.edns == QueryEDNS(records: 1, version: 1, asksForPadding: true))
        #expect(padded.clientSubnet != nil)
        let twice = try DNSMessage(parsing: try EDNSQuery.make(opts: [(0, []), (3, [])]))
        #expect(twice.edns == QueryEDNS(records: 2, version: 0, asksForPadding: false), "the first one's version")
        // An EXTENDED-RCODE with its top bit set is no TTL to clamp to 0: the version beside it stands.
        var high = try EDNSQuery.make(opts: [(1, [])])
        high[high.count - 6] = 0x80
        #expect(try DNSMessage(parsing: high).edns?.version == 1)
        // An option whose length runs past the end hides what follows it.
        #expect(!QueryEDNS.hasPadding(inOptions: [0, 8, 0, 9, 1] + EDNSQuery.padding))
    }

    @Test func theOpcodeIsJudgedFirstThenTheOPTCountThenTheVersion() {
        let everything = QueryEDNS(records: 2, version: 1, asksForPadding: false)
        #expect(AnswerRule(opcode: 5, edns: everything, encrypted: true).refusal == .notImplemented)
        #expect(AnswerRule(opcode: 4, edns: nil, encrypted: true).refusal == .notImplemented)
        #expect(AnswerRule(opcode: 0, edns: everything, encrypted: true).refusal == .formatError)
        let version1 = QueryEDNS(records: 1, version: 1, asksForPadding: false)
        #expect(AnswerRule(opcode: 0, edns: version1, encrypted: true).refusal == .badVersion)
        #expect(AnswerRule(opcode: 0, edns: QueryEDNS(), encrypted: true).refusal == nil)
        #expect(AnswerRule(opcode: 0, edns: nil, encrypted: true).refusal == nil)
    }

    @Test func anOPTRecordAnswersOneAndPaddingOnlyAnEncryptedQueryThatAskedForIt() {
        #expect(AnswerRule(opcode: 0, edns: nil, encrypted: true).opt == nil)
        // Refusals carry it too.
        #expect(AnswerRule(opcode: 5, edns: QueryEDNS(), encrypted: false).opt == AnswerOPT())
        let asks = QueryEDNS(asksForPadding: true)
        #expect(AnswerRule(opcode: 0, edns: asks, encrypted: true).opt == AnswerOPT(paddingBlock: 468))
        #expect(AnswerRule(opcode: 0, edns: asks, encrypted: false).opt == AnswerOPT(paddingBlock: nil))
        #expect(AnswerRule(opcode: 0, edns: QueryEDNS(), encrypted: true).opt == AnswerOPT(paddingBlock: nil))
    }

    @Test func paddingFillsTheBlockOrIsLeftOutWhereItWouldPassTheLimit() {
        // 51 bytes and the option's 4-byte header: 413 zeros make 468.
        #expect(AnswerOPT.paddingLength(unpadded: 51, block: 468, limit: 65_535) == 413)
        #expect(AnswerOPT.paddingLength(unpadded: 464, block: 468, limit: 65_535) == 0)
        #expect(AnswerOPT.paddingLength(unpadded: 465, block: 468, limit: 65_535) == 467)
        // 140 blocks (65,520 bytes) are the most a message holds: up to there it is padded, past it not.
        #expect(AnswerOPT.paddingLength(unpadded: 65_000, block: 468, limit: 65_535) == 48)
        #expect(AnswerOPT.paddingLength(unpadded: 65_516, block: 468, limit: 65_535) == 0)
        #expect(AnswerOPT.paddingLength(unpadded: 65_517, block: 468, limit: 65_535) == nil)
        #expect(AnswerOPT.paddingLength(unpadded: 100, block: 0, limit: 65_535) == nil)
    }

    @Test func anRcodeAbove15IsRefusedWithoutAnOPTRecordNotCutToItsLowBits() throws {
        let query = try DNSMessage(parsing: try EDNSQuery.make(opts: [(1, [])]))
        #expect(throws: DNSWireError.self) { _ = try DNSMessage.response(to: query, rcode: .badVersion) }
        let answer = try DNSMessage.response(to: query, rcode: .badVersion, opt: AnswerOPT())
        #expect(answer[3] & 0x0F == 0, "the header holds BADVERS's low 4 bits")
        #expect(Array(answer.suffix(11)) == [0, 0, 41, 0x04, 0xD0, 1, 0, 0, 0, 0, 0], "1232 bytes, BADVERS's 1, v0")
        #expect(answer[10...11] == [0, 1], "ARCOUNT")
    }

    @Test func anAnswerEchoesTheOpcodeAndAQueryWithoutAQuestionGetsNoneBack() throws {
        let update = try DNSMessage(parsing: try EDNSQuery.make(opcode: 5, opts: []))
        let answer = try DNSMessage.response(to: update, rcode: .notImplemented)
        #expect(answer[2] == 0x80 | 5 << 3 | 0x01, "QR, UPDATE, RD")
        #expect(answer[3] & 0x0F == 4)
        // QDCOUNT 0: the header alone, and no record that would name a question not there.
        let headerOnly: [UInt8] = [0x42, 0x42, 0x28, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        let bare = try DNSMessage(parsing: headerOnly)
        #expect(try DNSMessage.response(to: bare, rcode: .notImplemented).count == 12)
        #expect(throws: DNSWireError.self) {
            _ = try DNSMessage.response(to: bare, addresses: [IPAddress("192.0.2.1")!])
        }
    }

    @Test func anUnreadableMessageWhoseOpcodeIsNotQueryIsNotImplemented() {
        // UPDATE with RD, and an answer count the message cannot hold: it does not parse.
        let update: [UInt8] = [0x42, 0x42, 0x29, 0, 0, 0, 0, 9, 0, 0, 0, 0]
        #expect(throws: DNSWireError.self) { _ = try DNSMessage(parsing: update) }
        #expect(
            DNSMessage.notImplementedAnswer(toUnreadable: update)
                == [0x42, 0x42, 0xA9, 0x84, 0, 0, 0, 0, 0, 0, 0, 0]
        )
        var query = update
        query[2] = 0x01
        #expect(DNSMessage.notImplementedAnswer(toUnreadable: query) == nil, "a malformed QUERY is FORMERR")
        var response = update
        response[2] |= 0x80
        #expect(DNSMessage.notImplementedAnswer(toUnreadable: response) == nil)
        #expect(DNSMessage.notImplementedAnswer(toUnreadable: Array(update.prefix(11))) == nil)
    }
}
