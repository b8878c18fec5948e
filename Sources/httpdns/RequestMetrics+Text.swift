import HTTPDNSKit

// How the commands print a request's metrics: the DNS source and the protocol as text.
extension RequestMetrics {
    /// Who gave the address, as printed: "reused connection" when no lookup ran for this request.
    var sourceText: String { dnsSource?.description ?? (reused ? "reused connection" : "?") }
    /// "http/1.1", "h2" or "?".
    var protocolText: String { httpVersion?.rawValue ?? "?" }
}
