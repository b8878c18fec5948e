// Which of a name's addresses to try first, learnt from how connecting to them went.
//
// Every connect outcome is fed back: a success records its connect time (an exponentially weighted
// average, so one slow handshake does not condemn an address), a failure records when it failed. When
// ranking, addresses that failed recently go last (the penalty grows with consecutive failures, from
// 30 s up to 5 min), known-fast ones first, unknown ones keep the resolver's order in between. With
// active probing on, what the probes found on this network comes before the connects' memory: a probe
// measures every address at once, where connects only learn about the ones they tried. Families
// are not mixed here: `interleavedIPv6First` (below) merges the two ranked families afterwards, in the
// order happy eyeballs tries them (RFC 8305).

import HTTPDNSCore

/// Connect-outcome memory per address. Plain value type; the owner keeps it under a lock.
struct AddressRanker: Sendable {
    struct Stats: Sendable {
        var averageConnect: Double?  // seconds, EWMA
        var consecutiveFailures = 0
        var lastFailure: Timestamp?
        var lastUsed: Timestamp
    }

    private var stats: [IPAddress: Stats] = [:]
    /// Addresses remembered at most (least recently used forgotten first).
    var capacity = 1024

    init() {}

    mutating func recordSuccess(_ address: IPAddress, connectTime: Duration, now: Timestamp) {
        var s = stats[address] ?? Stats(lastUsed: now)
        let sample = connectTime.seconds
        s.averageConnect = s.averageConnect.map { $0 * 0.7 + sample * 0.3 } ?? sample
        s.consecutiveFailures = 0
        s.lastFailure = nil
        s.lastUsed = now
        put(address, s)
    }

    mutating func recordFailure(_ address: IPAddress, now: Timestamp) {
        var s = stats[address] ?? Stats(lastUsed: now)
        s.consecutiveFailures += 1
        s.lastFailure = now
        s.lastUsed = now
        put(address, s)
    }

    /// True while `address` is serving a failure penalty.
    func isPenalised(_ address: IPAddress, now: Timestamp) -> Bool {
        guard let s = stats[address], let failed = s.lastFailure else { return false }
        let penalty = Duration.seconds(min(30 * (1 << min(s.consecutiveFailures - 1, 4)), 300))
        return now < failed + penalty
    }

    /// `addresses` reordered: healthy before penalised; among healthy, those an active probe reached
    /// first (fastest probe first), then those not probed, then those a probe could not reach; within the
    /// last two, measured-fast first (ties and unmeasured addresses keep their given order).
    /// `keepOrder`: the order is the caller's (a service's list); only recently failed addresses move back.
    /// `probes`: what active probes found on this network (AddressProbes.swift); empty when probing is off.
    func rank(
        _ addresses: [IPAddress],
        now: Timestamp,
        keepOrder: Bool = false,
        probes: [IPAddress: ProbeOutcome] = [:]
    ) -> [IPAddress] {
        struct Keyed {
            var address: IPAddress
            var index: Int
            var penalised: Bool
            /// 0: a probe reached it; 1: not probed; 2: a probe could not reach it.
            var probeClass: Int
            var probeTime: Duration
            var averageConnect: Double
        }
        let keyed = addresses.enumerated().map { index, ip in
            var probeClass = 1
            var probeTime = Duration.zero
            switch probes[ip] {
            case .reached(let time)?: (probeClass, probeTime) = (0, time)
            case .unreachable?: probeClass = 2
            case nil: break
            }
            return Keyed(
                address: ip,
                index: index,
                penalised: isPenalised(ip, now: now),
                probeClass: keepOrder ? 1 : probeClass,
                probeTime: probeTime,
                averageConnect: stats[ip]?.averageConnect ?? .infinity
            )
        }
        return keyed.sorted { a, b in
            if a.penalised != b.penalised { return !a.penalised }  // healthy first
            if a.probeClass != b.probeClass { return a.probeClass < b.probeClass }
            if a.probeClass == 0, a.probeTime != b.probeTime { return a.probeTime < b.probeTime }
            if !keepOrder, a.averageConnect != b.averageConnect,
                a.averageConnect != .infinity || b.averageConnect != .infinity
            {
                // A measured address beats an unmeasured one only if it is not slow (< 1 s).
                let aScore = a.averageConnect == .infinity ? 1.0 : a.averageConnect
                let bScore = b.averageConnect == .infinity ? 1.0 : b.averageConnect
                if aScore != bScore { return aScore < bScore }
            }
            return a.index < b.index
        }.map(\.address)
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
    interleaved(ipv6, ipv4)
}

/// `first` and `second` interleaved, `first`'s address first, then the rest of the longer one.
func interleaved(_ first: [IPAddress], _ second: [IPAddress]) -> [IPAddress] {
    var out: [IPAddress] = []
    out.reserveCapacity(first.count + second.count)
    for i in 0..<max(first.count, second.count) {
        if i < first.count { out.append(first[i]) }
        if i < second.count { out.append(second[i]) }
    }
    return out
}
