import Testing
@testable import HTTPDNSCore
@testable import HTTPDNSEngine

@Suite struct AddressRankerTests {
    let a = IPAddress("198.51.100.1")!
    let b = IPAddress("198.51.100.2")!
    let c = IPAddress("198.51.100.3")!
    let t0 = Timestamp.seconds(5_000)

    @Test func unknownAddressesKeepTheResolversOrder() {
        #expect(AddressRanker().rank([a, b, c], now: t0) == [a, b, c])
    }

    @Test func failedAddressGoesLastUntilItsPenaltyEnds() {
        var r = AddressRanker()
        r.recordFailure(a, now: t0)
        #expect(r.rank([a, b, c], now: t0 + .seconds(1)) == [b, c, a])
        #expect(r.rank([a, b, c], now: t0 + .seconds(31)) == [a, b, c])
        r.recordFailure(a, now: t0 + .seconds(31))  // second failure in a row: 60 s
        #expect(r.isPenalised(a, now: t0 + .seconds(80)))
        r.recordSuccess(a, connectTime: .milliseconds(5), now: t0 + .seconds(100))
        #expect(!r.isPenalised(a, now: t0 + .seconds(100)))
    }

    @Test func fasterAddressIsPreferred() {
        var r = AddressRanker()
        r.recordSuccess(a, connectTime: .milliseconds(80), now: t0)
        r.recordSuccess(c, connectTime: .milliseconds(3), now: t0)
        #expect(r.rank([a, b, c], now: t0) == [c, a, b])
    }

    @Test func memoryIsBounded() {
        var r = AddressRanker()
        r.capacity = 2
        r.recordFailure(a, now: t0)
        r.recordFailure(b, now: t0 + .seconds(1))
        r.recordFailure(c, now: t0 + .seconds(2))
        #expect(!r.isPenalised(a, now: t0 + .seconds(3)))  // forgotten
        #expect(r.isPenalised(c, now: t0 + .seconds(3)))
    }
}

@Suite struct AddressOrderTests {
    let v4 = ["192.0.2.1", "192.0.2.2", "192.0.2.3"].map { IPAddress($0)! }
    let v6 = ["2001:db8::1", "2001:db8::2"].map { IPAddress($0)! }

    @Test func ipv6ComesFirstThenTheFamiliesAlternate() {
        #expect(interleavedIPv6First(ipv4: v4, ipv6: v6) == [v6[0], v4[0], v6[1], v4[1], v4[2]])
    }

    @Test func oneFamilyKeepsItsOrder() {
        #expect(interleavedIPv6First(ipv4: v4, ipv6: []) == v4)
        #expect(interleavedIPv6First(ipv4: [], ipv6: v6) == v6)
        #expect(interleavedIPv6First(ipv4: [], ipv6: []).isEmpty)
    }
}
