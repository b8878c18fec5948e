// DNS wire format (RFC 1035), just what a stub resolver and a small server need: build a query, parse a
// response, build a response. Parsing treats every byte as hostile: counts larger than the message,
// compression pointers that loop or point forward, over-long labels and names, and record data that runs
// past the end all become a `DNSWireError`, never a crash or an endless loop.

import HTTPDNSCore

/// A DNS record type (QTYPE/TYPE). Open set: unknown values are kept as they are.
package struct DNSRecordType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: UInt16
    package init(rawValue: UInt16) { self.rawValue = rawValue }

    package static let a = DNSRecordType(rawValue: 1)
    static let cname = DNSRecordType(rawValue: 5)
    static let soa = DNSRecordType(rawValue: 6)
    package static let aaaa = DNSRecordType(rawValue: 28)
    static let opt = DNSRecordType(rawValue: 41)
    /// HTTPS (RFC 9460): `ServiceBinding`.
    package static let https = DNSRecordType(rawValue: 65)

    package var description: String {
        switch self {
        case .a: return "A"
        case .aaaa: return "AAAA"
        case .cname: return "CNAME"
        case .soa: return "SOA"
        case .opt: return "OPT"
        case .https: return "HTTPS"
        default: return "TYPE\(rawValue)"
        }
    }
}

/// DNS response codes that matter to a stub resolver.
package struct DNSResponseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }
    package static let noError = DNSResponseCode(rawValue: 0)
    package static let formatError = DNSResponseCode(rawValue: 1)
    package static let serverFailure = DNSResponseCode(rawValue: 2)
    package static let nameError = DNSResponseCode(rawValue: 3)  // NXDOMAIN
    static let notImplemented = DNSResponseCode(rawValue: 4)
    static let refused = DNSResponseCode(rawValue: 5)
    /// BADVERS (RFC 6891 §9), an extended rcode: its low 4 bits (0) go in the header, the rest (1) in the
    /// answer's OPT record, so it cannot be sent without one.
    static let badVersion = DNSResponseCode(rawValue: 16)

    package var description: String {
        switch self {
        case .noError: return "NOERROR"
        case .formatError: return "FORMERR"
        case .serverFailure: return "SERVFAIL"
        case .nameError: return "NXDOMAIN"
        case .notImplemented: return "NOTIMP"
        case .refused: return "REFUSED"
        case .badVersion: return "BADVERS"
        default: return "RCODE\(rawValue)"
        }
    }
}

/// Why a DNS message could not be read or written.
package struct DNSWireError: Error, Hashable, Sendable, CustomStringConvertible {
    var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { "malformed DNS message: \(reason)" }
}

/// One resource record from the answer section.
struct DNSRecord: Hashable, Sendable {
    var name: String
    var type: DNSRecordType
    var ttl: UInt32
    /// Raw RDATA, except for CNAME where `target` holds the decompressed name.
    var data: [UInt8]
    var target: String?

    init(name: String, type: DNSRecordType, ttl: UInt32, data: [UInt8], target: String? = nil) {
        self.name = name
        self.type = type
        self.ttl = ttl
        self.data = data
        self.target = target
    }
}

/// A parsed DNS message (query or response): header fields, the first question, and the answers.
package struct DNSMessage: Hashable, Sendable {
    package var id: UInt16
    package var isResponse: Bool
    /// The header's OPCODE (RFC 1035 §4.1.1): 0 is a standard query (QUERY), 5 an UPDATE (RFC 2136).
    var opcode: UInt8
    var truncated: Bool
    var recursionDesired: Bool
    package var rcode: DNSResponseCode
    package var questionName: String
    package var questionType: DNSRecordType
    var answers: [DNSRecord]
    /// A query's EDNS Client Subnet option (RFC 7871), when it has one with a non-zero prefix.
    package var clientSubnet: ClientSubnet?
    /// A query's OPT records (RFC 6891); nil when it has none. A response's are not read.
    var edns: QueryEDNS?
    /// The SOA minimum from the authority section, when present: the negative-caching TTL (RFC 2308).
    var negativeTTL: UInt32?

    /// Largest message we accept: TCP's 2-byte length prefix bound.
    static let maximumSize = 65_535
    /// EDNS0 UDP payload size we advertise (the DNS flag day 2020 value, avoids fragmentation).
    static let ednsUDPSize: UInt16 = 1232

    // MARK: Building

    /// Encodes a recursive query for `name` / `type`. RFC 8484 asks DoH clients to use id 0 for cache
    /// friendliness; Do53 callers pass a random id. `edns` adds an OPT record advertising 1232 bytes,
    /// carrying `clientSubnet` as an EDNS Client Subnet option (RFC 7871) when given.
    package static func query(
        name: String,
        type: DNSRecordType,
        id: UInt16 = 0,
        edns: Bool = true,
        clientSubnet: ClientSubnet? = nil
    ) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        out.appendUInt16(id)
        out.appendUInt16(0x0100)  // RD
        out.appendUInt16(1)  // QDCOUNT
        out.appendUInt16(0)
        out.appendUInt16(0)
        out.appendUInt16(edns ? 1 : 0)  // ARCOUNT
        try out.appendName(name)
        out.appendUInt16(type.rawValue)
        out.appendUInt16(1)  // IN
        if edns {
            out.append(0)  // root name
            out.appendUInt16(DNSRecordType.opt.rawValue)
            out.appendUInt16(Self.ednsUDPSize)
            out.appendUInt32(0)
            let options = clientSubnet?.ednsOption ?? []
            out.appendUInt16(UInt16(options.count))
            out += options
        }
        return out
    }

    /// Encodes a response to `query` with the given answers (address records for the question name) and
    /// rcode. Used by the project's own server and test fixtures. The query's id, opcode and RD are
    /// echoed; a query without a question (QDCOUNT 0) is answered without one, and then with no record
    /// (a record's name points at the question). `opt` adds our OPT record as the last record (RFC 6891
    /// §6.1.1), in a truncated answer too (§7); an rcode above 15 (BADVERS) needs it for its upper bits
    /// and is refused without it, never cut to its low 4.
    package static func response(
        to query: DNSMessage,
        rcode: DNSResponseCode = .noError,
        addresses: [IPAddress] = [],
        ttl: UInt32 = 60,
        truncated: Bool = false,
        negativeTTL: UInt32? = nil,
        serviceBindings: [ServiceBinding] = [],
        opt: AnswerOPT? = nil
    ) throws -> [UInt8] {
        guard rcode.rawValue <= 0x0F || opt != nil else {
            throw DNSWireError("rcode \(rcode) does not fit the header's 4 bits; it needs an OPT record (RFC 6891)")
        }
        let answers = addresses.count + serviceBindings.count
        guard answers <= 65_535 else { throw DNSWireError("\(answers) answer records; a message holds 65535 at most") }
        // The parser names a missing question "" (a name read from the wire is "." at least).
        let asked = !query.questionName.isEmpty
        guard asked || truncated || (answers == 0 && negativeTTL == nil) else {
            throw DNSWireError("records in an answer to a query without a question")
        }
        var out: [UInt8] = []
        out.appendUInt16(query.id)
        var flags: UInt16 = 0x8000 | 0x0080  // QR, RA
        flags |= UInt16(query.opcode & 0x0F) << 11
        if query.recursionDesired { flags |= 0x0100 }
        if truncated { flags |= 0x0200 }
        flags |= UInt16(rcode.rawValue & 0x0F)
        out.appendUInt16(flags)
        out.appendUInt16(asked ? 1 : 0)
        out.appendUInt16(truncated ? 0 : UInt16(answers))
        out.appendUInt16(negativeTTL == nil || truncated ? 0 : 1)
        out.appendUInt16(opt == nil ? 0 : 1)
        if asked {
            try out.appendName(query.questionName)
            out.appendUInt16(query.questionType.rawValue)
            out.appendUInt16(1)
        }
        if !truncated {
            for address in addresses {
                out.append(contentsOf: [0xC0, 12])  // pointer to the question name
                out.appendUInt16(address.isIPv6 ? DNSRecordType.aaaa.rawValue : DNSRecordType.a.rawValue)
                out.appendUInt16(1)
                out.appendUInt32(ttl)
                out.appendUInt16(UInt16(address.bytes.count))
                out.append(contentsOf: address.bytes)
            }
            for binding in serviceBindings {
                let rdata = try binding.rdata()
                out.append(contentsOf: [0xC0, 12])
                out.appendUInt16(DNSRecordType.https.rawValue)
                out.appendUInt16(1)
                out.appendUInt32(ttl)
                out.appendUInt16(UInt16(rdata.count))
                out.append(contentsOf: rdata)
            }
            if let negativeTTL {
                // A minimal SOA so resolvers can cache the negative answer (RFC 2308).
                out.append(contentsOf: [0xC0, 12])
                out.appendUInt16(DNSRecordType.soa.rawValue)
                out.appendUInt16(1)
                out.appendUInt32(negativeTTL)
                var rdata: [UInt8] = [0, 0]  // mname ".", rname "."
                for v in [UInt32(1), 3600, 600, 86400, negativeTTL] { rdata.appendUInt32(v) }
                out.appendUInt16(UInt16(rdata.count))
                out.append(contentsOf: rdata)
            }
        }
        // Last: padding is worked out from everything before it.
        opt?.append(to: &out, rcode: rcode)
        guard out.count <= Self.maximumSize else {
            throw DNSWireError("the answer is \(out.count) bytes; a DNS message holds 65535 at most")
        }
        return out
    }

    // MARK: Parsing

    /// Parses a whole DNS message. Throws `DNSWireError` for anything malformed.
    package init(parsing bytes: some Collection<UInt8>) throws {
        var reader = WireReader(Array(bytes))
        guard reader.bytes.count <= Self.maximumSize else { throw DNSWireError("message larger than 65535 bytes") }
        guard reader.bytes.count >= 12 else { throw DNSWireError("shorter than the 12-byte header") }
        self.id = try reader.readUInt16()
        let flags = try reader.readUInt16()
        self.isResponse = flags & 0x8000 != 0
        self.opcode = UInt8((flags >> 11) & 0x0F)
        self.truncated = flags & 0x0200 != 0
        self.recursionDesired = flags & 0x0100 != 0
        self.rcode = DNSResponseCode(rawValue: UInt8(flags & 0x000F))
        let qdcount = Int(try reader.readUInt16())
        let ancount = Int(try reader.readUInt16())
        let nscount = Int(try reader.readUInt16())
        let arcount = Int(try reader.readUInt16())
        // Every question takes at least 5 bytes and every record at least 11: reject counts the message
        // cannot possibly hold before looping over them.
        guard qdcount * 5 + (ancount + nscount) * 11 <= reader.remaining else {
            throw DNSWireError("record counts (\(qdcount) questions, \(ancount) answers) larger than the message")
        }
        guard qdcount <= 1 else { throw DNSWireError("\(qdcount) questions; only one is allowed") }
        if qdcount == 1 {
            self.questionName = try reader.readName()
            self.questionType = DNSRecordType(rawValue: try reader.readUInt16())
            _ = try reader.readUInt16()
        } else {
            self.questionName = ""
            self.questionType = DNSRecordType(rawValue: 0)
        }
        var answers: [DNSRecord] = []
        answers.reserveCapacity(ancount)
        for _ in 0..<ancount {
            answers.append(try reader.readRecord())
        }
        self.answers = answers
        var negativeTTL: UInt32?
        for _ in 0..<nscount {
            let record = try reader.readRecord()
            if record.type == .soa, record.data.count >= 4 {
                let d = record.data
                let minimum = d[d.count - 4..<d.count].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                negativeTTL = min(record.ttl, minimum)
            }
        }
        self.negativeTTL = negativeTTL
        // A query's additional records: only its OPT records are read (how many, the first one's version
        // and padding, a client subnet), and a record that does not parse ends the reading (what came
        // before stands).
        var clientSubnet: ClientSubnet?
        var edns: QueryEDNS?
        if !isResponse {
            for _ in 0..<min(arcount, 8) {
                guard let record = try? reader.readRecord(clampingTTL: false) else { break }
                guard record.type == .opt else { continue }
                if let subnet = Self.clientSubnet(inOptions: record.data) { clientSubnet = subnet }
                if edns == nil {
                    edns = QueryEDNS(opt: record)
                } else {
                    edns?.records += 1
                }
            }
        }
        self.clientSubnet = clientSubnet
        self.edns = edns
    }

    /// The ECS option (code 8) among an OPT record's options: FAMILY 1 or 2, a prefix no longer than
    /// the address, at most the bytes the prefix covers. Nil for anything else, or a prefix of 0.
    static func clientSubnet(inOptions data: [UInt8]) -> ClientSubnet? {
        var at = 0
        while at + 4 <= data.count {
            let code = Int(data[at]) << 8 | Int(data[at + 1])
            let length = Int(data[at + 2]) << 8 | Int(data[at + 3])
            at += 4
            guard at + length <= data.count else { return nil }
            defer { at += length }
            guard code == 8, length >= 4 else { continue }
            let family = Int(data[at]) << 8 | Int(data[at + 1])
            let prefix = Int(data[at + 2])
            let raw = Array(data[at + 4..<at + length])
            let size = family == 1 ? 4 : family == 2 ? 16 : 0
            guard size > 0, prefix > 0, prefix <= size * 8, raw.count <= size,
                let address = IPAddress(bytes: raw + Array(repeating: 0, count: size - raw.count))
            else { return nil }
            return try? ClientSubnet(address: address, prefixLength: prefix)
        }
        return nil
    }

    /// The A/AAAA addresses that answer the question, following the CNAME chain from the question name
    /// (`CNAMEChain`), with the smallest TTL among the records used (nil when there are no addresses).
    func addresses(for type: DNSRecordType) -> (addresses: [IPAddress], ttl: UInt32?) {
        let chain = CNAMEChain(
            from: questionName,
            aliases: answers.compactMap { r in r.type == .cname ? r.target.map { (r.name, $0, r.ttl) } : nil }
        )
        var ttl = chain.ttl
        var result = AddressCollector()
        for r in answers where r.type == type && chain.answers(r.name) {
            if result.isFull { break }
            if let ip = IPAddress(bytes: r.data), ip.isIPv6 == (type == .aaaa) {
                result.add(ip)
                ttl = min(ttl ?? r.ttl, r.ttl)
            }
        }
        return (result.addresses, result.addresses.isEmpty ? nil : ttl)
    }
}

extension DNSMessage {
    /// The HTTPS records that answer the question, following the CNAME chain from the question name,
    /// with the smallest TTL among those used (nil when there are none). A record that does not parse or
    /// is unusable (RFC 9460 §8) is left out; the rest are sorted by priority.
    package func serviceBindings() -> ServiceBindingAnswer {
        let chain = CNAMEChain(
            from: questionName,
            aliases: answers.compactMap { r in r.type == .cname ? r.target.map { (r.name, $0, r.ttl) } : nil }
        )
        return ServiceBindingAnswer(
            collecting: answers.lazy.filter { $0.type == .https && chain.answers($0.name) }
                .map { (try? ServiceBinding(rdata: $0.data), $0.ttl) },
            chainTTL: chain.ttl
        )
    }
}

/// A bounds-checked cursor over a DNS message.
struct WireReader {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    mutating func readUInt16() throws -> UInt16 {
        guard offset + 2 <= bytes.count else { throw DNSWireError("truncated at byte \(offset)") }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    mutating func readUInt32() throws -> UInt32 {
        UInt32(try readUInt16()) << 16 | UInt32(try readUInt16())
    }

    /// Reads a possibly compressed name. Pointers must point strictly backwards, which alone rules out
    /// loops; the jump count and the 255-byte name limit bound the work anyway.
    mutating func readName() throws -> String {
        var labels: [String] = []
        var length = 0
        var position = offset
        var jumped = false
        var jumps = 0
        while true {
            guard position < bytes.count else { throw DNSWireError("name runs past the end") }
            let len = Int(bytes[position])
            switch len & 0xC0 {
            case 0x00:
                if len == 0 {
                    if !jumped { offset = position + 1 }
                    return labels.isEmpty ? "." : labels.joined(separator: ".")
                }
                guard position + 1 + len <= bytes.count else { throw DNSWireError("label runs past the end") }
                length += len + 1
                // 255 bytes on the wire, the root label's zero included (RFC 1035 §3.1).
                guard length < 255 else { throw DNSWireError("name longer than 255 bytes") }
                labels.append(Self.presentation(bytes[(position + 1)..<(position + 1 + len)]))
                position += 1 + len
            case 0xC0:
                guard position + 1 < bytes.count else { throw DNSWireError("compression pointer runs past the end") }
                let target = (len & 0x3F) << 8 | Int(bytes[position + 1])
                guard target < position else { throw DNSWireError("compression pointer does not point backwards") }
                jumps += 1
                guard jumps <= 64 else { throw DNSWireError("too many compression pointers") }
                if !jumped { offset = position + 2 }
                jumped = true
                position = target
            default:
                throw DNSWireError("unknown label type 0x\(String(len & 0xC0, radix: 16))")
            }
        }
    }

    /// A label as text in the presentation format (RFC 1035 §5.1): `.` and `\` escaped with a backslash,
    /// bytes outside printable ASCII as `\DDD`. A label holding a dot or a byte that is not a hostname
    /// character so never passes for another name, and `appendName` writes back exactly these bytes.
    static func presentation(_ label: ArraySlice<UInt8>) -> String {
        if label.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x2E && $0 != 0x5C }) {
            return String(decoding: label, as: UTF8.self)
        }
        var text = ""
        for byte in label {
            switch byte {
            case 0x2E, 0x5C: text += "\\" + String(UnicodeScalar(byte))
            case 0x21..<0x7F: text.unicodeScalars.append(UnicodeScalar(byte))
            default:
                let digits = String(byte)
                text += "\\" + String(repeating: "0", count: 3 - digits.count) + digits
            }
        }
        return text
    }

    /// Reads one record. `clampingTTL` false keeps the TTL field whole: in an OPT record it is no TTL but
    /// the extended rcode, version and flags (RFC 6891 §6.1.3).
    mutating func readRecord(clampingTTL: Bool = true) throws -> DNSRecord {
        let name = try readName()
        let type = DNSRecordType(rawValue: try readUInt16())
        _ = try readUInt16()  // class
        let ttl = try readUInt32()
        let rdlength = Int(try readUInt16())
        guard offset + rdlength <= bytes.count else {
            throw DNSWireError("record data of \(rdlength) bytes runs past the end")
        }
        let start = offset
        let data = Array(bytes[start..<(start + rdlength)])
        var target: String?
        if type == .cname {
            target = try readName()
        }
        offset = start + rdlength
        // RFC 2181 §8: a TTL with the top bit set is treated as zero.
        let kept = !clampingTTL || ttl <= Int32.max ? ttl : 0
        return DNSRecord(name: name, type: type, ttl: kept, data: data, target: target)
    }
}

extension Array where Element == UInt8 {
    mutating func appendUInt16(_ v: UInt16) {
        append(UInt8(v >> 8))
        append(UInt8(v & 0xFF))
    }

    mutating func appendUInt32(_ v: UInt32) {
        appendUInt16(UInt16(v >> 16))
        appendUInt16(UInt16(v & 0xFFFF))
    }

    /// Writes `name` as wire labels. A trailing dot is optional; `\.`, `\\` and `\DDD` escapes (the
    /// presentation format `WireReader.readName` produces) stand for the byte they escape.
    /// Nothing is written for a name that cannot be encoded (it throws first).
    mutating func appendName(_ name: String) throws {
        var encoded: [UInt8] = []
        for label in try Self.wireLabels(name) {
            guard !label.isEmpty else { throw DNSWireError("empty label in \"\(name.prefix(100))\"") }
            guard label.count <= 63 else {
                throw DNSWireError("label longer than 63 bytes in \"\(name.prefix(100))\"")
            }
            encoded.append(UInt8(label.count))
            encoded.append(contentsOf: label)
            guard encoded.count + 1 <= 255 else {
                throw DNSWireError("name longer than 255 bytes: \"\(name.prefix(100))…\"")
            }
        }
        append(contentsOf: encoded)
        append(0)
    }

    /// The labels of a name in text form, split at unescaped dots; none for the root (`""` or `"."`).
    private static func wireLabels(_ name: String) throws -> [[UInt8]] {
        let text = Array(name.utf8)
        var labels: [[UInt8]] = [[]]
        var i = 0
        while i < text.count {
            let c = text[i]
            if c == UInt8(ascii: ".") {
                labels.append([])
                i += 1
            } else if c == UInt8(ascii: "\\") {
                guard i + 1 < text.count else { throw DNSWireError("name \"\(name)\" ends in a lone backslash") }
                let digits = text[(i + 1)..<Swift.min(i + 4, text.count)]
                if digits.count == 3, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                    let value = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                    guard value <= 255 else { throw DNSWireError("escape \\\(value) in \"\(name)\" is not a byte") }
                    labels[labels.count - 1].append(UInt8(value))
                    i += 4
                } else {
                    labels[labels.count - 1].append(text[i + 1])
                    i += 2
                }
            } else {
                labels[labels.count - 1].append(c)
                i += 1
            }
        }
        // "a.com." ends in the root: drop the empty piece after the final dot ("." and "" are the root).
        if labels.count > 1, labels[labels.count - 1].isEmpty { labels.removeLast() }
        if labels.count == 1, labels[0].isEmpty { return [] }
        return labels
    }
}
