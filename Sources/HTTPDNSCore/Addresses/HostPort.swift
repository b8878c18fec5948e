// Host-and-port text, read and written in one place. An IPv6 literal goes in brackets whenever a port
// follows it or it stands in a URL (RFC 3986 §3.2.2): `[::1]:443`, never `::1:443`, which reads as
// another address. Every "host:port" the project prints goes through `formatAuthority`; every one it
// reads is split by `splitHostPort`, and its port checked by `parsePort`. What each caller then accepts
// as a host (an IP only, a name too, IPv6 bracketed or not) stays with the caller: `ResolverSpec`
// (`dns:IP[:PORT]`, `--listen`) and `ProxyRequestTarget` (`CONNECT host:port`). URLs are parsed in
// HTTPURLParser.swift, hostnames checked in Hostname.swift.

/// `host` with `:port` after it, an IPv6 literal in brackets: `[::1]:443`, `127.0.0.1:443`,
/// `example.com:443`; with no port, `host` alone, still bracketed when IPv6 (`[::1]`), as a URL's host is
/// written. `host` is an address or name without brackets; anything holding a colon counts as IPv6.
package func formatAuthority(host: String, port: Int?) -> String {
    // On the bytes: `host.contains(":")` is Foundation's string search where Foundation is imported,
    // ~4,700 instructions a call, and every request formats its URL (callgrind).
    let bracketed = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    guard let port else { return bracketed }
    return "\(bracketed):\(port)"
}

/// Splits `host:port`, `[v6]:port`, `[v6]` or `host` into the host (brackets removed) and the port text
/// (nil when there is none; possibly empty after a bare colon). Without brackets the last colon
/// separates, so an unbracketed IPv6 address splits into nonsense the caller's host check refuses.
/// Nil when brackets are not closed or something other than `:port` follows them.
package func splitHostPort(_ text: Substring) -> (host: Substring, port: Substring?)? {
    if text.hasPrefix("[") {
        guard let close = text.firstIndex(of: "]") else { return nil }
        let host = text[text.index(after: text.startIndex)..<close]
        let rest = text[text.index(after: close)...]
        if rest.isEmpty { return (host, nil) }
        guard rest.hasPrefix(":") else { return nil }
        return (host, rest.dropFirst())
    }
    guard let colon = text.lastIndex(of: ":") else { return (text, nil) }
    return (text[..<colon], text[text.index(after: colon)...])
}

/// A port as written in a URL or `host:port`: 1 to 5 decimal digits (no sign, no spaces) naming 1-65535.
package func parsePort(_ text: some StringProtocol) -> Int? {
    guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
        let port = Int(text), (1...65535).contains(port)
    else { return nil }
    return port
}
