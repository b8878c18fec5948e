import HTTPDNSCore

/// Checks a provider's answer before it is used or cached.
///
/// Drops unspecified addresses (`0.0.0.0`, `::`) always, and non-global addresses (loopback, private,
/// link-local…) for names the policy does not allow them for: a public name answering `127.0.0.1` or
/// `10.0.0.1` is the classic sign of a poisoned or misconfigured resolver. TTL bounds are applied by the
/// cache (`CacheConfiguration.minTTL` / `maxTTL`).
struct AnswerValidator: Sendable {
    var policy: HostPolicy

    init(policy: HostPolicy) { self.policy = policy }

    struct Outcome: Hashable, Sendable {
        var answer: FamilyAnswer
        /// Addresses removed, with why.
        var rejected: [(IPAddress, String)] {
            get { rejectedPairs.map { ($0.address, $0.reason) } }
        }
        struct Rejected: Hashable, Sendable {
            var address: IPAddress
            var reason: String
        }
        var rejectedPairs: [Rejected]
    }

    func validate(_ answer: FamilyAnswer, for host: String) -> Outcome {
        let allowNonGlobal = policy.mayResolveToNonGlobal(host)
        var kept: [IPAddress] = []
        var rejected: [Outcome.Rejected] = []
        for ip in answer.addresses {
            if ip.isUnspecified {
                rejected.append(.init(address: ip, reason: "unspecified address"))
            } else if !allowNonGlobal, ip.isNonGlobal {
                rejected.append(.init(address: ip, reason: "non-global address for a public name"))
            } else {
                kept.append(ip)
            }
        }
        var checked = answer
        checked.addresses = kept
        return Outcome(answer: checked, rejectedPairs: rejected)
    }
}
