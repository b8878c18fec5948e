// nat64: NAT64 prefixes (RFC 6052) and their discovery (RFC 7050) on hostile bytes.
//
// A prefix made from any 16 bytes and any allowed length embeds every IPv4 address and extracts it
// back; discovery over any AAAA answers only reports prefixes that really hold a well-known address;
// prefix text that parses prints back as itself.

func fuzzNAT64(_ data: [UInt8]) {
    if let text = String(validating: data, as: UTF8.self), let parsed = NAT64Prefix(parsing: text) {
        check(NAT64Prefix(parsing: parsed.description) == parsed, "\(text): the prefix does not parse back")
    }
    guard data.count >= 21 else { return }
    let length = NAT64Prefix.lengths[Int(data[0]) % NAT64Prefix.lengths.count]
    let ipv4 = IPAddress.v4(data[17], data[18], data[19], data[20])
    if let prefix = NAT64Prefix(IPAddress(bytes: data[1..<17])!, length: length) {
        let mapped = prefix.synthesize(ipv4)
        check(mapped.flatMap { prefix.extract($0) } == ipv4, "\(prefix): \(ipv4) does not round-trip")
    }
    var answers: [IPAddress] = []
    var rest = data[1...]
    while rest.count >= 16 {
        answers.append(IPAddress(bytes: rest.prefix(16))!)
        rest = rest.dropFirst(16)
    }
    for prefix in NAT64Prefix.discover(fromAAAA: answers) {
        check(
            answers.contains { prefix.extract($0).map(NAT64Prefix.wellKnownIPv4.contains) == true },
            "\(prefix): discovered from answers that hold no well-known address under it"
        )
    }
}
