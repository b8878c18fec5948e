// dns-wire: DNSMessage(parsing:) on hostile bytes, then the writers on what was parsed.
//
// Whatever parses: `addresses(for:)` gives addresses of the asked family, each once, with a TTL exactly
// when there is one; names are printable ASCII (presentation format: odd bytes escaped); the question
// re-encodes through `query(name:type:)` and `response(to:…)` and parses back to exactly the same
// question, and a response carries back exactly the addresses and negative TTL put in.

func fuzzDNSWire(_ data: [UInt8]) {
    guard let message = try? DNSMessage(parsing: data) else { return }
    check(message.answers.allSatisfy { $0.ttl <= UInt32(Int32.max) }, "a TTL above 2^31-1 was kept")
    check(message.negativeTTL.map { $0 <= UInt32(Int32.max) } ?? true, "negative TTL above 2^31-1")
    checkPresentation(message.questionName)
    for record in message.answers {
        checkPresentation(record.name)
        if record.type == .cname {
            check(record.target != nil, "CNAME without a decoded target")
            checkPresentation(record.target ?? "")
        }
    }
    var found: [DNSRecordType: [IPAddress]] = [:]
    for type in [DNSRecordType.a, .aaaa] {
        let (addresses, ttl) = message.addresses(for: type)
        checkFamily(FamilyAnswer(addresses: addresses, ttl: ttl), ipv6: type == .aaaa, "addresses(for: \(type))")
        check(
            (ttl == nil) == addresses.isEmpty,
            "addresses(for: \(type)): TTL \(String(describing: ttl)) with \(addresses.count) addresses"
        )
        found[type] = addresses
    }

    // The question, written again. Only a question was read when qdcount was 1.
    guard message.questionType.rawValue != 0 || message.questionName != "" else { return }
    do {
        let query = try DNSMessage.query(name: message.questionName, type: message.questionType, id: message.id)
        let back = try DNSMessage(parsing: query)
        checkSameQuestion(back, message, context: "query")
        check(back.recursionDesired && !back.isResponse && back.answers.isEmpty, "query flags or answers wrong")
    } catch {
        fatalError("invariant broken: query(name: \"\(message.questionName)\") failed: \(error)")
    }
    let v4 = found[.a] ?? []
    let v6 = found[.aaaa] ?? []
    for truncated in [false, true] {
        do {
            let bytes = try DNSMessage.response(
                to: message,
                rcode: message.rcode,
                addresses: v4 + v6,
                ttl: 300,
                truncated: truncated,
                negativeTTL: message.negativeTTL
            )
            let back = try DNSMessage(parsing: bytes)
            checkSameQuestion(back, message, context: "response")
            check(back.isResponse && back.rcode == message.rcode && back.truncated == truncated, "response flags")
            check(back.recursionDesired == message.recursionDesired, "response RD")
            if truncated {
                check(back.answers.isEmpty && back.negativeTTL == nil, "a truncated response carries records")
            } else {
                let a = back.addresses(for: .a)
                let aaaa = back.addresses(for: .aaaa)
                check(a.addresses == v4 && aaaa.addresses == v6, "response addresses \(a) \(aaaa) != \(v4) \(v6)")
                check(v4.isEmpty || a.ttl == 300, "response TTL")
                check(back.negativeTTL == message.negativeTTL, "negative TTL \(String(describing: back.negativeTTL))")
            }
        } catch {
            fatalError("invariant broken: response(to: \"\(message.questionName)\") failed: \(error)")
        }
    }
}

/// Same id, type and name, byte for byte.
private func checkSameQuestion(_ back: DNSMessage, _ original: DNSMessage, context: String) {
    check(back.id == original.id, "\(context): id \(back.id) != \(original.id)")
    check(back.questionType == original.questionType, "\(context): type \(back.questionType)")
    check(
        back.questionName == original.questionName,
        "\(context): name \"\(back.questionName)\" != \"\(original.questionName)\""
    )
}

/// A name read from the wire: printable ASCII only, so it can be logged, compared and written back.
private func checkPresentation(_ name: String) {
    check(name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "name \(name.debugDescription) is not printable ASCII")
}
