// Which of a name's addresses to try first, learnt from how connecting to them went.
//
// Every connect outcome is fed back: a success records its connect time (an exponentially weighted
// average, so one slow handshake does not condemn an address), a failure records when it failed. When
// ranking, addresses that failed recently go last (the penalty grows with consecutive failures, from
// 30 s up to 5 min), known-fast ones first, unknown ones keep the resolver's order in between. Families
// are not mixed here: `interleavedIPv6First` (below) merges the two ranked families afterwards, in the
// order happy eyeballs tries them (RFC 8305).

/// Connect-outcome memory per address. Plain value type; the owner keeps it under a lock.
package struct AddressRanker: Sendable {
    struct Stats: Sendable {
        var averageConnect: Double?  // seconds, EWMA
        var consecutiveFailures = 0
        var lastFailure: Timestamp?
        var lastUsed: Timestamp
    }

    private var stats: [IPAddress: Stats] = [:]
    /// Addresses remembered at most (least recently used forgotten first).
    package var capacity = 1024

    package init() {}

    package mutating func recordSuccess(_ address: IPAddress, connectTime: Duration, now: Timestamp) {
        var s = stats[address] ?? Stats(lastUsed: now)
        let sample = connectTime.seconds
        s.averageConnect = s.averageConnect.map { $0 * 0.7 + sample * 0.3 } ?? sample
        s.consecutiveFailures = 0
        s.lastFailure = nil
        s.lastUsed = now
        put(address, s)
    }

    package mutating func recordFailure(_ address: IPAddress, now: Timestamp) {
        var s = stats[address] ?? Stats(lastUsed: now)
        s.consecutiveFailures += 1
        s.lastFailure = now
        s.lastUsed = now
        put(address, s)
    }

    /// True while `address` is serving a failure penalty.
    package func isPenalised(_ address: IPAddress, now: Timestamp) -> Bool {
        guard let s = stats[address], let failed = s.lastFailure else { return false }
        let penalty = Duration.seconds(min(30 * (1 << min(s.consecutiveFailures - 1, 4)), 300))
        return now < failed + penalty
    }

    /// `addresses` reordered: healthy before penalised; among healthy, measured-fast first (ties and
    /// unmeasured addresses keep their given order).
    /// `keepOrder`: the order is the caller's (a service's list); only recently failed addresses move back.
    package func rank(_ addresses: [IPAddress], now: Timestamp, keepOrder: Bool = false) -> [IPAddress] {
        let keyed = addresses.enumerated().map { (index, ip) -> (IPAddress, Int, Bool, Double) in
            let penalised = isPenalised(ip, now: now)
            return (ip, index, penalised, stats[ip]?.averageConnect ?? .infinity)
        }
        return keyed.sorted { a, b in
            if a.2 != b.2 { return !a.2 }  // healthy first
            if !keepOrder, a.3 != b.3, a.3 != .infinity || b.3 != .infinity {
                // A measured address beats an unmeasured one only if it is not slow (< 1 s).
                let aScore = a.3 == .infinity ? 1.0 : a.3
                let bScore = b.3 == .infinity ? 1.0 : b.3
                if aScore != bScore { return aScore < bScore }
            }
            return a.1 < b.1
        }.map(\.0)
    }

    private mutating func put(_ address: IPAddress, _ s: Stats) {
        if stats[address] == nil, stats.count >= capacity,
            let victim = stats.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key
        {
            stats[victim] = nil
        }
        stats[address] = s
    }
}

/// IPv6 and IPv4 addresses interleaved, IPv6 first (RFC 8305 §4): v6, v4, v6, v4, … then the rest of the
/// longer family, each family in its given order. The order to try a name's addresses in.
package func interleavedIPv6First(ipv4: [IPAddress], ipv6: [IPAddress]) -> [IPAddress] {
    var out: [IPAddress] = []
    out.reserveCapacity(ipv4.count + ipv6.count)
    for i in 0..<max(ipv4.count, ipv6.count) {
        if i < ipv6.count { out.append(ipv6[i]) }
        if i < ipv4.count { out.append(ipv4[i]) }
    }
    return out
}
