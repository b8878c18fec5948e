// Active probing's executor (opt-in, `AddressProbing`): the rules are AddressProbes' (HTTPDNSCore); this
// runs the probes they hand out, in the background and in parallel, and keeps them so a caller can wait
// for them (`HTTPDNS.preResolve(_:)`).
//
// A probe is one connection through the engine's own transport (Network.framework on Apple platforms)
// to one address: TCP, then for https the TLS handshake with the real hostname as SNI and the certificate
// checked as for a request. Its time is the connect plus the handshake; then it is closed.

import HTTPDNSCore
import NIOConcurrencyHelpers

/// Runs and remembers address probes for one engine. Thread-safe.
final class AddressProber: Sendable {
    /// Opens (and closes) one connection to `url`'s origin at the single address given, and says how it
    /// went.
    typealias Probe = @Sendable (_ url: HTTPURL, _ address: ResolvedAddresses) async -> ProbeOutcome

    private struct State {
        var probes: AddressProbes
        /// The batch of probes each running key belongs to, for callers that wait.
        var running: [AddressProbes.Key: Task<Void, Never>] = [:]
    }

    let settings: AddressProbing
    private let hosts: [HostPattern]?
    private let state: NIOLockedValueBox<State>
    private let clock = SystemWallClock()
    private let probe: Probe

    /// Throws `HTTPDNSConfigurationError` when a host pattern is not one.
    init(_ settings: AddressProbing, probe: @escaping Probe) throws {
        self.settings = settings
        self.hosts = try settings.hosts?.map(HostPattern.init)
        self.state = NIOLockedValueBox(State(probes: AddressProbes(lifetime: settings.lifetime)))
        self.probe = probe
    }

    /// Whether `host`'s addresses are probed.
    func covers(_ host: String) -> Bool {
        IPAddress(host) == nil && (hosts?.contains { $0.matches(host) } ?? true)
    }

    /// What the probes found for `addresses` (as the resolver gave them) on `network`: the ranker's input.
    func outcomes(for addresses: [IPAddress], port: Int, network: String) -> [IPAddress: ProbeOutcome] {
        let now = clock.now()
        return state.withLockedValue { $0.probes.outcomes(for: addresses, port: port, network: network, now: now) }
    }

    /// Starts the probes `addresses` need (connectable forms; results are kept under the resolver's
    /// addresses, before NAT64) and returns the running probes that cover them, new or already running.
    @discardableResult
    func start(_ url: HTTPURL, addresses: ResolvedAddresses, network: String) -> [Task<Void, Never>] {
        let order = interleavedIPv6First(ipv4: addresses.ipv4, ipv6: addresses.ipv6)
        let original = { (ip: IPAddress) in addresses.synthesized[ip] ?? ip }
        let originals = order.map(original)
        let now = clock.now()
        let limit = max(settings.maxAddresses, 0)
        return state.withLockedValue { state -> [Task<Void, Never>] in
            let claimed = state.probes.claim(
                originals,
                port: url.port,
                network: network,
                limit: limit,
                now: now
            )
            if !claimed.isEmpty {
                let targets = order.filter { claimed.contains(original($0)) }
                let batch = Task { await self.run(url, targets, addresses: addresses, network: network) }
                for ip in claimed {
                    state.running[AddressProbes.Key(network: network, address: ip, port: url.port)] = batch
                }
            }
            var batches: [Task<Void, Never>] = []
            for ip in originals {
                guard let batch = state.running[AddressProbes.Key(network: network, address: ip, port: url.port)],
                    !batches.contains(where: { $0 == batch })
                else { continue }
                batches.append(batch)
            }
            return batches
        }
    }

    private func run(_ url: HTTPURL, _ targets: [IPAddress], addresses: ResolvedAddresses, network: String) async {
        await withTaskGroup(of: Void.self) { group in
            for ip in targets {
                var one = ResolvedAddresses(
                    ipv4: ip.isIPv6 ? [] : [ip],
                    ipv6: ip.isIPv6 ? [ip] : [],
                    source: addresses.source
                )
                one.synthesized = addresses.synthesized.filter { $0.key == ip }
                let original = addresses.synthesized[ip] ?? ip
                group.addTask {
                    let outcome = await self.probe(url, one)
                    let now = self.clock.now()
                    self.state.withLockedValue { state in
                        state.probes.finished(original, port: url.port, network: network, outcome: outcome, now: now)
                        state.running[AddressProbes.Key(network: network, address: original, port: url.port)] = nil
                    }
                }
            }
        }
    }
}
