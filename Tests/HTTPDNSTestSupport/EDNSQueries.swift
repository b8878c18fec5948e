// Wire queries built by hand for the EDNS rules: the rule's own suite (HTTPDNSLookupTests,
// AnswerRuleTests) and the server's answers to them (HTTPDNSServerTests, DNSSemanticsTests).

import HTTPDNSLookup

enum EDNSQuery {
    /// An empty Padding option (RFC 7830), the way a client asks for padding.
    static let padding: [UInt8] = [0, 12, 0, 0]

    /// A query for `name` A (id 0x4242, RD) with `opcode` in its header and the OPT records given, each
    /// as its EDNS version and option bytes (a client's UDP size of 512, so ours is told apart); none
    /// for a query without EDNS.
    static func make(
        _ name: String = "a.test",
        opcode: UInt8 = 0,
        opts: [(version: UInt8, options: [UInt8])]
    ) throws -> [UInt8] {
        var bytes = try DNSMessage.query(name: name, type: .a, id: 0x4242, edns: false)
        bytes[2] |= opcode << 3
        bytes[11] = UInt8(opts.count)
        for opt in opts {
            bytes += [0, 0, 41, 0x02, 0x00, 0, opt.version, 0, 0]
            bytes += [UInt8(opt.options.count >> 8), UInt8(opt.options.count & 0xFF)] + opt.options
        }
        return bytes
    }
}
