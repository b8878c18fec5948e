// dnspod: DNSPodFormat.parse on hostile bodies, with the names and query chosen by the first byte.
//
// Whatever parses: only names asked come back, each answer holds the families the query asks for with
// addresses of the right family, each once; and every answer, formatted the way a DNSPod server does
// (single-name and batch, with and without TTLs), parses back to itself; CRLF line ends read the same.

private let nameSets: [[String]] = [
    ["a.com"], ["a.com", "b.com"], ["www.example.com.", "B.example.com", "c.example.com"], ["_dns.x-y.test"],
]

func fuzzDNSPod(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let query = AddressQuery.allCases[Int(selector & 3) % 3]
    let names = nameSets[Int(selector >> 2) & 3]
    let parsed = try? DNSPodFormat.parse(text(data.dropFirst()), names: names, query: query)
    let crlf = try? DNSPodFormat.parse(text(withCRLF(data.dropFirst())), names: names, query: query)
    check(parsed == crlf || data.count > 200 * 1024, "the body reads otherwise with CRLF line ends")
    guard let result = parsed else { return }
    let wanted = Set(names.map(normalizeHostname))
    for (name, answer) in result {
        check(wanted.contains(name), "answer for \"\(name)\", which was not asked")
        check((answer.ipv4 != nil) == query.wantsIPv4, "IPv4 part present: \(answer.ipv4 != nil) for \(query)")
        check((answer.ipv6 != nil) == query.wantsIPv6, "IPv6 part present: \(answer.ipv6 != nil) for \(query)")
        if let f = answer.ipv4 { checkFamily(f, ipv6: false, "DNSPod IPv4 part") }
        if let f = answer.ipv6 { checkFamily(f, ipv6: true, "DNSPod IPv6 part") }
        for withTTL in [true, false] {
            let body = DNSPodFormat.format(answer, query: query, withTTL: withTTL)
            let single: [String: HostAnswer]
            do {
                single = try DNSPodFormat.parse(body, names: [name], query: query)
            } catch {
                fatalError("invariant broken: formatted DNSPod answer \"\(body)\" does not parse: \(error)")
            }
            checkRoundTrip(single[name], answer, withTTL: withTTL, body: body)
        }
    }
    // The whole result as one batch body.
    let batch = result.map { "\($0.key).:\(DNSPodFormat.format($0.value, query: query, withTTL: true))" }
    if !result.isEmpty {
        let body = batch.joined(separator: "\n")
        do {
            let back = try DNSPodFormat.parse(body, names: Array(result.keys) + ["unasked.example"], query: query)
            check(back.count == result.count, "batch round trip lost names: \(body)")
            for (name, answer) in result { checkRoundTrip(back[name], answer, withTTL: true, body: body) }
        } catch {
            fatalError("invariant broken: formatted DNSPod batch \"\(body)\" does not parse: \(error)")
        }
    }
}

/// Addresses come back exactly; a TTL comes back with its addresses when written (0 when there was none).
private func checkRoundTrip(_ back: HostAnswer?, _ answer: HostAnswer, withTTL: Bool, body: String) {
    check(back != nil, "formatted answer \"\(body)\" gave no answer")
    for (b, a) in [(back?.ipv4, answer.ipv4), (back?.ipv6, answer.ipv6)] {
        check((b == nil) == (a == nil), "family presence changed through \"\(body)\"")
        guard let a, let b else { continue }
        check(b.addresses == a.addresses, "addresses changed through \"\(body)\": \(b.addresses) != \(a.addresses)")
        let ttl: UInt32? = withTTL && !a.addresses.isEmpty ? (a.ttl ?? 0) : nil
        check(b.ttl == ttl, "TTL changed through \"\(body)\": \(String(describing: b.ttl))")
    }
}
