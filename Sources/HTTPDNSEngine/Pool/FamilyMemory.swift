// Which address family to start with, per host and network, learnt from connects (as the system stack
// does): a connect won by IPv4 after the host's IPv6 addresses were tried first (they failed, or were
// slower than the attempt delay) means IPv6 to that host is broken on this network, and the host's next
// connects start with IPv4 (IPv6 still follows, after the attempt delay) for `holdFor`. A connect won
// by IPv6 clears it. A new network starts afresh (the key holds the network). Bounded: the oldest
// entry goes first.

import HTTPDNSCore

/// Hosts whose IPv6 failed lately, per network. Plain value type; the owner keeps it under a lock.
struct FamilyMemory: Sendable {
    private struct Key: Hashable {
        var host: String
        var network: String
    }

    /// How long a failed IPv6 sends a host's connects to IPv4 first.
    var holdFor: Duration = .seconds(600)
    /// Hosts remembered at most.
    var capacity = 256
    private var ipv6FailedAt: [Key: Timestamp] = [:]

    init() {}

    /// A connect to `host` on `network` was won by `winner` after `triedBefore`, the addresses tried
    /// before it.
    mutating func connected(
        _ host: String,
        network: String,
        winner: IPAddress,
        triedBefore: [IPAddress],
        now: Timestamp
    ) {
        let key = Key(host: host, network: network)
        if winner.isIPv6 {
            ipv6FailedAt[key] = nil
        } else if triedBefore.contains(where: \.isIPv6) {
            if ipv6FailedAt[key] == nil, ipv6FailedAt.count >= capacity,
                let oldest = ipv6FailedAt.min(by: { $0.value < $1.value })?.key
            {
                ipv6FailedAt[oldest] = nil
            }
            ipv6FailedAt[key] = now
        }
    }

    /// Whether `host`'s connects on `network` start with IPv4.
    func prefersIPv4(_ host: String, network: String, now: Timestamp) -> Bool {
        guard let failed = ipv6FailedAt[Key(host: host, network: network)] else { return false }
        return now < failed + holdFor
    }
}
