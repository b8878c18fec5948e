// resolver-spec: ResolverSpec(parsing:) and the URL parser on hostile text.
//
// Whatever parses: endpoints have a valid host, a port in range, a path starting with / and a request
// target fit for a request line, DNS servers a round-tripping address; and the spec's description parses
// back to an equal spec.

func fuzzResolverSpec(_ data: [UInt8]) {
    let input = text(data)
    if let spec = try? ResolverSpec(parsing: input) {
        if let e = spec.endpoint {
            check(e.scheme == "http" || e.scheme == "https", "endpoint scheme \(e.scheme)")
            check((1...65535).contains(e.port), "endpoint port \(e.port)")
            check(e.path.hasPrefix("/"), "endpoint path \(e.path)")
            check(e.query.map { !$0.isEmpty } ?? true, "empty query kept")
            checkHost(e.host, canonicalIP: false, "endpoint of \(input)")
            let target = e.target(adding: [("name", "a.com"), ("type", "A")])
            check(
                target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") },
                "endpoint request target \(target.debugDescription) holds bytes a request line must not"
            )
        }
        if case .dns(let ip, let port) = spec {
            checkAddress(ip, "dns: spec \(input)")
            check((1...65535).contains(port), "dns: port \(port)")
        }
        let again: ResolverSpec
        do {
            again = try ResolverSpec(parsing: spec.description)
        } catch {
            fatalError(
                "invariant broken: \(spec.description) (from \(input.debugDescription)) does not parse: \(error)"
            )
        }
        check(again == spec, "\(spec.description) parses to \(again.description)")
    }
    // The same text as a plain URL.
    if let parts = try? HTTPURLParts.parse(input) {
        checkParts(parts, "URL \(input)")
        check((try? HTTPURLParts.parse(parts.text)) == parts, "URL \(parts.text) parses otherwise")
    }
}
