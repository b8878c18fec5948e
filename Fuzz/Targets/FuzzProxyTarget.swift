// proxy-target: ProxyRequestTarget.parse (and HTTPURLParts.parse under it) on hostile request lines;
// the first byte picks the method.
//
// Whatever comes out: a tunnel has a canonical IP or a valid normalized name and a port in range, and
// its `host:port` parses back to it; a forward is http with its port filled in, a target that can go
// on a request line as is, and its text parses back to it; pac only for GET /proxy.pac; an invalid
// reason is one short line without control characters.

private let methods = ["CONNECT", "GET", "POST", "HEAD", "PUT", "OPTIONS", "DELETE", "connect"]

func fuzzProxyTarget(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let method = methods[Int(selector) & 7]
    let uri = text(data.dropFirst())
    let target = ProxyRequestTarget.parse(method: method, uri: uri)
    switch target {
    case .tunnel(let host, let port):
        check(method == "CONNECT", "tunnel for \(method)")
        check((1...65535).contains(port), "tunnel port \(port)")
        checkHost(host, canonicalIP: true, "CONNECT \(uri)")
        let again = formatAuthority(host: host, port: port)
        check(ProxyRequestTarget.parse(method: method, uri: again) == target, "CONNECT \(again) parses otherwise")
    case .forward(let parts):
        check(method != "CONNECT", "forward for CONNECT")
        check(parts.scheme == "http", "forward with scheme \(parts.scheme)")
        check(parts.port.map { (1...65535).contains($0) } ?? false, "forward port \(String(describing: parts.port))")
        checkParts(parts, "forward \(uri)")
        check(ProxyRequestTarget.parse(method: method, uri: parts.text) == target, "\(parts.text) parses otherwise")
    case .pac:
        check(method == "GET" && uri == "/proxy.pac", "pac for \(method) \(uri)")
    case .invalid(let reason):
        checkOneLine(reason, "invalid reason")
    }
    // The URL parser alone, https included.
    switch Result(catching: { () throws(URLParseError) in try HTTPURLParts.parse(uri) }) {
    case .success(let parts):
        checkParts(parts, "URL \(uri)")
        check((try? HTTPURLParts.parse(parts.text)) == parts, "URL \(parts.text) parses otherwise")
    case .failure(let error):
        checkOneLine(error.reason(quotingAtMost: ProxyRequestTarget.echoLimit), "URL error")
    }
}

/// Parts the URL parser gave: http(s), a valid host, a port in range, a target fit for a request line.
func checkParts(_ parts: HTTPURLParts, _ context: @autoclosure () -> String) {
    check(parts.scheme == "http" || parts.scheme == "https", "\(context()): scheme \(parts.scheme)")
    check(parts.port.map { (1...65535).contains($0) } ?? true, "\(context()): port")
    checkHost(parts.host, canonicalIP: false, context())
    check(parts.target.hasPrefix("/"), "\(context()): target \(parts.target) does not start with /")
    check(
        parts.target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") },
        "\(context()): target \(parts.target.debugDescription) holds bytes a request line must not"
    )
}

/// A message that goes back to a client: one line, no control characters, bounded.
func checkOneLine(_ message: String, _ context: @autoclosure () -> String) {
    check(
        !message.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) },
        "\(context()): control character in \(message.debugDescription)"
    )
    check(message.count <= 600, "\(context()): \(message.count) characters")
}
