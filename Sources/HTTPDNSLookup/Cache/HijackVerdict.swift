// One rule for "does LocalDNS look hijacked?", used by `resolve --compare`, `HijackReport`, the hijack
// metric and the trace page alike. It reads what each side said about one name (addresses, "there is
// none", or no answer at all) and gives one word. Pure: tested without resolvers (HijackVerdictTests),
// and against dnsmasq as the hijacker, kresd as the honest resolver and the system resolver.

import HTTPDNSCore

/// The verdict on the network's own resolver (LocalDNS) for one name, judged against HTTPDNS.
///
/// CDNs legitimately hand different resolvers different edges, so `hijacked` is a strong signal to
/// investigate (or to prefer HTTPDNS), not proof.
public enum HijackVerdict: String, Sendable, Hashable, CustomStringConvertible {
    /// Both agree: at least one address in common and no private address from LocalDNS alone, or
    /// neither has an address.
    case consistent
    /// LocalDNS answered other addresses than HTTPDNS, private or reserved ones (loopback, RFC 1918,
    /// `0.0.0.0`…) for a name HTTPDNS gives public addresses, or addresses for a name HTTPDNS says has
    /// none.
    case hijacked
    /// LocalDNS gave no address (NXDOMAIN, no record, a timeout or an error) while HTTPDNS did: the
    /// name is blocked on this network, a form of hijacking.
    case blocked
    /// HTTPDNS gave no answer (it failed or timed out), so there is nothing to judge LocalDNS by.
    case unverified

    /// True for `hijacked` and `blocked`: LocalDNS cannot be trusted for this name.
    public var isHijack: Bool { self == .hijacked || self == .blocked }

    /// The word: `consistent`, `hijacked`, `blocked` or `unverified`.
    public var description: String { rawValue }

    /// What one resolver said about a name, as the verdict reads it.
    enum Answer: Hashable, Sendable {
        /// These addresses (an empty list counts as `none`).
        case addresses([IPAddress])
        /// The resolver says the name has no address (NXDOMAIN, or no record of the families asked).
        case none
        /// No answer: a timeout, a refused or failed query.
        case failed
    }

    /// The verdict on `localDNS` given what `httpdns` answered.
    static func judge(httpdns: Answer, localDNS: Answer) -> HijackVerdict {
        switch (httpdns.normalized, localDNS.normalized) {
        case (.failed, _):
            return .unverified
        case (.none, .addresses):
            return .hijacked
        case (.none, _):
            return .consistent
        case (.addresses, .none), (.addresses, .failed):
            return .blocked
        case (.addresses(let trusted), .addresses(let local)):
            if Set(local).isDisjoint(with: trusted) { return .hijacked }
            let trustedIsPublic = trusted.allSatisfy { !$0.isNonGlobal && !$0.isUnspecified }
            let localHasReserved = local.contains { $0.isNonGlobal || $0.isUnspecified }
            return trustedIsPublic && localHasReserved ? .hijacked : .consistent
        }
    }

    /// One line saying why, for a person (a diagnostics screen, a log): `blocked: LocalDNS gave no
    /// address, HTTPDNS did`.
    public var explanation: String {
        switch self {
        case .consistent: return "consistent"
        case .hijacked: return "hijacked: LocalDNS answered other or private addresses"
        case .blocked: return "blocked: LocalDNS gave no address, HTTPDNS did"
        case .unverified: return "unverified: HTTPDNS gave no answer"
        }
    }
}

extension HijackVerdict.Answer {
    fileprivate var normalized: Self {
        if case .addresses(let list) = self, list.isEmpty { return .none }
        return self
    }
}
