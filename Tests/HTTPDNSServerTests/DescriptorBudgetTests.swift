// The bounds `serve` and the proxy fit into the descriptor limit (DescriptorBudget). Pure.

@testable import HTTPDNSServer
import Testing

@Suite struct DescriptorBudgetTests {
    @Test func boundsThatFitAreKept() {
        let budget = DescriptorBudget(limit: 65_536, inUse: 30)
        #expect(budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 256).connections == 1024)
        #expect(budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 256).upstreamLookups == 256)
        #expect(budget.fitProxy(maxConnections: 1024) == 1024)
    }

    @Test func boundsThatDoNotFitShrinkIntoWhatIsLeftAfterTheReserve() {
        // 1,024 descriptors, 24 open, 51 kept free: 949 for connections (1 each) and lookups (2 each).
        let budget = DescriptorBudget(limit: 1024, inUse: 24)
        #expect(budget.reserve == 51)
        let (connections, lookups) = budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 256)
        #expect(lookups == 949 / 8)
        #expect(connections + 2 * lookups <= budget.available)
        #expect(connections == 949 - 2 * lookups)
        #expect(budget.fitProxy(maxConnections: 1024) == 474)
    }

    @Test func aTinyLimitStillServesOneOfEach() {
        let budget = DescriptorBudget(limit: 20, inUse: 19)
        #expect(budget.available == 0)
        #expect(budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 256).connections == 1)
        #expect(budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 256).upstreamLookups == 1)
        #expect(budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 0).connections == 1)
        #expect(budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 0).upstreamLookups == 0)
        #expect(budget.fitProxy(maxConnections: 1024) == 1)
    }
}
