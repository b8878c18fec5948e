import Foundation
import HTTPDNSCore

/// The Alibaba-style JSON API: `GET /resolve?host=NAME[&query=4,6]` (Alibaba Cloud EMAS:
/// `/ACCOUNT/d?host=`, signed `/ACCOUNT/sign_d?host=&t=&s=`) answered with
/// `{"host":"a.com","ips":["1.2.3.4"],"ipsv6":["2001:db8::1"],"ttl":60,"origin_ttl":600,"client_ip":"…"}`.
/// A refused query is answered HTTP 403 (or 400) with `{"code":"InvalidSignature"}` and the like.
package enum AlibabaJSONFormat {
    struct Body: Codable {
        var host: String?
        var ips: [String]?
        var ipsv6: [String]?
        var ttl: UInt32?
        var origin_ttl: UInt32?
        var client_ip: String?
    }

    struct ErrorBody: Codable {
        var code: String
    }

    /// The v2 API's path (`/v2/d?id=ACCOUNT`).
    package static let v2Path = "/v2/d"

    /// `/ACCOUNT/d` or `/ACCOUNT/sign_d`: the account and whether the path is the signed one.
    package static func accountPath(_ path: String) -> (account: String, signed: Bool)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].isEmpty, !parts[1].isEmpty, parts[2] == "d" || parts[2] == "sign_d" else {
            return nil
        }
        return (String(parts[1]), parts[2] == "sign_d")
    }

    /// The signed path for an account's path: `/ACCOUNT/d` becomes `/ACCOUNT/sign_d`.
    static func signedPath(for path: String) -> String? {
        accountPath(path).map { "/\($0.account)/sign_d" }
    }

    /// `/ACCOUNT/resolve` or `/ACCOUNT/sign_resolve`, the batch forms: the account and whether signed.
    package static func accountBatchPath(_ path: String) -> (account: String, signed: Bool)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].isEmpty, !parts[1].isEmpty,
            parts[2] == "resolve" || parts[2] == "sign_resolve"
        else { return nil }
        return (String(parts[1]), parts[2] == "sign_resolve")
    }

    /// The batch path for an account's unsigned path: `/ACCOUNT/d` becomes `/ACCOUNT/resolve`.
    static func batchPath(for path: String) -> String? {
        accountPath(path).flatMap { $0.signed ? nil : "/\($0.account)/resolve" }
    }

    /// The signed batch path for an account's path: `/ACCOUNT/d` becomes `/ACCOUNT/sign_resolve`.
    static func signedBatchPath(for path: String) -> String? {
        accountPath(path).map { "/\($0.account)/sign_resolve" }
    }

    /// Names in one batch at most: the vendor's SDKs send 5 (C `HDNS_MULTI_RESOLVE_SIZE`, Go's
    /// `ErrTooManyDomains`).
    package static let maximumBatch = 5

    /// One item of a batch answer: `{"host":"a.com","ips":[…],"type":1,"ttl":60}`, `type` 28 for IPv6
    /// (the Android SDK's reading), or with both `ips` and `ipsv6` and no type (the C SDK's).
    struct BatchItem: Codable {
        var host: String
        var ips: [String]?
        var ipsv6: [String]?
        var type: Int?
        var ttl: UInt32?
        var client_ip: String?
    }

    struct BatchBody: Codable {
        var dns: [BatchItem]?
    }

    /// Parses a batch answer (`/ACCOUNT/sign_resolve`, `{"dns":[…]}`) into an answer for each of `hosts`;
    /// a name the answer leaves out has empty families.
    static func parseBatch(_ body: [UInt8], query: AddressQuery, hosts: [String]) throws -> [String: HostAnswer] {
        let decoded: BatchBody
        do {
            decoded = try JSONDecoder().decode(BatchBody.self, from: Data(body))
        } catch {
            throw AnswerFormatError("JSON API batch answer is not the expected {\"dns\":[…]} object")
        }
        var result: [String: HostAnswer] = [:]
        for host in hosts {
            let wanted = normalizeHostname(host)
            let items = (decoded.dns ?? []).filter { normalizeHostname($0.host) == wanted }
            var v4: [String] = []
            var v6: [String] = []
            var ttl4: UInt32?
            var ttl6: UInt32?
            var client: String?
            for item in items {
                client = client ?? item.client_ip
                switch item.type {
                case 28?:
                    v6 += item.ips ?? []
                    ttl6 = ttl6 ?? item.ttl
                case 1?, nil:
                    v4 += item.ips ?? []
                    ttl4 = ttl4 ?? item.ttl
                    if let more = item.ipsv6 {
                        v6 += more
                        ttl6 = ttl6 ?? item.ttl
                    }
                default:
                    continue  // another record type: not asked for
                }
            }
            result[wanted] = HostAnswer(
                ipv4: query.wantsIPv4 ? try family(v4, ipv6: false, ttl: ttl4, answer: "JSON API batch answer") : nil,
                ipv6: query.wantsIPv6 ? try family(v6, ipv6: true, ttl: ttl6, answer: "JSON API batch answer") : nil
            ).seenFrom(try reportedClientAddress(client, field: "JSON API batch answer's client_ip"))
        }
        return result
    }

    /// A batch answer (the server's side), as the Android SDK reads it: one item per name and family.
    package static func formatBatch(_ answers: [(String, HostAnswer)], clientAddress: IPAddress?) -> [UInt8] {
        var items: [BatchItem] = []
        for (host, answer) in answers {
            for (family, type) in [(answer.ipv4, 1), (answer.ipv6, 28)] {
                guard let family else { continue }
                items.append(
                    BatchItem(
                        host: host,
                        ips: family.addresses.map(\.description),
                        type: type,
                        ttl: family.ttl ?? 0,
                        client_ip: clientAddress?.description
                    )
                )
            }
        }
        return Array((try? JSONEncoder().encode(BatchBody(dns: items))) ?? Data("{}".utf8))
    }

    /// The service's error code in a refusal's body (`{"code":"SignatureExpired"}`), if it has one;
    /// only letters, digits and `._-` are kept, at most 64 of them.
    static func errorCode(_ body: [UInt8]) -> String? {
        guard let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(body)) else { return nil }
        return sanitizedCode(decoded.code)
    }

    /// A service's code with only letters, digits and `._-` kept (at most 64), nil when nothing is left.
    static func sanitizedCode(_ code: String) -> String? {
        let kept = code.unicodeScalars.filter {
            $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0))
        }
        return kept.isEmpty ? nil : String(String.UnicodeScalarView(kept.prefix(64)))
    }

    /// The body of a refusal: `{"code":"CODE"}`.
    package static func formatError(_ code: String) -> [UInt8] {
        Array((try? JSONEncoder().encode(ErrorBody(code: code))) ?? Data("{}".utf8))
    }

    /// The `query` parameter (v2: `q`): `4`, `6` or `4,6`.
    static func queryParameter(for query: AddressQuery) -> String {
        switch query {
        case .ipv4: return "4"
        case .ipv6: return "6"
        case .both: return "4,6"
        }
    }

    /// The families a `query` (v2: `q`) parameter asks for: `4` (also when absent), `6`, `4,6` or `6,4`;
    /// nil for anything else.
    package static func addressQuery(parameter: String?) -> AddressQuery? {
        switch parameter {
        case nil, "", "4": return .ipv4
        case "6": return .ipv6
        case "4,6", "6,4": return .both
        default: return nil
        }
    }

    /// One family's addresses as listed in either API's answer (at most `AddressCollector`'s bound), each
    /// checked to be of that family; the TTL only with addresses.
    static func family(_ texts: [String]?, ipv6: Bool, ttl: UInt32?, answer: String) throws -> FamilyAnswer {
        var out = AddressCollector()
        for t in texts ?? [] {
            if out.isFull { break }
            guard let ip = IPAddress(t), ip.isIPv6 == ipv6 else {
                throw AnswerFormatError("\(answer) lists \"\(t.prefix(60))\" as an \(ipv6 ? "IPv6" : "IPv4") address")
            }
            out.add(ip)
        }
        return FamilyAnswer(addresses: out.addresses, ttl: out.addresses.isEmpty ? nil : ttl)
    }

    /// Parses an answer to a query for `host` (when given: an answer whose `host` field names another
    /// name is refused, so a confused or hostile service cannot hand one name's addresses to another).
    static func parse(_ body: [UInt8], query: AddressQuery, host: String? = nil) throws -> HostAnswer {
        let decoded: Body
        do {
            decoded = try JSONDecoder().decode(Body.self, from: Data(body))
        } catch {
            throw AnswerFormatError("JSON API answer is not the expected {\"host\",\"ips\",\"ipsv6\",\"ttl\"} object")
        }
        if let host, let answered = decoded.host, normalizeHostname(answered) != normalizeHostname(host) {
            throw AnswerFormatError(
                "JSON API answered for \"\(answered.prefix(80))\", not for the name asked (\(host))"
            )
        }
        func family(_ texts: [String]?, ipv6: Bool) throws -> FamilyAnswer {
            try Self.family(texts, ipv6: ipv6, ttl: decoded.ttl, answer: "JSON API answer")
        }
        return HostAnswer(
            ipv4: query.wantsIPv4 ? try family(decoded.ips, ipv6: false) : nil,
            ipv6: query.wantsIPv6 ? try family(decoded.ipsv6, ipv6: true) : nil
        ).seenFrom(try reportedClientAddress(decoded.client_ip, field: "JSON API answer's client_ip"))
    }

    package static func format(host: String, answer: HostAnswer, clientAddress: IPAddress? = nil) -> [UInt8] {
        let ttl = answer.ipv4?.ttl ?? answer.ipv6?.ttl ?? 0
        let body = Body(
            host: host,
            ips: answer.ipv4?.addresses.map(\.description) ?? [],
            ipsv6: answer.ipv6?.addresses.map(\.description) ?? [],
            ttl: ttl,
            origin_ttl: ttl,
            client_ip: clientAddress?.description
        )
        return Array((try? JSONEncoder().encode(body)) ?? Data("{}".utf8))
    }
}

/// Alibaba Cloud EMAS's newer API, `/v2/d` (its iOS 3.x, Android and Node SDKs): plain mode (`m=0`)
/// answers `{"code":"success","mode":0,"data":{"cip":"…","answers":[{"dn":"a.com",
/// "v4":{"ips":["1.2.3.4"],"ttl":60},"v6":{"ips":[…],"ttl":60}}]}}`, one answer per name asked (up to 5
/// comma-joined in `dn`); the encrypted modes (`m=1`, `m=2`) answer with `"data"` a Base64 string that
/// decrypts to that same `data` object (see AlibabaV2Cipher). A refusal has another `code`.
package enum AlibabaV2Format {
    struct Family: Codable {
        var ips: [String]?
        var ttl: UInt32?
        /// Why the family has no address (`RRNotExist`, `DomainNotExist`, …), sent with an empty `ips`.
        /// The SDKs read any non-empty value as "no record" (Alibaba's Android SDK,
        /// resolve/ResolveHostResponse.java; its iOS SDK, HttpdnsRemoteResolver.m), and so do we.
        var no_ip_code: String?
    }

    struct Answer: Codable {
        var dn: String
        var v4: Family?
        var v6: Family?
    }

    struct Data: Codable {
        var cip: String?
        var answers: [Answer]?
    }

    /// `data`: the object (plain mode) or the encrypted string.
    enum Payload: Codable {
        case plain(Data)
        case encrypted(String)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                self = .encrypted(text)
            } else {
                self = .plain(try container.decode(Data.self))
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .plain(let data): try container.encode(data)
            case .encrypted(let text): try container.encode(text)
            }
        }
    }

    struct Body: Codable {
        var code: String
        var mode: Mode?
        var data: Payload?
    }

    /// `mode`, a number or the same number as a string (`"1"`): Alibaba's Android SDK reads it with
    /// `getString("mode")` and compares it with "1" and "2" (resolve/ResolveHostResponseParser.java), its
    /// iOS SDK with `integerValue` (HttpdnsRemoteResolver.m), so both forms work with them. A string that
    /// is not a number is plain mode, as Android falls back to PLAIN for it.
    struct Mode: Codable {
        var value: Int

        init(_ value: Int) { self.value = value }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let number = try? container.decode(Int.self) {
                value = number
            } else {
                value = Int(try container.decode(String.self).trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(value)
        }
    }

    /// Names asked in one request at most: the vendor's SDKs batch 5 (`HTTPDNS_PRE_RESOLVE_BATCH_SIZE`,
    /// Android's `maxCountPerRequest`), as for `sign_resolve`.
    static let maximumBatch = AlibabaJSONFormat.maximumBatch

    /// An answer's parts: the mode, and the plain `data` object or the encrypted text.
    struct Envelope: Sendable {
        var mode: Int
        var plain: [UInt8]?
        var encrypted: String?
    }

    /// Reads the outer object; a `code` other than `success` is an error naming it.
    static func envelope(_ body: [UInt8]) throws -> Envelope {
        let decoded: Body
        do {
            decoded = try JSONDecoder().decode(Body.self, from: Foundation.Data(body))
        } catch {
            throw AnswerFormatError("v2 answer is not the expected {\"code\",\"mode\",\"data\"} object")
        }
        guard decoded.code == "success" else {
            throw AnswerFormatError("v2 answer has code \(AlibabaJSONFormat.sanitizedCode(decoded.code) ?? "?")")
        }
        let mode = decoded.mode?.value ?? 0
        switch decoded.data {
        case .plain(let data)?:
            guard mode == 0 else { throw AnswerFormatError("v2 answer in mode \(mode) carries plain data") }
            return Envelope(mode: 0, plain: Array((try? JSONEncoder().encode(data)) ?? Foundation.Data()))
        case .encrypted(let text)?:
            guard mode == 1 || mode == 2 else { throw AnswerFormatError("v2 answer in mode \(mode) carries a string") }
            return Envelope(mode: mode, encrypted: text)
        case nil:
            return Envelope(mode: mode, plain: Array("{}".utf8))
        }
    }

    /// The answers for `hosts` in a plain `data` object (decrypted, for the encrypted modes); a name the
    /// answer leaves out has empty families, and the address the service saw goes with every answer.
    static func answers(data: [UInt8], query: AddressQuery, hosts: [String]) throws -> [String: HostAnswer] {
        let decoded: Data
        do {
            decoded = try JSONDecoder().decode(Data.self, from: Foundation.Data(data))
        } catch {
            throw AnswerFormatError("v2 answer's data is not the expected {\"cip\",\"answers\"} object")
        }
        let client = try reportedClientAddress(decoded.cip, field: "v2 answer's cip")
        func family(_ f: Family?, ipv6: Bool) throws -> FamilyAnswer {
            try AlibabaJSONFormat.family(f?.ips, ipv6: ipv6, ttl: f?.ttl, answer: "v2 answer")
        }
        var result: [String: HostAnswer] = [:]
        for host in hosts {
            let wanted = normalizeHostname(host)
            let answer = decoded.answers?.first { normalizeHostname($0.dn) == wanted }
            result[wanted] = HostAnswer(
                ipv4: query.wantsIPv4 ? try family(answer?.v4, ipv6: false) : nil,
                ipv6: query.wantsIPv6 ? try family(answer?.v6, ipv6: true) : nil
            ).seenFrom(client)
        }
        return result
    }

    /// Parses a plain-mode answer to a query for `host`.
    static func parse(_ body: [UInt8], query: AddressQuery, host: String) throws -> HostAnswer {
        let envelope = try envelope(body)
        guard let plain = envelope.plain else {
            throw AnswerFormatError("v2 answer is encrypted (mode \(envelope.mode)) and no AES key was given")
        }
        return try answers(data: plain, query: query, hosts: [host])[normalizeHostname(host)]!
    }

    /// The `data` object for each name (the server's side), as JSON: sent as is in plain mode, encrypted
    /// in the others.
    package static func data(_ answers: [(String, HostAnswer)], clientAddress: IPAddress?) -> [UInt8] {
        func family(_ f: FamilyAnswer?) -> Family? {
            // A family asked for with no address says so, as the service does (`RRNotExist`).
            f.map {
                Family(
                    ips: $0.addresses.map(\.description),
                    ttl: $0.ttl ?? 0,
                    no_ip_code: $0.addresses.isEmpty ? "RRNotExist" : nil
                )
            }
        }
        let data = Data(
            cip: clientAddress?.description,
            answers: answers.map { Answer(dn: $0.0, v4: family($0.1.ipv4), v6: family($0.1.ipv6)) }
        )
        return Array((try? JSONEncoder().encode(data)) ?? Foundation.Data("{}".utf8))
    }

    /// The whole answer: `data` as an object (`mode` 0) or the encrypted string (`mode` 1 or 2).
    package static func format(mode: Int, data: [UInt8]?, encrypted: String? = nil) -> [UInt8] {
        let payload: Payload? =
            encrypted.map { .encrypted($0) }
            ?? data.flatMap { try? JSONDecoder().decode(Data.self, from: Foundation.Data($0)) }.map { .plain($0) }
        let body = Body(code: "success", mode: Mode(mode), data: payload)
        return Array((try? JSONEncoder().encode(body)) ?? Foundation.Data("{}".utf8))
    }

    /// A plain-mode answer for each name (the server's side).
    static func format(_ answers: [(String, HostAnswer)], clientAddress: IPAddress?) -> [UInt8] {
        format(mode: 0, data: data(answers, clientAddress: clientAddress))
    }
}

/// JSON DNS-over-HTTPS (`application/dns-json`, `?name=&type=`), the Google / Cloudflare answer shape:
/// `{"Status":0,"TC":false,"Question":[...],"Answer":[{"name":"a.com.","type":1,"TTL":60,"data":"1.2.3.4"}]}`.
package enum DoHJSONFormat {
    struct Record: Codable {
        var name: String
        var type: UInt16
        var TTL: UInt32?
        var data: String
    }

    struct Question: Codable {
        var name: String
        var type: UInt16
    }

    struct Body: Codable {
        var Status: Int
        var TC: Bool?
        var RD: Bool?
        var RA: Bool?
        var Question: [Question]?
        var Answer: [Record]?
    }

    /// Parses an answer to a query for `name` of `type` (A or AAAA), following CNAMEs (`CNAMEChain`); the
    /// TTL is the smallest of the records used, aliases included.
    /// Status 3 (NXDOMAIN) and an empty answer are negative answers; other non-zero statuses are errors.
    static func parse(_ body: [UInt8], name: String, type: DNSRecordType) throws -> FamilyAnswer {
        guard let records = try answerRecords(body) else { return .empty }
        let chain = CNAMEChain(
            from: name,
            aliases: records.filter { $0.type == DNSRecordType.cname.rawValue }.map { ($0.name, $0.data, $0.TTL) }
        )
        var out = AddressCollector()
        var ttl = chain.ttl
        for r in records where r.type == type.rawValue && chain.answers(r.name) {
            if out.isFull { break }
            guard let ip = IPAddress(r.data), ip.isIPv6 == (type == .aaaa) else {
                throw AnswerFormatError("DoH JSON \(type) record holds \"\(r.data.prefix(60))\"")
            }
            out.add(ip)
            if let t = r.TTL { ttl = min(ttl ?? t, t) }
        }
        return FamilyAnswer(addresses: out.addresses, ttl: out.addresses.isEmpty ? nil : ttl)
    }

    /// Parses an answer to a query for `name`'s HTTPS records (type 65), in the presentation form or
    /// RFC 3597's generic one, following CNAMEs. A record that does not read is left out.
    static func parseServiceBindings(_ body: [UInt8], name: String) throws -> ServiceBindingAnswer {
        guard let records = try answerRecords(body) else { return ServiceBindingAnswer(bindings: [], ttl: nil) }
        let chain = CNAMEChain(
            from: name,
            aliases: records.filter { $0.type == DNSRecordType.cname.rawValue }.map { ($0.name, $0.data, $0.TTL) }
        )
        return ServiceBindingAnswer(
            collecting: records.lazy.filter { $0.type == DNSRecordType.https.rawValue && chain.answers($0.name) }
                .map { (try? ServiceBinding(parsing: $0.data), $0.TTL) },
            chainTTL: chain.ttl
        )
    }

    /// The answer section of a JSON DoH body; nil for NXDOMAIN. Throws for another error status.
    private static func answerRecords(_ body: [UInt8]) throws -> [Record]? {
        let decoded: Body
        do {
            decoded = try JSONDecoder().decode(Body.self, from: Data(body))
        } catch {
            throw AnswerFormatError("DoH JSON answer is not the expected {\"Status\",\"Answer\"} object")
        }
        guard (0...4095).contains(decoded.Status) else {
            throw AnswerFormatError("DoH JSON Status \(decoded.Status) is not a DNS response code")
        }
        if decoded.Status == Int(DNSResponseCode.nameError.rawValue) { return nil }
        guard decoded.Status == 0 else {
            let code =
                decoded.Status < 16 ? "\(DNSResponseCode(rawValue: UInt8(decoded.Status)))" : "RCODE\(decoded.Status)"
            throw AnswerFormatError("DoH JSON server answered \(code)")
        }
        return decoded.Answer ?? []
    }

    package static func format(name: String, type: DNSRecordType, rcode: DNSResponseCode, answer: FamilyAnswer)
        -> [UInt8]
    {
        let fqdn = name.hasSuffix(".") ? name : name + "."
        let body = Body(
            Status: Int(rcode.rawValue),
            TC: false,
            RD: true,
            RA: true,
            Question: [Question(name: fqdn, type: type.rawValue)],
            Answer: answer.addresses.isEmpty
                ? nil
                : answer.addresses.map {
                    Record(name: fqdn, type: type.rawValue, TTL: answer.ttl ?? 0, data: $0.description)
                }
        )
        return Array((try? JSONEncoder().encode(body)) ?? Data("{}".utf8))
    }

    /// An answer to a `type=HTTPS` query for `name`: each record in its presentation form
    /// (`1 . alpn="h2" port=8443`), as Google's and Cloudflare's JSON DoH give them.
    package static func format(name: String, rcode: DNSResponseCode, records: ServiceBindingAnswer) -> [UInt8] {
        let fqdn = name.hasSuffix(".") ? name : name + "."
        let type = DNSRecordType.https.rawValue
        let body = Body(
            Status: Int(rcode.rawValue),
            TC: false,
            RD: true,
            RA: true,
            Question: [Question(name: fqdn, type: type)],
            Answer: records.bindings.isEmpty
                ? nil
                : records.bindings.map { Record(name: fqdn, type: type, TTL: records.ttl ?? 0, data: $0.description) }
        )
        return Array((try? JSONEncoder().encode(body)) ?? Data("{}".utf8))
    }
}
