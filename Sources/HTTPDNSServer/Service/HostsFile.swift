import HTTPDNSCore
import HTTPDNSLookup

/// hosts(5) format: `IP name [alias...]` per line, `#` starts a comment. Lines that are not of that form
/// are reported by number rather than guessed at.
enum HostsFile {
    struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        var line: Int
        var reason: String
        init(line: Int, reason: String) {
            self.line = line
            self.reason = reason
        }
        var description: String { "line \(line): \(reason)" }
    }

    /// Files larger than this are refused: a hosts file is read whole and re-read on every change.
    static let maxBytes = 16 << 20

    /// Name (normalized) → addresses in file order, both families mixed, at most
    /// `AddressCollector.limit` per name (later ones are ignored).
    static func parse(_ text: String) throws -> [String: [IPAddress]] {
        guard text.utf8.count <= maxBytes else {
            throw ParseError(line: 0, reason: "larger than \(maxBytes / (1 << 20)) MiB")
        }
        var table: [String: AddressCollector] = [:]
        // "\r\n" is one Character in Swift, not "\n": split on both, or a CRLF file is one long line.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        for (index, raw) in lines.enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let first = fields.first else { continue }
            guard let ip = IPAddress(first) else {
                throw ParseError(line: index + 1, reason: "\"\(first.prefix(60))\" is not an IP address")
            }
            guard fields.count >= 2 else { throw ParseError(line: index + 1, reason: "an address without a name") }
            for name in fields.dropFirst() {
                let normalized: String
                do {
                    normalized = try validatedHostname(name)
                } catch {
                    throw ParseError(line: index + 1, reason: "\(error)")
                }
                table[normalized, default: AddressCollector()].add(ip)
            }
        }
        return table.mapValues(\.addresses)
    }
}
