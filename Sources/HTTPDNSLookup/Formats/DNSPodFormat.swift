// The DNSPod / Tencent Cloud HTTPDNS text API (`GET /d?dn=NAME&ttl=1&clientip=1[&type=aaaa|addrs]`).
//
// Body shapes, all plain text (after decryption for the AES and DES forms):
//   single name, one family          `1.2.3.4;5.6.7.8,300`            (`,TTL` only with ttl=1)
//   dual stack (`type=addrs`)        `1.2.3.4;5.6.7.8,300-2001:db8::1,300`   (a side with no records: `0`)
//   with `clientip=1`                `…|203.0.113.9`: the address the service saw the query come from
//   batch (`dn=a.com,b.com`)         one line per name: `a.com.:1.2.3.4,300` (dual stack as above);
//                                    the vendor's docs put `|clientip` on the last line only, its SDKs
//                                    expect it on every line: both are read
//   `query=1`                        a single-name answer carries the `name.:` prefix too
//   no answer                        `0` (or an empty body / empty part)
// IPv6 addresses never contain '-' or '|', so those split the parts safely. Facts from the vendor's
// SDKs (DNSPod/httpdns-sdk-ios `MSDKDnsInfoTool.m`, `HttpsDnsResolver.m`; httpdns-sdk-android
// `ResponseParser.java`) and its API pages (cloud.tencent.com/document/product/379/95497, /379/61200).

import HTTPDNSCore

/// Builds DNSPod queries and parses their answers.
package enum DNSPodFormat {
    /// The `type` parameter for a query (nil: the default, IPv4).
    static func typeParameter(for query: AddressQuery) -> String? {
        switch query {
        case .ipv4: return nil
        case .ipv6: return "aaaa"
        case .both: return "addrs"
        }
    }

    /// Parses a response body for `names` (in the order they were asked).
    ///
    /// A single-name response has no `name.:` prefix; a batch response has one per line and lines for
    /// names not asked are ignored. Names missing from a batch response get no entry.
    static func parse(_ body: String, names: [String], query: AddressQuery) throws -> [String: HostAnswer] {
        guard body.utf8.count <= 256 * 1024 else { throw AnswerFormatError("DNSPod answer larger than 256 KiB") }
        // "\r\n" is one Character in Swift, equal to neither "\n" nor "\r": CRLF lines need their own case.
        let rawLines = body.split(whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }).map {
            $0.trimmed(of: " \t")
        }.filter { !$0.isEmpty }
        // `|clientip` first: from every line that has it (the last one seen wins).
        var clientAddress: IPAddress?
        let lines = try rawLines.map { line -> String in
            guard let bar = line.firstIndex(of: "|") else { return line }
            let text = line[line.index(after: bar)...].trimmed(of: " \t")
            // `0` is DNSPod's "none".
            if text != "0", let ip = try reportedClientAddress(text, field: "DNSPod answer's client address") {
                clientAddress = ip
            }
            return String(line[..<bar])
        }
        var result: [String: HostAnswer] = [:]
        let wanted = Set(names.map { normalizeHostname($0) })
        if names.count == 1, lines.count <= 1, !(lines.first ?? "").contains(".:") {
            result[normalizeHostname(names[0])] = try parseLine(lines.first ?? "0", query: query)
            return result.mapValues { $0.seenFrom(clientAddress) }
        }
        for line in lines {
            guard let sep = line.range(of: ".:") ?? line.range(of: ":") else {
                throw AnswerFormatError("DNSPod batch line without a \"name.:\" prefix: \(line.prefix(80))")
            }
            let name = normalizeHostname(line[line.startIndex..<sep.lowerBound])
            guard wanted.contains(name) else { continue }
            result[name] = try parseLine(String(line[sep.upperBound...]), query: query)
        }
        return result.mapValues { $0.seenFrom(clientAddress) }
    }

    static func parseLine(_ line: String, query: AddressQuery) throws -> HostAnswer {
        let parts = line.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        switch (query, parts.count) {
        case (.ipv4, 1):
            return HostAnswer(ipv4: try parsePart(parts[0], wantIPv6: false))
        case (.ipv6, 1):
            return HostAnswer(ipv6: try parsePart(parts[0], wantIPv6: true))
        case (.both, 2):
            return HostAnswer(
                ipv4: try parsePart(parts[0], wantIPv6: false),
                ipv6: try parsePart(parts[1], wantIPv6: true)
            )
        case (.both, 1):
            // Some deployments answer `0` alone, or only the v4 part, for dual-stack queries.
            return HostAnswer(ipv4: try parsePart(parts[0], wantIPv6: false), ipv6: .empty)
        default:
            throw AnswerFormatError("DNSPod answer has \(parts.count) '-'-separated parts: \(line.prefix(80))")
        }
    }

    static func parsePart(_ part: String, wantIPv6: Bool) throws -> FamilyAnswer {
        let trimmed = part.trimmed(of: " \t")
        if trimmed.isEmpty || trimmed == "0" { return .empty }
        var ipsText = Substring(trimmed)
        var ttl: UInt32?
        if let comma = trimmed.lastIndex(of: ",") {
            let ttlText = trimmed[trimmed.index(after: comma)...]
            guard let t = UInt32(ttlText) else {
                throw AnswerFormatError("DNSPod TTL \"\(ttlText.prefix(20))\" is not a number")
            }
            ttl = t
            ipsText = trimmed[..<comma]
        }
        if ipsText == "0" || ipsText.isEmpty { return FamilyAnswer(addresses: [], ttl: ttl) }
        var addresses = AddressCollector()
        for item in ipsText.split(separator: ";") where !item.isEmpty {
            if addresses.isFull { break }
            guard let ip = IPAddress(item) else {
                throw AnswerFormatError("DNSPod answer holds \"\(item.prefix(60))\", which is not an IP address")
            }
            guard ip.isIPv6 == wantIPv6 else {
                throw AnswerFormatError("DNSPod answer holds \(ip) in the \(wantIPv6 ? "IPv6" : "IPv4") part")
            }
            addresses.add(ip)
        }
        return FamilyAnswer(addresses: addresses.addresses, ttl: ttl)
    }

    /// Formats an answer the way a DNSPod server does (used by the project's own server and fixtures).
    /// With `clientAddress`, `|ADDRESS` is appended (`clientip=1`).
    package static func format(
        _ answer: HostAnswer,
        query: AddressQuery,
        withTTL: Bool,
        clientAddress: IPAddress? = nil
    ) -> String {
        func part(_ f: FamilyAnswer?) -> String {
            guard let f, !f.addresses.isEmpty else { return "0" }
            let ips = f.addresses.map(\.description).joined(separator: ";")
            return withTTL ? "\(ips),\(f.ttl ?? 0)" : ips
        }
        let text: String
        switch query {
        case .ipv4: text = part(answer.ipv4)
        case .ipv6: text = part(answer.ipv6)
        case .both: text = part(answer.ipv4) + "-" + part(answer.ipv6)
        }
        return clientAddress.map { "\(text)|\($0)" } ?? text
    }
}
