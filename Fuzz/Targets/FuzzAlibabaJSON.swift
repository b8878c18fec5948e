// alibaba-json: AlibabaJSONFormat.parse on hostile bodies, the query chosen by the first byte.
//
// Whatever parses: the families asked, addresses of the right family, each once, a TTL only with
// addresses; and the answer, formatted the way the server does, parses back to itself.

func fuzzAlibabaJSON(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let query = AddressQuery.allCases[Int(selector) % 3]
    guard let answer = try? AlibabaJSONFormat.parse(Array(data.dropFirst()), query: query) else { return }
    check((answer.ipv4 != nil) == query.wantsIPv4, "IPv4 part present: \(answer.ipv4 != nil) for \(query)")
    check((answer.ipv6 != nil) == query.wantsIPv6, "IPv6 part present: \(answer.ipv6 != nil) for \(query)")
    for (f, v6) in [(answer.ipv4, false), (answer.ipv6, true)] {
        guard let f else { continue }
        checkFamily(f, ipv6: v6, "JSON API answer")
        check(f.addresses.isEmpty ? f.ttl == nil : true, "TTL on an empty family")
    }
    let body = AlibabaJSONFormat.format(host: "a.com", answer: answer)
    let back: HostAnswer
    do {
        back = try AlibabaJSONFormat.parse(body, query: query)
    } catch {
        fatalError("invariant broken: formatted JSON API answer \(text(body)) does not parse: \(error)")
    }
    // format writes one TTL (0 when there was none) that parse gives to every non-empty family.
    let ttl = answer.ipv4?.ttl ?? answer.ipv6?.ttl ?? 0
    for (b, a) in [(back.ipv4, answer.ipv4), (back.ipv6, answer.ipv6)] {
        check((b == nil) == (a == nil), "family presence changed through \(text(body))")
        guard let a, let b else { continue }
        check(b.addresses == a.addresses, "addresses changed through \(text(body))")
        check(b.ttl == (a.addresses.isEmpty ? nil : ttl), "TTL changed through \(text(body))")
    }
}
