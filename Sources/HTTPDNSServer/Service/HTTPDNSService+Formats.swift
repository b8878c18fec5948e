// The answer formats: DNSPod text, Alibaba JSON, RFC 8484 wire and JSON DoH, and the query-string
// decoding they share. Each takes its names' answers through `lookup` (see `ServiceCore.decide`).

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

extension ServiceCore {
    /// The DNSPod answer for the names in `dn` (plain text; the caller encrypts it for the AES and DES
    /// forms). `clientAddress` is appended to every line when the query says `clientip=1`, as the
    /// vendor's SDKs expect.
    func dnspodText(
        _ query: [String: String],
        names dn: String?,
        clientAddress: IPAddress?,
        _ lookup: (String) throws -> Lookup
    ) throws -> String {
        guard let dn, !dn.isEmpty else { throw BadRequest(reason: "missing dn=NAME[,NAME...]") }
        let names = try dn.split(separator: ",", omittingEmptySubsequences: false).map {
            try name(String($0), parameter: "dn")
        }
        guard names.count <= configuration.maxBatch else {
            throw BadRequest(reason: "\(names.count) names in one request; at most \(configuration.maxBatch)")
        }
        let family: AddressQuery
        switch query["type"] {
        case nil, "", "a": family = .ipv4
        case "aaaa": family = .ipv6
        case "addrs": family = .both
        case let other?: throw BadRequest(reason: "type=\(other) is not supported; use aaaa or addrs")
        }
        let withTTL = query["ttl"] == "1"
        let client = query["clientip"] == "1" ? clientAddress : nil
        var lines: [String] = []
        for n in names {
            let text: String
            switch try lookup(n) {
            case .found(let v4, let v6):
                text = DNSPodFormat.format(
                    HostAnswer(ipv4: v4, ipv6: v6),
                    query: family,
                    withTTL: withTTL,
                    clientAddress: client
                )
            case .nxdomain, .failure, .records:  // (an address question is never answered with records)
                text = (family == .both ? "0-0" : "0") + (client.map { "|\($0)" } ?? "")
            }
            lines.append(names.count > 1 || query["query"] == "1" ? "\(n).:\(text)" : text)
        }
        return lines.joined(separator: "\n")
    }

    func dnspod(
        _ query: [String: String],
        names: String?,
        clientAddress: IPAddress?,
        _ lookup: (String) throws -> Lookup
    ) throws -> ListenerResponse {
        let text = try dnspodText(query, names: names, clientAddress: clientAddress, lookup)
        return ListenerResponse(body: Array(text.utf8))
    }

    func alibaba(
        _ query: [String: String],
        _ lookup: (String) throws -> Lookup,
        clientAddress: IPAddress? = nil
    ) throws -> ListenerResponse {
        let host = try name(query["host"], parameter: "host")
        let wants = try addressTypes(query["query"], parameter: "query")
        switch try lookup(host) {
        case .found(let v4, let v6):
            let answer = HostAnswer(ipv4: wants.wantsIPv4 ? v4 : nil, ipv6: wants.wantsIPv6 ? v6 : nil)
            return ListenerResponse(
                contentType: "application/json",
                body: AlibabaJSONFormat.format(host: host, answer: answer, clientAddress: clientAddress)
            )
        case .nxdomain:
            return ListenerResponse(
                contentType: "application/json",
                body: AlibabaJSONFormat.format(
                    host: host,
                    answer: HostAnswer(ipv4: .empty, ipv6: .empty),
                    clientAddress: clientAddress
                )
            )
        case .failure, .records:  // (an address question is never answered with records)
            return ListenerResponse(status: .badGateway, text: "the upstream DNS server did not answer")
        }
    }

    /// Alibaba's families parameter (`query=` or v2's `q=`): `4` (the default), `6` or `4,6`.
    func addressTypes(_ value: String?, parameter: String) throws -> AddressQuery {
        guard let query = AlibabaJSONFormat.addressQuery(parameter: value) else {
            throw BadRequest(reason: "\(parameter)=\(value ?? "") is not supported; use 4, 6 or 4,6")
        }
        return query
    }

    /// `subnet`: the configured one; a query's own ECS option replaces it.
    func doh(
        _ request: ListenerRequest,
        _ query: [String: String],
        subnet: ClientSubnet?,
        _ lookup: (String, ClientSubnet?) throws -> Lookup,
        records: (String) throws -> Lookup
    ) throws -> ListenerResponse {
        let wantsJSON =
            query["name"] != nil || request.headers["accept"].contains { $0.contains("application/dns-json") }
        if wantsJSON && request.method == .GET {
            return try dohJSON(query, { try lookup($0, subnet) }, records: records)
        }
        let wire: [UInt8]
        /// Where a GET's answer is kept, and the second it is kept for.
        var memo: (key: DoHAnswerTable.Key, second: Int)?
        switch request.method {
        case .GET, .HEAD:
            guard let dns = query["dns"], !dns.isEmpty else {
                throw BadRequest(reason: "missing dns=BASE64URL (or name= for JSON)")
            }
            // The subnet tells answers apart only where the upstream is asked per subnet.
            let key = DoHAnswerTable.Key(dns: dns, subnet: subnetUpstream == nil ? nil : subnet)
            let second = configuration.unixTime()
            if let made = hosts.withLockedValue({ $0.dohAnswers.answer(key, at: second) }) { return made }
            memo = (key, second)
            guard let bytes = decodeBase64URL(dns) else { throw BadRequest(reason: "dns= is not base64url") }
            wire = bytes
        case .POST:
            guard request.headers["content-type"].first?.lowercased().hasPrefix("application/dns-message") == true
            else {
                throw BadRequest(reason: "POST /dns-query needs content-type: application/dns-message")
            }
            wire = Array(request.body.readableBytesView)
        default:
            throw MethodNotAllowed(method: request.method, allowed: "GET, POST")
        }
        let message: DNSMessage
        do {
            message = try DNSMessage(parsing: wire)
        } catch {
            // An opcode we do not implement is NOTIMP even when the rest does not parse; any other
            // malformed message is a bad request.
            if let notImplemented = DNSMessage.notImplementedAnswer(toUnreadable: wire) {
                return ListenerResponse(contentType: "application/dns-message", body: notImplemented)
            }
            throw BadRequest(reason: "\(error)")
        }
        guard !message.isResponse else { throw BadRequest(reason: "the message is not a query with one question") }
        // The opcode and EDNS come before the question (an UPDATE's "question" is its zone). DoH is the
        // encrypted transport padding is for (RFC 8467), a plain-HTTP listener included: it is meant to
        // sit behind a proxy that terminates TLS.
        let rule = AnswerRule(for: message, encrypted: true)
        if let refusal = rule.refusal {
            return ListenerResponse(
                contentType: "application/dns-message",
                body: try DNSMessage.response(to: message, rcode: refusal, opt: rule.opt)
            )
        }
        guard !message.questionName.isEmpty, message.questionName != "." else {
            throw BadRequest(reason: "the message is not a query with one question")
        }
        let qname = normalizeHostname(message.questionName)
        var rcode = DNSResponseCode.noError
        var addresses: [IPAddress] = []
        var bindings: [ServiceBinding] = []
        var ttl: UInt32 = configuration.ttl
        let asksRecords = message.questionType == .https
        switch asksRecords ? try records(qname) : try lookup(qname, message.clientSubnet ?? subnet) {
        case .found(let v4, let v6):
            let family = message.questionType == .aaaa ? v6 : message.questionType == .a ? v4 : .empty
            addresses = family.addresses
            ttl = family.ttl ?? configuration.ttl
        case .records(let answer):
            bindings = answer.bindings
            ttl = answer.ttl ?? configuration.ttl
        case .nxdomain:
            rcode = .nameError
        case .failure:
            rcode = .serverFailure
        }
        let empty = addresses.isEmpty && bindings.isEmpty
        let body = try DNSMessage.response(
            to: message,
            rcode: rcode,
            addresses: addresses,
            ttl: ttl,
            negativeTTL: empty && rcode != .serverFailure ? min(ttl, 30) : nil,
            serviceBindings: bindings,
            opt: rule.opt
        )
        let response = ListenerResponse(
            contentType: "application/dns-message",
            body: body,
            headers: ["cache-control": "max-age=\(empty ? min(ttl, 30) : ttl)"]
        )
        // Kept for the rest of the second: not a failure (nor the stand-in for a name still being asked
        // for), and not a question the upstream is asked for each subnet.
        if let memo, rcode != .serverFailure, (message.clientSubnet ?? subnet) == nil || subnetUpstream == nil {
            hosts.withLockedValue { $0.dohAnswers.remember(response, for: memo.key, at: memo.second) }
        }
        return response
    }

    func dohJSON(
        _ query: [String: String],
        _ lookup: (String) throws -> Lookup,
        records: (String) throws -> Lookup
    ) throws -> ListenerResponse {
        let qname = try name(query["name"], parameter: "name")
        let type: DNSRecordType
        switch query["type"]?.uppercased() {
        case nil, "", "A", "1": type = .a
        case "AAAA", "28": type = .aaaa
        case "HTTPS", "65": type = .https
        case let other?: throw BadRequest(reason: "type=\(other) is not supported; use A, AAAA or HTTPS")
        }
        let body: [UInt8]
        switch type == .https ? try records(qname) : try lookup(qname) {
        case .found(let v4, let v6):
            body = DoHJSONFormat.format(name: qname, type: type, rcode: .noError, answer: type == .a ? v4 : v6)
        case .records(let answer):
            body = DoHJSONFormat.format(name: qname, rcode: .noError, records: answer)
        case .nxdomain:
            body = DoHJSONFormat.format(name: qname, type: type, rcode: .nameError, answer: .empty)
        case .failure:
            body = DoHJSONFormat.format(name: qname, type: type, rcode: .serverFailure, answer: .empty)
        }
        return ListenerResponse(contentType: "application/dns-json", body: body)
    }
}

/// A query-string component with its `%XX` escapes decoded (and `+` as a space when `plusIsSpace`):
/// nil when an escape is malformed or the bytes are not UTF-8. Works on the bytes: no Foundation string
/// search on the DoH server's path.
func formDecoded(_ text: Substring, plusIsSpace: Bool) -> String? {
    let utf8 = text.utf8
    guard utf8.contains(UInt8(ascii: "%")) || (plusIsSpace && utf8.contains(UInt8(ascii: "+"))) else {
        return String(text)
    }
    func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var i = utf8.startIndex
    while i != utf8.endIndex {
        let c = utf8[i]
        i = utf8.index(after: i)
        if c == UInt8(ascii: "%") {
            guard i != utf8.endIndex, let high = hex(utf8[i]) else { return nil }
            i = utf8.index(after: i)
            guard i != utf8.endIndex, let low = hex(utf8[i]) else { return nil }
            i = utf8.index(after: i)
            bytes.append(high << 4 | low)
        } else {
            bytes.append(plusIsSpace && c == UInt8(ascii: "+") ? UInt8(ascii: " ") : c)
        }
    }
    return String(strictUTF8: bytes)
}

/// The bytes of base64url text (RFC 4648 section 5, padding optional), at most 4096 characters.
func decodeBase64URL(_ text: String) -> [UInt8]? {
    guard text.utf8.count <= 4096 else { return nil }
    var standard: [UInt8] = []
    standard.reserveCapacity(text.utf8.count + 3)
    for c in text.utf8 {
        switch c {
        case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
        case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            standard.append(c)
        default: return nil
        }
    }
    while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
    return Data(base64Encoded: Data(standard)).map { Array($0) }
}

/// The DoH wire answers `httpdns serve` made within the current second, by the query's base64url text
/// (its ID included, so an answer is reused byte for byte) and the subnet asked for: a busy name is
/// parsed, looked up and encoded once a second, not once a query. Everything it is made
/// from holds for that second: the hosts table (a new table starts a new memo) and the resolver's
/// cache, whose TTL may read one second lower by the end of it. Failures are never kept. At most
/// `capacity` answers; the table empties when the second changes.
struct DoHAnswerTable {
    struct Key: Hashable {
        var dns: String
        var subnet: ClientSubnet?
    }

    static let capacity = 4096
    private var second = Int.min
    private var answers: [Key: ListenerResponse] = [:]

    var count: Int { answers.count }

    func answer(_ key: Key, at second: Int) -> ListenerResponse? {
        guard second == self.second else { return nil }
        return answers[key]
    }

    mutating func remember(_ response: ListenerResponse, for key: Key, at second: Int) {
        if second != self.second {
            answers.removeAll(keepingCapacity: true)
            self.second = second
        }
        guard answers.count < Self.capacity else { return }
        answers[key] = response
    }
}
