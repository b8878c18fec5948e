// TEMPORARY (removed right after one run): shows how `eventually` reports a condition that never holds.
@testable import HTTPDNSTestSupport
import Foundation
import Testing

@Suite(.enabled(if: ProcessInfo.processInfo.environment["EVENTUALLY_PROBE"] == "1"))
struct TemporaryEventuallyProbe {
    @Test func neverTrue() async throws {
        try await eventually("a condition that never holds", within: .milliseconds(300)) { false }
        Issue.record("not reached")
    }
}
