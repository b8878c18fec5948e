// Clock skew: a device whose clock is hours off still gets signed Alibaba answers, against a
// vendor-style endpoint this project did not write (Tests/Fixtures/vendors/ecs_peer.py), whose clock is
// moved instead and which judges signatures by it (expired before its now, refused more than 24 h
// after). The first query's answer or refusal carries the service's `Date`; a query refused for its
// time goes once more on the service's time, and every later query is signed on it from the start.

@testable import HTTPDNSTestSupport
import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
import Testing

@Suite(.serialized) struct ClockSkewTests {
    @Test(arguments: [2 * 3600, -2 * 3600, -2 * 86400], ["sign_d", "v2"])
    func signedQueriesFollowTheServicesClock(_ skew: Int, _ api: String) async throws {
        let peer = try await ClientSubnetTests.Peer.start(skew: skew)
        defer { peer.stop() }
        let path = api == "v2" ? "/v2/d?id=139450" : "/139450/d"
        let resolver = try peer.alibabaResolver(path)
        // What the service saw: expiry minus its own now, per signed query, in order.
        func deltas() -> [Int] {
            peer.seen.compactMap { line -> Int? in
                guard line.contains("-signed "), let range = line.range(of: "t-now=") else { return nil }
                return Int(line[range.upperBound...])
            }
        }
        func onTime(_ delta: Int) -> Bool { abs(delta - AlibabaSigning.validity) <= 5 }

        #expect(try await resolver.resolve("a.test").ipv4 == [IPAddress("192.0.2.1")!])
        let first = deltas()
        if skew > 0 {
            // Expired by the service's clock, then sent again on it.
            #expect(first.contains { $0 < 0 } && first.contains(where: onTime), "\(first)")
        } else if skew > -86400 {
            // Accepted as it was (2 h 10 min ahead of the service is within its 24 h). The A and AAAA
            // queries race: one signed after the other's answer brought the service's Date is signed
            // on the service's time already. Both are right; none is refused or sent twice.
            #expect(first.contains { $0 > 7000 }, "\(first)")
            #expect(first.allSatisfy { $0 > 7000 || onTime($0) }, "\(first)")
            #expect(first.count <= 2, "nothing sent twice: \(first)")
        } else {
            // More than 24 h ahead of the service: refused, then sent again on its time.
            #expect(first.contains { $0 > 86400 } && first.contains(where: onTime), "\(first)")
        }
        #expect(try await resolver.resolve("b.test").ipv4 == [IPAddress("192.0.2.1")!])
        let later = Array(deltas().dropFirst(first.count))
        #expect(!later.isEmpty && later.allSatisfy(onTime), "signed on the service's time from the start: \(later)")
    }
}
