// What a server's answer must be, from a query's header and OPT records alone, before any name is looked
// up: the DoH service (`httpdns serve`) and the classic DNS server both answer through `AnswerRule`, so
// they say the same as unbound does:
//
// - an opcode other than QUERY (an UPDATE, a NOTIFY) is NOTIMP, with the header and question echoed and
//   no records; it is decided first, as unbound decides it before reading EDNS;
// - more than one OPT record is FORMERR (RFC 6891 §6.1.1);
// - an EDNS version above 0 is BADVERS, extended rcode 16 (RFC 6891 §6.1.3): 0 in the header, 1 in the
//   OPT record's EXTENDED-RCODE, version 0 (ours);
// - an answer carries one OPT record of ours exactly when the query had one (RFC 6891 §7), whatever its
//   rcode and truncated or not, advertising the UDP payload size we accept (`DNSMessage.ednsUDPSize`);
// - over an encrypted transport a query whose OPT record holds a Padding option (RFC 7830) has its answer
//   padded to a multiple of 468 bytes (RFC 8467 §4.1's block-length policy, as unbound pads). Plain Do53
//   is never padded: padding hides sizes from an eavesdropper, and there everything is in the clear.
//   An answer that padding would take past the largest message goes unpadded (RFC 8467 allows any
//   answer to go unpadded; a message too large could not be sent at all).

import HTTPDNSCore

/// What a query's OPT records said (RFC 6891 §6.1): how many there were, and the first one's version and
/// whether it holds a Padding option (RFC 7830). Parsed with the query (`DNSMessage.edns`).
struct QueryEDNS: Hashable, Sendable {
    /// OPT records in the additional section (among its first 8 records); more than one is malformed.
    var records: Int
    /// The EDNS version the client speaks; we speak 0.
    var version: UInt8
    /// Whether the client asked for padding by sending a Padding option itself (RFC 8467 §4.1).
    var asksForPadding: Bool

    init(records: Int = 1, version: UInt8 = 0, asksForPadding: Bool = false) {
        self.records = records
        self.version = version
        self.asksForPadding = asksForPadding
    }

    /// The facts of one OPT record. Its TTL field holds EXTENDED-RCODE, VERSION and the flags, a byte,
    /// a byte and two (RFC 6891 §6.1.3); the parser reads it unclamped.
    init(opt record: DNSRecord) {
        self.init(
            records: 1,
            version: UInt8(truncatingIfNeeded: record.ttl >> 16),
            asksForPadding: Self.hasPadding(inOptions: record.data)
        )
    }

    /// Whether an OPT record's options hold a Padding option (code 12), read up to an option whose
    /// length runs past the end (what comes after it cannot be told apart).
    static func hasPadding(inOptions data: [UInt8]) -> Bool {
        var at = 0
        while at + 4 <= data.count {
            let code = Int(data[at]) << 8 | Int(data[at + 1])
            let length = Int(data[at + 2]) << 8 | Int(data[at + 3])
            guard at + 4 + length <= data.count else { return false }
            if code == Int(AnswerOPT.paddingOption) { return true }
            at += 4 + length
        }
        return false
    }
}

/// The OPT record a server puts last in its answer (RFC 6891 §6.1.2): the UDP payload size we accept
/// (`DNSMessage.ednsUDPSize`), the rcode's upper 8 bits, version 0, no flags (we do no DNSSEC, so DO
/// stays clear, RFC 3225 §3), and, when `paddingBlock` is set, a Padding option (RFC 7830) that brings
/// the whole message to a multiple of it.
package struct AnswerOPT: Hashable, Sendable {
    /// The block the answer's length is padded to a multiple of; nil for no padding.
    var paddingBlock: Int?

    package init(paddingBlock: Int? = nil) {
        self.paddingBlock = paddingBlock
    }

    /// RFC 8467 §4.1's recommended block for responses (unbound's `pad-responses-block-size`).
    static let responseBlock = 468
    /// The Padding option's code (RFC 7830 §3).
    static let paddingOption: UInt16 = 12

    /// How many zero bytes a Padding option must hold so that a message of `unpadded` bytes (its OPT
    /// record without the option included) becomes a multiple of `block` once the option and its 4-byte
    /// header are added; nil when that would make it longer than `limit`, or for a block below 1.
    static func paddingLength(unpadded: Int, block: Int, limit: Int) -> Int? {
        guard block > 0 else { return nil }
        let withHeader = unpadded + 4
        let length = (block - withHeader % block) % block
        guard withHeader + length <= limit else { return nil }
        return length
    }

    /// Appends the record to `message`, which holds everything that goes before it (its ARCOUNT
    /// counted it already). Padding stays within `DNSMessage.maximumSize`, or is left out.
    func append(to message: inout [UInt8], rcode: DNSResponseCode) {
        message.append(0)  // owner: the root
        message.appendUInt16(DNSRecordType.opt.rawValue)
        message.appendUInt16(DNSMessage.ednsUDPSize)  // CLASS: the payload size we accept
        message.append(rcode.rawValue >> 4)  // EXTENDED-RCODE: the bits the header has no room for
        message.append(0)  // VERSION
        message.appendUInt16(0)  // DO and Z
        // `+ 2`: RDLENGTH, still to come, counts in the message's length.
        let padding = paddingBlock.flatMap {
            Self.paddingLength(unpadded: message.count + 2, block: $0, limit: DNSMessage.maximumSize)
        }
        guard let padding else {
            message.appendUInt16(0)
            return
        }
        // Both fit: `paddingLength` keeps the whole message within 65535 bytes.
        message.appendUInt16(UInt16(4 + padding))
        message.appendUInt16(Self.paddingOption)
        message.appendUInt16(UInt16(padding))
        message.append(contentsOf: repeatElement(0, count: padding))  // RFC 7830 §3: zeros
    }
}

/// How a server answers one query as its opcode and EDNS require (see the note at the top of this file):
/// the error it gets instead of an answer, if any, and the OPT record the answer carries, if any. Pure.
package struct AnswerRule: Hashable, Sendable {
    /// NOTIMP, FORMERR or BADVERS, answered with the question echoed and no records; nil when the query
    /// is to be answered.
    package var refusal: DNSResponseCode?
    /// The OPT record every answer to the query carries, refusals and truncated answers included; nil
    /// when the query had none (RFC 6891 §7).
    package var opt: AnswerOPT?

    /// `encrypted`: the query came over an encrypted transport (DoH), where padding is honoured.
    init(opcode: UInt8, edns: QueryEDNS?, encrypted: Bool) {
        opt = edns.map {
            AnswerOPT(paddingBlock: encrypted && $0.asksForPadding ? AnswerOPT.responseBlock : nil)
        }
        if opcode != 0 {
            refusal = .notImplemented
        } else if let edns, edns.records > 1 {
            refusal = .formatError
        } else if let edns, edns.version > 0 {
            refusal = .badVersion
        } else {
            refusal = nil
        }
    }

    package init(for query: DNSMessage, encrypted: Bool) {
        self.init(opcode: query.opcode, edns: query.edns, encrypted: encrypted)
    }
}

extension DNSMessage {
    /// The answer to a query whose header can be read but whose opcode we do not implement, when the
    /// rest does not parse: NOTIMP with the id, opcode and RD echoed and every section empty (unbound
    /// answers the opcode before it reads further). Nil for a message shorter than a header, a
    /// response, or a standard query (QUERY): those are malformed, not unimplemented.
    package static func notImplementedAnswer(toUnreadable bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count >= 12, bytes[2] & 0x80 == 0 else { return nil }
        let opcodeAndRD = bytes[2] & 0x79  // OPCODE (0x78) and RD (0x01)
        guard opcodeAndRD & 0x78 != 0 else { return nil }
        // QR, then RA and NOTIMP (as `response(to:)` sets RA).
        let header: [UInt8] = [bytes[0], bytes[1], 0x80 | opcodeAndRD, 0x80 | DNSResponseCode.notImplemented.rawValue]
        return header + [UInt8](repeating: 0, count: 8)
    }
}
