/// Gathers the addresses of one answer: duplicates dropped in constant time each, at most
/// `AddressCollector.limit` kept. Addresses past the limit are ignored, never an error: no HTTPDNS
/// service returns that many for one name, and a hostile one must cost neither O(n²) de-duplication
/// (22k addresses once took 21 s of CPU) nor an error message listing every one of them.

import HTTPDNSCore
package struct AddressCollector: Sendable {
    /// Addresses kept per family of one answer (and per name in a hosts file).
    static let limit = 64

    package private(set) var addresses: [IPAddress] = []
    private var seen: Set<IPAddress> = []

    package init() {}

    /// True once `limit` addresses are kept: callers stop reading the answer there.
    var isFull: Bool { addresses.count >= Self.limit }

    package mutating func add(_ ip: IPAddress) {
        guard !isFull, seen.insert(ip).inserted else { return }
        addresses.append(ip)
    }
}
