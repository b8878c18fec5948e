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
    private let counter = NIOLockedValueBox(0)
    var calls: Int { counter.withLockedValue { $0 } }

    init(_ addresses: [String]) { self.addresses = addresses.map { IPAddress($0)! } }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        counter.withLockedValue { $0 += 1 }
        return FamilyAnswer(addresses: addresses.filter { $0.isIPv6 == (family == .ipv6) }, ttl: 300)
    }
}
