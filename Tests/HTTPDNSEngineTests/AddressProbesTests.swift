import Testing
@testable import HTTPDNSCore
@testable import HTTPDNSEngine

@Suite struct AddressProbesTests {
    let a = IPAddress("198.51.100.1")!
    let b = IPAddress("198.51.100.2")!
    let c = IPAddress("198.51.100.3")!
    let t0 = Timestamp.seconds(5_000)

    @Test func aNameWithOneAddressIsNotProbed() {
        var probes = AddressProbes(lifetime: .seconds(600))
        #expect(probes.claim([a], port: 443, network: "wifi", limit: 4, now: t0).isEmpty)
        #expect(probes.claim([a, a], port: 443, network: "wifi", limit: 4, now: t0).isEmpty)
    }

    @Test func probesAreClaimedOnceUpToTheLimitInOrder() {
        var probes = AddressProbes(lifetime: .seconds(600))
        #expect(probes.claim([c, a, b], port: 443, network: "wifi", limit: 2, now: t0) == [c, a])
        // Running: not handed out again; the address past the limit never is.
        #expect(probes.claim([c, a, b], port: 443, network: "wifi", limit: 2, now: t0).isEmpty)
        // Another order puts b within the limit: only it is new.
        #expect(probes.claim([b, a, c], port: 443, network: "wifi", limit: 2, now: t0) == [b])
        // Another port is another measurement.
        #expect(probes.claim([c, a], port: 8443, network: "wifi", limit: 4, now: t0) == [c, a])
    }

    @Test func resultsStandForTheirLifetimeOnTheirNetwork() {
        var probes = AddressProbes(lifetime: .seconds(600))
        _ = probes.claim([a, b], port: 443, network: "wifi", limit: 4, now: t0)
        #expect(probes.outcomes(for: [a, b], port: 443, network: "wifi", now: t0).isEmpty, "still running")
        probes.finished(a, port: 443, network: "wifi", outcome: .reached(.milliseconds(30)), now: t0 + .seconds(1))
        probes.finished(b, port: 443, network: "wifi", outcome: .unreachable, now: t0 + .seconds(2))
        #expect(
            probes.outcomes(for: [a, b], port: 443, network: "wifi", now: t0 + .seconds(3))
                == [a: .reached(.milliseconds(30)), b: .unreachable]
        )
        // Another network has none, and probes afresh; the first keeps its own.
        #expect(probes.outcomes(for: [a, b], port: 443, network: "cellular", now: t0 + .seconds(3)).isEmpty)
        #expect(probes.claim([a, b], port: 443, network: "cellular", limit: 4, now: t0 + .seconds(3)) == [a, b])
        #expect(probes.claim([a, b], port: 443, network: "wifi", limit: 4, now: t0 + .seconds(3)).isEmpty)
        // Past the lifetime: no result, probed again.
        #expect(probes.outcomes(for: [a], port: 443, network: "wifi", now: t0 + .seconds(602)).isEmpty)
        #expect(probes.claim([a, b], port: 443, network: "wifi", limit: 4, now: t0 + .seconds(602)) == [a, b])
    }

    @Test func aProbeThatNeverEndsIsHandedOutAgainAfterTheLifetime() {
        var probes = AddressProbes(lifetime: .seconds(600))
        _ = probes.claim([a, b], port: 443, network: "wifi", limit: 4, now: t0)
        #expect(probes.claim([a, b], port: 443, network: "wifi", limit: 4, now: t0 + .seconds(599)).isEmpty)
        #expect(probes.claim([a, b], port: 443, network: "wifi", limit: 4, now: t0 + .seconds(600)) == [a, b])
    }

    @Test func memoryIsBounded() {
        var probes = AddressProbes(lifetime: .seconds(600))
        probes.capacity = 2
        probes.finished(a, port: 443, network: "wifi", outcome: .reached(.milliseconds(1)), now: t0)
        probes.finished(b, port: 443, network: "wifi", outcome: .reached(.milliseconds(1)), now: t0 + .seconds(1))
        probes.finished(c, port: 443, network: "wifi", outcome: .reached(.milliseconds(1)), now: t0 + .seconds(2))
        #expect(
            probes.outcomes(for: [a, b, c], port: 443, network: "wifi", now: t0 + .seconds(3)).keys.sorted {
                $0.description < $1.description
            } == [b, c]
        )
    }

    @Test func theRankerPutsProbedAddressesFirstFastestFirst() {
        var ranker = AddressRanker()
        // The connects' memory says c is fast; the probes on this network say otherwise.
        ranker.recordSuccess(c, connectTime: .milliseconds(1), now: t0)
        let probes: [IPAddress: ProbeOutcome] = [
            a: .reached(.milliseconds(90)), b: .reached(.milliseconds(20)), c: .unreachable,
        ]
        #expect(ranker.rank([a, b, c], now: t0, probes: probes) == [b, a, c])
        // Not probed sits between reached and unreachable.
        #expect(ranker.rank([c, a], now: t0, probes: [a: .unreachable]) == [c, a])
        #expect(ranker.rank([c, a], now: t0, probes: [a: .reached(.milliseconds(500))]) == [a, c])
        // A recent failure still goes last, whatever a probe found.
        ranker.recordFailure(b, now: t0)
        #expect(ranker.rank([a, b, c], now: t0 + .seconds(1), probes: probes) == [a, c, b])
        // A service's own order is not reordered by probes.
        #expect(ranker.rank([c, a], now: t0 + .seconds(1), keepOrder: true, probes: [a: .reached(.zero)]) == [c, a])
        // Without probes, as before.
        #expect(ranker.rank([a, c], now: t0 + .seconds(1)) == [c, a])
    }
}
