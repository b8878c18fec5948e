// alibaba-v2: AlibabaV2Format.envelope and .answers, and AlibabaJSONFormat.parseBatch (`sign_resolve`),
// on hostile bodies (the batch answers and the encrypted modes' `data` string), the query
// chosen by the first byte.
//
// Whatever parses: a plain envelope's data gives an answer for every name asked (two, one of them
// perhaps absent from the body), with the families asked and addresses of the right family; an
// encrypted envelope is mode 1 or 2 with its text; and answers formatted the way the server does parse
// back to themselves.

func fuzzAlibabaV2(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let query = AddressQuery.allCases[Int(selector) % 3]
    let body = Array(data.dropFirst())
    let hosts = ["a.com", "b.example"]
    if let envelope = try? AlibabaV2Format.envelope(body) {
        check(
            (envelope.plain == nil) != (envelope.encrypted == nil),
            "an envelope has plain data or encrypted text, one of the two"
        )
        if envelope.encrypted != nil { check([1, 2].contains(envelope.mode), "encrypted in mode \(envelope.mode)") }
        if let plain = envelope.plain { checkAnswers(plain, query: query, hosts: hosts) }
    }
    // The body as the `data` object itself (what an encrypted answer decrypts to).
    checkAnswers(body, query: query, hosts: hosts)
    // The body as a sign_resolve batch answer.
    if let batch = try? AlibabaJSONFormat.parseBatch(body, query: query, hosts: hosts) {
        check(batch.count == hosts.count, "\(batch.count) batch answers for \(hosts.count) names")
        for host in hosts {
            guard let answer = batch[host] else { fatalError("invariant broken: no batch answer for \(host)") }
            check((answer.ipv4 != nil) == query.wantsIPv4, "batch IPv4 part present: \(answer.ipv4 != nil)")
            check((answer.ipv6 != nil) == query.wantsIPv6, "batch IPv6 part present: \(answer.ipv6 != nil)")
            if let f = answer.ipv4 { checkFamily(f, ipv6: false, "batch answer") }
            if let f = answer.ipv6 { checkFamily(f, ipv6: true, "batch answer") }
        }
        let formatted = AlibabaJSONFormat.formatBatch(hosts.map { ($0, batch[$0]!) }, clientAddress: nil)
        guard let back = try? AlibabaJSONFormat.parseBatch(formatted, query: query, hosts: hosts) else {
            fatalError("invariant broken: formatted batch \(text(formatted)) does not parse")
        }
        for host in hosts {
            check(back[host]?.ipv4?.addresses == batch[host]?.ipv4?.addresses, "batch IPv4 changed")
            check(back[host]?.ipv6?.addresses == batch[host]?.ipv6?.addresses, "batch IPv6 changed")
        }
    }
}

private func checkAnswers(_ data: [UInt8], query: AddressQuery, hosts: [String]) {
    guard let answers = try? AlibabaV2Format.answers(data: data, query: query, hosts: hosts) else { return }
    check(answers.count == hosts.count, "\(answers.count) answers for \(hosts.count) names")
    for host in hosts {
        guard let answer = answers[host] else { fatalError("invariant broken: no answer for \(host)") }
        check((answer.ipv4 != nil) == query.wantsIPv4, "IPv4 part present: \(answer.ipv4 != nil) for \(query)")
        check((answer.ipv6 != nil) == query.wantsIPv6, "IPv6 part present: \(answer.ipv6 != nil) for \(query)")
        for (f, v6) in [(answer.ipv4, false), (answer.ipv6, true)] {
            guard let f else { continue }
            checkFamily(f, ipv6: v6, "v2 answer")
        }
    }
    let formatted = AlibabaV2Format.data(
        hosts.map { ($0, answers[$0]!) },
        clientAddress: answers[hosts[0]]?.ipv4?.clientAddress ?? answers[hosts[0]]?.ipv6?.clientAddress
    )
    let back: [String: HostAnswer]
    do {
        back = try AlibabaV2Format.answers(data: formatted, query: query, hosts: hosts)
    } catch {
        fatalError("invariant broken: formatted v2 data \(text(formatted)) does not parse: \(error)")
    }
    for host in hosts {
        check(back[host]?.ipv4?.addresses == answers[host]?.ipv4?.addresses, "IPv4 changed through \(text(formatted))")
        check(back[host]?.ipv6?.addresses == answers[host]?.ipv6?.addresses, "IPv6 changed through \(text(formatted))")
    }
}
