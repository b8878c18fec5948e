// Active probing's memory (opt-in, `AddressProbing`): which of a name's addresses to probe now, and what
// the probes found, per network.
//
// A probe opens a connection to one address the way a request would (TCP, and the TLS handshake for
// https) and measures how long that took: what the first byte waits for. A TCP connect alone says little
// on a path where the handshake completes near the device (a middlebox, a carrier's proxy) while the
// server is far. The ranker puts addresses a probe reached first, fastest first (AddressRanker.swift).
//
// Results are kept per network and port for `lifetime`: a network the device comes back to keeps its
// measurements. A probe that is running is not started again; the executor always reports its end.

import HTTPDNSCore

/// What a probe found at one address.
enum ProbeOutcome: Hashable, Sendable {
    /// Connected (and finished the TLS handshake, for https) in this long.
    case reached(Duration)
    /// Could not connect, or not within the probe timeout.
    case unreachable
}

/// Probe results and running probes, per network, address and port. A plain value type; its owner keeps
/// it under a lock and runs the probes `claim` hands out.
struct AddressProbes: Sendable {
    struct Key: Hashable, Sendable {
        var network: String
        var address: IPAddress
        var port: Int

        init(network: String, address: IPAddress, port: Int) {
            self.network = network
            self.address = address
            self.port = port
        }
    }

    private struct Entry: Sendable {
        /// Nil while the probe runs.
        var outcome: ProbeOutcome?
        /// When it started (running) or ended.
        var at: Timestamp
    }

    private var entries: [Key: Entry] = [:]
    /// How long a result stands for its address on its network.
    var lifetime: Duration
    /// Results remembered at most (the oldest forgotten first).
    var capacity = 1024

    init(lifetime: Duration) {
        self.lifetime = lifetime
    }

    /// The addresses to probe now among the first `limit` of `addresses` (the order they would be tried
    /// in): those with no result younger than `lifetime` on `network` and no probe running (a probe
    /// running for longer than `lifetime` counts as lost). The addresses after the first `limit` are never
    /// probed. Nothing when there is only one address: there is nothing to choose between. The ones
    /// returned count as running until `finished`.
    mutating func claim(
        _ addresses: [IPAddress],
        port: Int,
        network: String,
        limit: Int,
        now: Timestamp
    ) -> [IPAddress] {
        var candidates: [IPAddress] = []
        for address in addresses where !candidates.contains(address) { candidates.append(address) }
        guard candidates.count > 1 else { return [] }
        var claimed: [IPAddress] = []
        for address in candidates.prefix(max(limit, 0)) {
            let key = Key(network: network, address: address, port: port)
            if let entry = entries[key], now < entry.at + lifetime { continue }
            put(key, Entry(outcome: nil, at: now))
            claimed.append(address)
        }
        return claimed
    }

    /// A probe `claim` handed out ended with `outcome`.
    mutating func finished(
        _ address: IPAddress,
        port: Int,
        network: String,
        outcome: ProbeOutcome,
        now: Timestamp
    ) {
        put(Key(network: network, address: address, port: port), Entry(outcome: outcome, at: now))
    }

    /// The results younger than `lifetime` on `network` for `addresses` (none for those not probed or
    /// still running): the ranker's input.
    func outcomes(for addresses: [IPAddress], port: Int, network: String, now: Timestamp) -> [IPAddress:
        ProbeOutcome]
    {
        var found: [IPAddress: ProbeOutcome] = [:]
        for address in addresses {
            guard let entry = entries[Key(network: network, address: address, port: port)],
                let outcome = entry.outcome, now < entry.at + lifetime
            else { continue }
            found[address] = outcome
        }
        return found
    }

    private mutating func put(_ key: Key, _ entry: Entry) {
        if entries[key] == nil, entries.count >= capacity,
            let victim = entries.min(by: { $0.value.at < $1.value.at })?.key
        {
            entries[victim] = nil
        }
        entries[key] = entry
    }
}
