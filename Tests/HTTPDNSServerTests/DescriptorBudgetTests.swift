// The bounds `serve` and the proxy fit into the descriptor limit (DescriptorBudget). Pure.

import HTTPDNSEngine
@testable import HTTPDNSListener
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
        // 1,024 descriptors, 24 open, 51 kept free: 949 for connections (1 each, the proxy's 2) and lookups
        // (2 each).
        let budget = DescriptorBudget(limit: 1024, inUse: 24)
        #expect(budget.reserve == 51)
        let (connections, lookups) = budget.fitServe(maxConnections: 1024, maxUpstreamLookups: 256)
        #expect(lookups == 949 / 8)
        // The listener's headroom (newcomers waiting, closes under way) counts too, and nothing more
        // would fit.
        let cost = { (c: Int) in c + ConnectionLimiter.headroom(limit: c) + 2 * lookups }
        #expect(cost(connections) <= budget.available && cost(connections + 1) > budget.available)
        #expect(connections == 631)
        let proxy = budget.fitProxy(maxConnections: 1024)
        #expect(2 * proxy + ConnectionLimiter.headroom(limit: proxy) <= budget.available)
        #expect(2 * (proxy + 1) + ConnectionLimiter.headroom(limit: proxy + 1) > budget.available)
        #expect(proxy == 445)
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
