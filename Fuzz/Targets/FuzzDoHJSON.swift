// doh-json: DoHJSONFormat.parse on hostile bodies; the first byte picks A or AAAA and the name asked.
//
// Whatever parses: addresses of the asked family, each once, a TTL only with addresses; and the answer,
// formatted the way the server does, parses back to itself (NXDOMAIN formats to an empty answer).

private let names = ["a.com", "www.example.com.", "CNAME.Example.com", "x"]

func fuzzDoHJSON(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let type: DNSRecordType = selector & 1 == 0 ? .a : .aaaa
    let name = names[Int(selector >> 1) & 3]
    guard let answer = try? DoHJSONFormat.parse(Array(data.dropFirst()), name: name, type: type) else { return }
    checkFamily(answer, ipv6: type == .aaaa, "DoH JSON \(type) answer")
    check(answer.addresses.isEmpty ? answer.ttl == nil : true, "TTL on an empty answer")
    let body = DoHJSONFormat.format(name: name, type: type, rcode: .noError, answer: answer)
    do {
        let back = try DoHJSONFormat.parse(body, name: name, type: type)
        check(back.addresses == answer.addresses, "addresses changed through \(text(body))")
        check(back.ttl == (answer.addresses.isEmpty ? nil : answer.ttl ?? 0), "TTL changed through \(text(body))")
        let nx = DoHJSONFormat.format(name: name, type: type, rcode: .nameError, answer: .empty)
        let nxAnswer = try DoHJSONFormat.parse(nx, name: name, type: type)
        check(nxAnswer == .empty, "NXDOMAIN is not an empty answer")
    } catch {
        fatalError("invariant broken: formatted DoH JSON answer \(text(body)) does not parse: \(error)")
    }
}
