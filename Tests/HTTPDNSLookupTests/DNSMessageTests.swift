import Testing
import HTTPDNSCore
@testable import HTTPDNSLookup

func hex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex {
        let j = s.index(i, offsetBy: 2)
        out.append(UInt8(s[i..<j], radix: 16)!)
        i = j
    }
    return out
}

/// Responses captured from knot-resolver 5.6 (the test peer) with a query id of 0x1234.
enum Captured {
    static let aTestA = hex("123481800001000100000000016104746573740000010001c00c000100010000000500047f000001")
    static let aTestAAAA = hex(
        "1234818000010001000000000161047465737400001c0001c00c001c000100000005001000000000000000000000000000000001"
    )
    static let nxTest = hex(
        "123485830001000000010000026e7804746573740000010001c00c0006000100002a300026c00c066e6f626f647907696e76616c6964000000000100000e10000004b000093a8000002a30"
    )
    static let v6onlyA = hex("1234818000010000000000000676366f6e6c7904746573740000010001")
}

@Suite struct DNSMessageTests {
    @Test func parsesCapturedAAnswer() throws {
        let m = try DNSMessage(parsing: Captured.aTestA)
        #expect(m.id == 0x1234)
        #expect(m.isResponse)
        #expect(m.rcode == .noError)
        #expect(m.questionName == "a.test")
        let (ips, ttl) = m.addresses(for: .a)
        #expect(ips == [IPAddress("127.0.0.1")!])
        #expect(ttl == 5)
    }

    @Test func parsesCapturedAAAAAnswer() throws {
        let m = try DNSMessage(parsing: Captured.aTestAAAA)
        #expect(m.addresses(for: .aaaa).addresses == [IPAddress("::1")!])
        #expect(m.addresses(for: .a).addresses.isEmpty)
    }

    @Test func nxdomainCarriesTheSOAMinimumAsNegativeTTL() throws {
        let m = try DNSMessage(parsing: Captured.nxTest)
        #expect(m.rcode == .nameError)
        #expect(m.answers.isEmpty)
        #expect(m.negativeTTL == 10800)
    }

    @Test func nodataHasNoAddressesAndNoTTL() throws {
        let m = try DNSMessage(parsing: Captured.v6onlyA)
        #expect(m.rcode == .noError)
        #expect(m.addresses(for: .a).addresses.isEmpty)
        #expect(m.negativeTTL == nil)
    }

    @Test func queryRoundTripsWithEDNS() throws {
        let bytes = try DNSMessage.query(name: "Example.COM.", type: .aaaa, id: 77)
        let m = try DNSMessage(parsing: bytes)
        #expect(m.id == 77)
        #expect(!m.isResponse)
        #expect(m.recursionDesired)
        #expect(m.questionName == "Example.COM")
        #expect(m.questionType == .aaaa)
        // 12 header + 13 name + 4 + 11 OPT
        #expect(bytes.count == 40)
    }

    @Test func responseBuilderFollowsCNAMEChainsWhenParsed() throws {
        // a.example CNAME b.example; b.example A 192.0.2.7 (hand-built, pointers included)
        var bytes = hex("abcd818000010002000000000161076578616d706c650000010001")
        bytes += hex("c00c000500010000012c0004") + [1, 0x62, 0xC0, 14]  // CNAME -> "b" + pointer to "example"
        bytes += hex("c027000100010000003c0004c0000207")  // b.example A, TTL 60
        let m = try DNSMessage(parsing: bytes)
        let (ips, ttl) = m.addresses(for: .a)
        #expect(ips == [IPAddress("192.0.2.7")!])
        #expect(ttl == 60)
    }

    @Test func buildsAResponseThatParsesBack() throws {
        let query = try DNSMessage(parsing: try DNSMessage.query(name: "x.test", type: .a, id: 9))
        let bytes = try DNSMessage.response(
            to: query,
            addresses: [IPAddress("10.1.2.3")!, IPAddress("10.1.2.4")!],
            ttl: 42
        )
        let m = try DNSMessage(parsing: bytes)
        #expect(m.id == 9)
        #expect(m.addresses(for: .a).addresses.count == 2)
        #expect(m.addresses(for: .a).ttl == 42)
    }

    // MARK: hostile input

    @Test(arguments: [
        ("empty", [UInt8]()),
        ("short header", [UInt8](repeating: 0, count: 11)),
    ])
    func rejectsShortMessages(_ label: String, _ bytes: [UInt8]) {
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func rejectsCountsLargerThanTheMessage() {
        // Claims 65535 answers in a 29-byte message.
        var bytes = Captured.v6onlyA
        bytes[6] = 0xFF
        bytes[7] = 0xFF
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func rejectsACompressionPointerToItself() {
        var bytes = hex("1234818000010000000000")
        bytes.append(0)  // finish header (12 bytes)
        bytes += [0xC0, 12, 0, 1, 0, 1]  // name = pointer to offset 12 (itself)
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func rejectsPointerLoopsBetweenTwoNames() {
        // Answer name points forward to a pointer that points back: forward pointers are refused.
        var bytes = Captured.aTestA
        let answerName = 24  // offset of the answer's c00c
        bytes[answerName] = 0xC0
        bytes[answerName + 1] = UInt8(answerName + 2)
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func rejectsRecordDataRunningPastTheEnd() {
        var bytes = Captured.aTestA
        bytes[bytes.count - 5] = 0xFF  // rdlength high byte
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func rejectsTruncatedMessagesAtEveryLength() {
        for length in 12..<Captured.aTestAAAA.count {
            #expect(throws: DNSWireError.self) { try DNSMessage(parsing: Captured.aTestAAAA.prefix(length)) }
        }
    }

    @Test func rejectsNamesLongerThan255Bytes() {
        var bytes = hex("123481800001000000000000")
        for _ in 0..<5 { bytes += [63] + [UInt8](repeating: 0x61, count: 63) }
        bytes += [0, 0, 1, 0, 1]
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: bytes) }
    }

    @Test func rejectsOversizedMessages() {
        #expect(throws: DNSWireError.self) { try DNSMessage(parsing: [UInt8](repeating: 0, count: 70_000)) }
    }

    @Test func ignoresAddressRecordsOfTheWrongLengthOrOwner() throws {
        var bytes = hex("abcd818000010002000000000161047465737400" + "00010001")
        bytes += hex("c00c000100010000003c00050102030405")  // A with 5 bytes: ignored
        bytes += [1, 0x7A, 0xC0, 14] + hex("000100010000003c00040a000001")  // z.test A: not our name
        let m = try DNSMessage(parsing: bytes)
        #expect(m.addresses(for: .a).addresses.isEmpty)
    }

    @Test func refusesToEncodeBadNames() {
        #expect(throws: DNSWireError.self) {
            try DNSMessage.query(name: String(repeating: "a", count: 64) + ".com", type: .a)
        }
        #expect(throws: DNSWireError.self) { try DNSMessage.query(name: "a..com", type: .a) }
    }

    @Test func fuzzedBytesNeverCrash() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            var bytes = Captured.aTestAAAA
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            _ = try? DNSMessage(parsing: bytes)
        }
    }
}

@Suite struct IPAddressTests {
    @Test func parsesAndFormats() {
        #expect(IPAddress("127.0.0.1")?.description == "127.0.0.1")
        #expect(IPAddress("[2001:DB8::1]")?.description == "2001:db8::1")
        #expect(IPAddress("a.test") == nil)
        #expect(IPAddress("1.2.3") == nil)
        #expect(IPAddress("") == nil)
    }

    @Test func classifiesNonGlobalRanges() {
        for s in [
            "127.0.0.1", "10.1.1.1", "172.16.0.1", "192.168.1.1", "169.254.1.1", "100.64.0.1", "::1", "fd00::1",
            "fe80::1", "100::66", "::ffff:10.0.0.1",
        ] {
            #expect(IPAddress(s)!.isNonGlobal, "\(s)")
        }
        for s in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "172.32.0.1"] {
            #expect(!IPAddress(s)!.isNonGlobal, "\(s)")
        }
        #expect(IPAddress("0.0.0.0")!.isUnspecified)
        #expect(IPAddress("::")!.isUnspecified)
    }
}
