/// hosts(5) format: `IP name [alias...]` per line, `#` starts a comment. Lines that are not of that form
/// are reported by number rather than guessed at.
public enum HostsFile {
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public init(line: Int, reason: String) {
            self.line = line
            self.reason = reason
        }
        public var description: String { "line \(line): \(reason)" }
    }

    /// Name (normalized) → addresses in file order, both families mixed.
    public static func parse(_ text: String) throws -> [String: [IPAddress]] {
        var table: [String: [IPAddress]] = [:]
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
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
                if !(table[normalized]?.contains(ip) ?? false) { table[normalized, default: []].append(ip) }
            }
        }
        return table
    }
}
