// HTTPS records (RFC 9460) as providers send them and the server writes them: the wire form (RDATA), the
// presentation form (zone files, JSON DoH `data`), and a name's answer. The record types themselves are
// HTTPDNSCore's (ServiceBinding.swift), which the engine reads.
//
// Reading follows RFC 9460 §2.2 and §8: SvcParamKeys must rise strictly; a record whose `mandatory` names
// a key we do not know, or whose known key's value is malformed, is unusable and dropped; unknown keys
// are skipped.

import Foundation
import HTTPDNSCore

/// A name's HTTPS records as a provider answered them: none when it has none, with how long they may
/// be kept (nil: no TTL given).
package struct ServiceBindingAnswer: Hashable, Sendable {
    package var bindings: [ServiceBinding]
    package var ttl: UInt32?

    package init(bindings: [ServiceBinding], ttl: UInt32?) {
        self.bindings = bindings
        self.ttl = ttl
    }

    /// The answer from the records that answer the question (nil: one that did not read, left out) and
    /// the TTL of the CNAME chain that led to them: at most 32 records, sorted by priority, the smallest
    /// TTL among those used. An alias next to endpoints is a misconfiguration: the alias wins (RFC 9460
    /// §2.4.2).
    init(collecting records: some Sequence<(ServiceBinding?, UInt32?)>, chainTTL: UInt32?) {
        var ttl = chainTTL
        var bindings: [ServiceBinding] = []
        for (binding, recordTTL) in records {
            guard let binding else { continue }
            bindings.append(binding)
            if let recordTTL { ttl = min(ttl ?? recordTTL, recordTTL) }
            if bindings.count == 32 { break }
        }
        if let alias = bindings.first(where: \.isAlias) { bindings = [alias] }
        self.init(bindings: bindings.sorted { $0.priority < $1.priority }, ttl: bindings.isEmpty ? nil : ttl)
    }
}

// MARK: Wire form

extension ServiceBinding {
    /// The SvcParamKeys this type reads (RFC 9460 §14.3.2).
    enum Key: UInt16 {
        case mandatory = 0, alpn, noDefaultALPN, port, ipv4Hint, ech, ipv6Hint
    }

    /// Reads one record's RDATA. Throws `DNSWireError` for a malformed or unusable record.
    init(rdata: [UInt8]) throws {
        var reader = WireReader(rdata)
        self.init(priority: try reader.readUInt16(), target: try reader.readUncompressedName())
        guard priority != 0 else { return }  // an alias's parameters are ignored (§2.4.2)
        var previous: Int = -1
        var mandatory: [UInt16] = []
        while reader.remaining > 0 {
            let key = try reader.readUInt16()
            let length = Int(try reader.readUInt16())
            guard Int(key) > previous else { throw DNSWireError("SvcParamKeys out of order (\(key))") }
            previous = Int(key)
            guard length <= reader.remaining else { throw DNSWireError("SvcParam \(key) runs past the end") }
            let value = Array(rdata[reader.offset..<(reader.offset + length)])
            reader.offset += length
            switch Key(rawValue: key) {
            case .mandatory:
                guard length > 0, length % 2 == 0 else { throw DNSWireError("malformed mandatory") }
                mandatory = stride(from: 0, to: length, by: 2).map { UInt16(value[$0]) << 8 | UInt16(value[$0 + 1]) }
            case .alpn:
                alpn = try Self.alpnIDs(value)
            case .noDefaultALPN:
                guard length == 0 else { throw DNSWireError("no-default-alpn with a value") }
                noDefaultALPN = true
            case .port:
                guard length == 2 else { throw DNSWireError("port of \(length) bytes") }
                port = Int(value[0]) << 8 | Int(value[1])
            case .ipv4Hint:
                ipv4Hints = try Self.addresses(value, size: 4)
            case .ech:
                ech = value
            case .ipv6Hint:
                ipv6Hints = try Self.addresses(value, size: 16)
            case nil:
                continue  // a key we do not know is skipped, unless mandatory (below)
            }
        }
        for key in mandatory where Key(rawValue: key) == nil || key == 0 {
            throw DNSWireError("mandatory key \(key) is not supported")
        }
        if noDefaultALPN, alpn.isEmpty { throw DNSWireError("no-default-alpn without alpn") }
    }

    /// The RDATA of this record. Throws `DNSWireError` naming the limit for what the wire form cannot
    /// carry: a target over 255 bytes or with a label over 63, an ALPN id that is empty or over 255
    /// bytes, a parameter over 65,535 bytes, `no-default-alpn` without `alpn`, a port outside 0…65535,
    /// or RDATA over 65,535 bytes. Nothing is truncated or wrapped.
    func rdata() throws -> [UInt8] {
        var out: [UInt8] = []
        out.appendUInt16(priority)
        try out.appendName(target)
        guard !isAlias else { return out }
        func param(_ key: Key, _ name: String, _ value: [UInt8]) throws {
            guard value.count <= 65_535 else {
                throw DNSWireError("\(name) is \(value.count) bytes; a parameter holds 65535 at most")
            }
            out.appendUInt16(key.rawValue)
            out.appendUInt16(UInt16(value.count))
            out += value
        }
        if !alpn.isEmpty {
            var ids: [UInt8] = []
            for id in alpn {
                let bytes = Array(id.utf8)
                guard (1...255).contains(bytes.count) else {
                    throw DNSWireError("alpn id \"\(id.prefix(40))\" is \(bytes.count) bytes; give 1 to 255")
                }
                ids += [UInt8(bytes.count)] + bytes
            }
            try param(.alpn, "alpn", ids)
        }
        if noDefaultALPN {
            guard !alpn.isEmpty else { throw DNSWireError("no-default-alpn without alpn") }
            try param(.noDefaultALPN, "no-default-alpn", [])
        }
        if let port {
            guard (0...65535).contains(port) else { throw DNSWireError("port=\(port); give 0 to 65535") }
            try param(.port, "port", [UInt8(port >> 8), UInt8(port & 0xFF)])
        }
        if !ipv4Hints.isEmpty { try param(.ipv4Hint, "ipv4hint", ipv4Hints.flatMap(\.bytes)) }
        if let ech { try param(.ech, "ech", ech) }
        if !ipv6Hints.isEmpty { try param(.ipv6Hint, "ipv6hint", ipv6Hints.flatMap(\.bytes)) }
        guard out.count <= 65_535 else {
            throw DNSWireError("the record's RDATA is \(out.count) bytes; a record holds 65535 at most")
        }
        return out
    }

    private static func alpnIDs(_ value: [UInt8]) throws -> [String] {
        var ids: [String] = []
        var i = 0
        while i < value.count {
            let length = Int(value[i])
            guard length > 0, i + 1 + length <= value.count else { throw DNSWireError("malformed alpn") }
            // Not repaired: a U+FFFD made up here would be written back as other bytes, and longer.
            guard let id = String(strictUTF8: value[(i + 1)...(i + length)]) else {
                throw DNSWireError("an alpn id that is not UTF-8")
            }
            ids.append(id)
            i += 1 + length
        }
        guard !ids.isEmpty else { throw DNSWireError("empty alpn") }
        return ids
    }

    private static func addresses(_ value: [UInt8], size: Int) throws -> [IPAddress] {
        guard !value.isEmpty, value.count % size == 0 else {
            throw DNSWireError("address hint of \(value.count) bytes")
        }
        return stride(from: 0, to: value.count, by: size).compactMap {
            IPAddress(bytes: Array(value[$0..<($0 + size)]))
        }
    }
}

// MARK: Presentation form

extension ServiceBinding {
    /// Reads the presentation form (`1 . alpn="h2,h3" port=8443 ipv4hint=192.0.2.1`), or RFC 3597's
    /// generic form (`\# 19 0001…`) that some JSON DoH services answer with. Throws `DNSWireError`.
    package init(parsing text: String) throws {
        let fields = text.split(whereSeparator: \.isWhitespace).map(String.init)
        if fields.first == "\\#" {
            let hex = fields.dropFirst(2).joined()
            guard hex.count % 2 == 0, fields.count >= 2, Int(fields[1]) == hex.count / 2 else {
                throw DNSWireError("generic RDATA \"\(text.prefix(60))\" does not match its length")
            }
            var bytes: [UInt8] = []
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                guard let byte = UInt8(hex[index..<next], radix: 16) else {
                    throw DNSWireError("generic RDATA not hex")
                }
                bytes.append(byte)
                index = next
            }
            try self.init(rdata: bytes)
            return
        }
        guard fields.count >= 2, let priority = UInt16(fields[0]) else {
            throw DNSWireError("\"\(text.prefix(60))\" is not an HTTPS record (priority target params…)")
        }
        self.init(
            priority: priority,
            target: fields[1] == "." ? "." : String(fields[1].dropLast(fields[1].hasSuffix(".") ? 1 : 0))
        )
        guard !isAlias else {
            // The target must encode (an alias's parameters are ignored); kept as the wire form reads.
            self = try Self(rdata: try rdata())
            return
        }
        for field in fields.dropFirst(2) {
            let (key, value) = Self.keyValue(field)
            switch key {
            case "alpn": alpn = value.split(separator: ",").map(String.init)
            case "no-default-alpn": noDefaultALPN = true
            case "port":
                guard let port = Int(value), (0...65535).contains(port) else { throw DNSWireError("port=\(value)") }
                self.port = port
            case "ipv4hint", "ipv6hint":
                let ips = value.split(separator: ",").compactMap { IPAddress($0) }
                guard !ips.isEmpty, ips.allSatisfy({ $0.isIPv6 == (key == "ipv6hint") }) else {
                    throw DNSWireError("\(key)=\(value)")
                }
                if key == "ipv4hint" { ipv4Hints = ips } else { ipv6Hints = ips }
            case "ech":
                guard let bytes = Data(base64Encoded: value) else { throw DNSWireError("ech is not base64") }
                ech = Array(bytes)
            case "mandatory":
                let known = ["alpn", "no-default-alpn", "port", "ipv4hint", "ech", "ipv6hint"]
                for name in value.split(separator: ",") where !known.contains(String(name)) {
                    throw DNSWireError("mandatory key \(name) is not supported")
                }
            default:
                continue
            }
        }
        // What reads must also write: a record the wire form cannot carry is refused here, where it is
        // configured, not when the first query asks for it. Kept as the wire form reads back (the
        // target's odd bytes escaped), so the record answered is the record configured.
        self = try Self(rdata: try rdata())
    }

    /// `key=value` or `key="value"`, or a bare key.
    private static func keyValue(_ field: String) -> (String, String) {
        guard let equals = field.firstIndex(of: "=") else { return (field, "") }
        var value = field[field.index(after: equals)...]
        if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
        return (String(field[..<equals]), String(value))
    }
}

extension WireReader {
    /// A name written out in full, as RFC 9460 requires of TargetName (no compression pointer).
    mutating func readUncompressedName() throws -> String {
        var labels: [String] = []
        var wireLength = 1  // the root's zero byte
        while true {
            guard offset < bytes.count else { throw DNSWireError("name runs past the end") }
            let length = Int(bytes[offset])
            guard length & 0xC0 == 0 else { throw DNSWireError("compressed TargetName") }
            offset += 1
            if length == 0 { return labels.isEmpty ? "." : labels.joined(separator: ".") }
            guard offset + length <= bytes.count, labels.count < 127 else {
                throw DNSWireError("label runs past the end")
            }
            wireLength += length + 1
            guard wireLength <= 255 else { throw DNSWireError("TargetName longer than 255 bytes") }
            labels.append(Self.presentation(bytes[offset..<(offset + length)]))
            offset += length
        }
    }
}
