import Foundation

/// The Alibaba-style JSON API: `GET /resolve?host=NAME[&query=4,6]` answered with
/// `{"host":"a.com","ips":["1.2.3.4"],"ipsv6":["2001:db8::1"],"ttl":60,"origin_ttl":600}`.
package enum AlibabaJSONFormat {
    struct Body: Codable {
        var host: String?
        var ips: [String]?
        var ipsv6: [String]?
        var ttl: UInt32?
        var origin_ttl: UInt32?
    }

    /// The `query` parameter: `4`, `6` or `4,6`.
    package static func queryParameter(for query: AddressQuery) -> String {
        switch query {
        case .ipv4: return "4"
        case .ipv6: return "6"
        case .both: return "4,6"
        }
    }

    /// Parses an answer to a query for `host` (when given: an answer whose `host` field names another
    /// name is refused, so a confused or hostile service cannot hand one name's addresses to another).
    package static func parse(_ body: [UInt8], query: AddressQuery, host: String? = nil) throws -> HostAnswer {
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
            var out = AddressCollector()
            for t in texts ?? [] {
                if out.isFull { break }
                guard let ip = IPAddress(t), ip.isIPv6 == ipv6 else {
                    throw AnswerFormatError(
                        "JSON API answer lists \"\(t.prefix(60))\" as an \(ipv6 ? "IPv6" : "IPv4") address"
                    )
                }
                out.add(ip)
            }
            return FamilyAnswer(addresses: out.addresses, ttl: out.addresses.isEmpty ? nil : decoded.ttl)
        }
        return HostAnswer(
            ipv4: query.wantsIPv4 ? try family(decoded.ips, ipv6: false) : nil,
            ipv6: query.wantsIPv6 ? try family(decoded.ipsv6, ipv6: true) : nil
        )
    }

    package static func format(host: String, answer: HostAnswer) -> [UInt8] {
        let ttl = answer.ipv4?.ttl ?? answer.ipv6?.ttl ?? 0
        let body = Body(
            host: host,
            ips: answer.ipv4?.addresses.map(\.description) ?? [],
            ipsv6: answer.ipv6?.addresses.map(\.description) ?? [],
            ttl: ttl,
            origin_ttl: ttl
        )
        return Array((try? JSONEncoder().encode(body)) ?? Data("{}".utf8))
    }
}

/// JSON DNS-over-HTTPS (`application/dns-json`, `?name=&type=`), the Google / Cloudflare answer shape:
/// `{"Status":0,"TC":false,"Question":[...],"Answer":[{"name":"a.com.","type":1,"TTL":60,"data":"1.2.3.4"}]}`.
package enum DoHJSONFormat {
    package struct Record: Codable {
        package var name: String
        package var type: UInt16
        package var TTL: UInt32?
        package var data: String
    }

    package struct Question: Codable {
        package var name: String
        package var type: UInt16
    }

    package struct Body: Codable {
        package var Status: Int
        package var TC: Bool?
        package var RD: Bool?
        package var RA: Bool?
        package var Question: [Question]?
        package var Answer: [Record]?
    }

    /// Parses an answer to a query for `name` of `type` (A or AAAA), following CNAMEs (`CNAMEChain`); the
    /// TTL is the smallest of the records used, aliases included.
    /// Status 3 (NXDOMAIN) and an empty answer are negative answers; other non-zero statuses are errors.
    package static func parse(_ body: [UInt8], name: String, type: DNSRecordType) throws -> FamilyAnswer {
        let decoded: Body
        do {
            decoded = try JSONDecoder().decode(Body.self, from: Data(body))
        } catch {
            throw AnswerFormatError("DoH JSON answer is not the expected {\"Status\",\"Answer\"} object")
        }
        guard (0...4095).contains(decoded.Status) else {
            throw AnswerFormatError("DoH JSON Status \(decoded.Status) is not a DNS response code")
        }
        if decoded.Status == Int(DNSResponseCode.nameError.rawValue) { return .empty }
        guard decoded.Status == 0 else {
            let code =
                decoded.Status < 16 ? "\(DNSResponseCode(rawValue: UInt8(decoded.Status)))" : "RCODE\(decoded.Status)"
            throw AnswerFormatError("DoH JSON server answered \(code)")
        }
        let records = decoded.Answer ?? []
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
}
