// Which family a host's connects start with, learnt from how the last ones went (FamilyMemory.swift):
// pure, on a set clock.

@testable import HTTPDNSCore
@testable import HTTPDNSEngine
import Testing

@Suite struct FamilyMemoryTests {
    static let v6 = IPAddress("2001:db8::1")!
    static let v4 = IPAddress("192.0.2.1")!
    static let t0 = Timestamp.seconds(1_000)

    @Test func aConnectWonByIPv4AfterIPv6WasTriedStartsTheNextWithIPv4() {
        var memory = FamilyMemory()
        #expect(!memory.prefersIPv4("a.test", network: "wifi", now: Self.t0))
        memory.connected("a.test", network: "wifi", winner: Self.v4, triedBefore: [Self.v6], now: Self.t0)
        #expect(memory.prefersIPv4("a.test", network: "wifi", now: Self.t0 + .seconds(1)))
        // Another host, another network: nothing known.
        #expect(!memory.prefersIPv4("b.test", network: "wifi", now: Self.t0))
        #expect(!memory.prefersIPv4("a.test", network: "cellular", now: Self.t0))
        // For a while, then IPv6 gets its turn again.
        #expect(!memory.prefersIPv4("a.test", network: "wifi", now: Self.t0 + memory.holdFor))
    }

    @Test func anIPv4WinWithoutAnIPv6TriedTeachesNothing() {
        var memory = FamilyMemory()
        memory.connected("a.test", network: "wifi", winner: Self.v4, triedBefore: [], now: Self.t0)
        #expect(!memory.prefersIPv4("a.test", network: "wifi", now: Self.t0))
    }

    @Test func anIPv6WinClearsIt() {
        var memory = FamilyMemory()
        memory.connected("a.test", network: "wifi", winner: Self.v4, triedBefore: [Self.v6], now: Self.t0)
        memory.connected("a.test", network: "wifi", winner: Self.v6, triedBefore: [], now: Self.t0)
        #expect(!memory.prefersIPv4("a.test", network: "wifi", now: Self.t0))
    }

    @Test func itIsBounded() {
        var memory = FamilyMemory()
        memory.capacity = 2
        for (i, host) in ["a.test", "b.test", "c.test"].enumerated() {
            memory.connected(host, network: "wifi", winner: Self.v4, triedBefore: [Self.v6], now: Self.t0 + .seconds(i))
        }
        // The oldest went first.
        #expect(!memory.prefersIPv4("a.test", network: "wifi", now: Self.t0 + .seconds(3)))
        #expect(memory.prefersIPv4("c.test", network: "wifi", now: Self.t0 + .seconds(3)))
    }

    @Test func theConnectOrderFollowsIt() {
        var addresses = ResolvedAddresses(ipv4: [Self.v4], ipv6: [Self.v6], source: .literal)
        #expect(addresses.connectOrder == [Self.v6, Self.v4])
        addresses.ipv4First = true
        #expect(addresses.connectOrder == [Self.v4, Self.v6])
    }
}
