import HTTPDNSKit

// How the commands print a request's metrics: milliseconds, and the DNS source as text.
extension RequestMetrics {
    /// Who gave the address, as printed: "reused connection" when no lookup ran for this request.
    var sourceText: String { dnsSource?.description ?? (reused ? "reused connection" : "?") }
    /// "http/1.1", "h2" or "?".
    var protocolText: String { httpVersion?.rawValue ?? "?" }
}

extension Duration {
    /// Milliseconds, for the tables and the trace page.
    var ms: Double { Double(components.seconds) * 1e3 + Double(components.attoseconds) / 1e15 }
}
