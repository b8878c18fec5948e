// The cache file on disk: written 0600 and atomically, read bounded and validated. Hermetic: the
// resolver's only provider is an in-memory fake, so no socket is opened.
/// Answers every name with `addresses` and counts the questions.

@testable import HTTPDNSCore
@testable import HTTPDNSLookup
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing

final class FixedProvider: DNSProvider {
    let name = "fixed"
    let addresses: [IPAddress]
    let ttl: UInt32
    private let counter = NIOLockedValueBox(0)
    private let failing = NIOLockedValueBox(false)
    var calls: Int { counter.withLockedValue { $0 } }

    init(_ addresses: [String], ttl: UInt32 = 300) {
        self.addresses = addresses.map { IPAddress($0)! }
        self.ttl = ttl
    }

    /// From now on every query fails (as an unreachable service would), or answers again.
    func setFailing(_ fails: Bool) { failing.withLockedValue { $0 = fails } }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        counter.withLockedValue { $0 += 1 }
        if failing.withLockedValue({ $0 }) { throw ProviderError("fixed: failing on purpose") }
        return FamilyAnswer(addresses: addresses.filter { $0.isIPv6 == (family == .ipv6) }, ttl: ttl)
    }
}
