// The domains a system proxy configuration pointed at the loopback proxy names (Apple's proxy route):
// the hosts the policy selects go there, the others straight out.

import Testing

@testable import HTTPDNSCore

@Suite struct HostPolicyProxyDomainsTests {
    @Test func selectedHostsAreMatchDomainsAndExceptionsAreExcluded() throws {
        let policy = try HostPolicy(
            only: ["api.example.com", "*.cdn.example.net", "10.0.0.1"],
            except: ["old.cdn.example.net"]
        )
        let domains = policy.proxyDomains
        // An IP literal is no domain; a wildcard names the domain below it.
        #expect(domains.match == ["api.example.com", "cdn.example.net"])
        #expect(domains.excluded == ["old.cdn.example.net"])
    }

    @Test func everyNameMeansNoMatchListAndNothingSelectedLeavesItToTheProxy() throws {
        let all = try HostPolicy(only: ["*"], except: ["intranet.example"])
        #expect(all.proxyDomains.match.isEmpty)
        #expect(all.proxyDomains.excluded == ["intranet.example"])
        #expect(HostPolicy.none.proxyDomains.match.isEmpty && HostPolicy.none.proxyDomains.excluded.isEmpty)
    }
}
