// What the device's network is, and what follows from it, as pure values: which address families can
// reach the Internet (stack detection), the NAT64 prefixes of an IPv6-only network, and an identifier
// that changes when the network does. `NetworkPathMachine` takes the events (a kernel notice that
// something changed, a probe's result, a prefix discovery's result, the app naming its network) and
// returns what to do; `NetworkMonitor` (beside it) does the probing, discovery and the rest.

import HTTPDNSCore

/// Which address families have a route to the Internet, from connected UDP sockets (no packet is sent):
/// the local address each would use, nil for a family without a route.
package struct RouteProbe: Hashable, Sendable {
    var ipv4Source: IPAddress?
    var ipv6Source: IPAddress?

    init(ipv4Source: IPAddress?, ipv6Source: IPAddress?) {
        self.ipv4Source = ipv4Source
        self.ipv6Source = ipv6Source
    }

    /// The families with a route.
    var stack: NetworkStack { NetworkStack(ipv4: ipv4Source != nil, ipv6: ipv6Source != nil) }

    /// An identifier for the network these addresses are on: a hash of the IPv4 source address and the
    /// IPv6 source's /64 (so IPv6 privacy addresses rotating inside one network do not count as a new
    /// network). Never anything a user sees, such as a Wi-Fi name; "local" when neither family has a
    /// route.
    var networkID: String {
        guard ipv4Source != nil || ipv6Source != nil else { return "local" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        func mix(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        for byte in ipv4Source?.bytes ?? [0] { mix(byte) }
        mix(0xFF)
        for byte in ipv6Source?.bytes.prefix(8) ?? [0] { mix(byte) }
        let hex = String(hash, radix: 16)
        return "net-" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// The address families with a route to the Internet.
struct NetworkStack: Hashable, Sendable, CustomStringConvertible {
    var ipv4: Bool
    var ipv6: Bool

    init(ipv4: Bool, ipv6: Bool) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
    }

    /// `IPv4 and IPv6`, `IPv6 only`, `IPv4 only`, or `no Internet route` (loopback-only namespaces).
    var description: String {
        switch (ipv4, ipv6) {
        case (true, true): return "IPv4 and IPv6"
        case (false, true): return "IPv6 only"
        case (true, false): return "IPv4 only"
        case (false, false): return "no Internet route"
        }
    }
}

/// What the operating system says of the device's current network path (Apple platforms:
/// NWPathMonitor's `NWPath`); Linux has no such view.
package struct PathFacts: Hashable, Sendable {
    /// The path can carry traffic (`NWPath.Status.satisfied`).
    package var satisfied: Bool
    /// It goes over a cellular interface.
    var cellular: Bool
    /// The system marks it expensive (cellular, a personal hotspot).
    var expensive: Bool
    /// Low Data Mode is on for it.
    var constrained: Bool

    init(satisfied: Bool, cellular: Bool = false, expensive: Bool = false, constrained: Bool = false) {
        self.satisfied = satisfied
        self.cellular = cellular
        self.expensive = expensive
        self.constrained = constrained
    }
}

/// How NAT64 prefixes are found.
package enum NAT64Mode: Hashable, Sendable {
    /// RFC 7050 discovery on networks with no IPv4 route (the default).
    case discover
    /// Never synthesize.
    case off
    /// This prefix, on networks with no IPv4 route, without asking (RFC 7050 allows a configured one).
    case prefix(NAT64Prefix)
}

/// The network as last detected.
package struct NetworkPathState: Hashable, Sendable {
    /// The identifier answers are cached under: derived from the network, or the app's own.
    package var id: String
    /// Nil until the first probe.
    var stack: NetworkStack?
    /// NAT64 prefixes: nil while discovery runs, empty when the network has none (or needs none).
    var nat64: [NAT64Prefix]?

    init(id: String, stack: NetworkStack? = nil, nat64: [NAT64Prefix]? = []) {
        self.id = id
        self.stack = stack
        self.nat64 = nat64
    }

    /// True when IPv4 addresses are reached through a NAT64 prefix: no IPv4 route, an IPv6 one, and a
    /// known prefix.
    var synthesizes: Bool {
        guard let stack, !stack.ipv4, stack.ipv6, let nat64 else { return false }
        return !nat64.isEmpty
    }

    /// True while the answer to "can IPv4 be reached?" waits for prefix discovery.
    var discovering: Bool { nat64 == nil }

    /// The families worth asking HTTPDNS for: one family when only it can be used, both when both can
    /// (an IPv6-only network with NAT64 reaches IPv4 addresses too) or when unsure (not probed yet, a
    /// discovery still running, or no Internet route at all, as in a loopback-only test namespace).
    var query: AddressQuery {
        guard let stack, stack.ipv4 != stack.ipv6 else { return .both }
        if stack.ipv4 { return .ipv4 }
        guard let nat64 else { return .both }
        return nat64.isEmpty ? .ipv6 : .both
    }

    /// `addresses` as they can be connected to on this network. Where IPv4 is reached through NAT64,
    /// each IPv4 address becomes its synthesized IPv6 form, after the native IPv6 addresses (RFC 8305
    /// section 7) and keeping its rank; `synthesized` maps each synthesized address back to the IPv4
    /// address it was made from. Elsewhere the addresses are returned as they are.
    func connectable(_ addresses: ResolvedAddresses) -> ResolvedAddresses {
        guard synthesizes, let prefix = nat64?.first else { return addresses }
        var out = addresses
        out.ipv4 = []
        for address in addresses.ipv4 {
            if !address.staysOffNAT64, let mapped = prefix.synthesize(address) {
                out.ipv6.append(mapped)
                out.synthesized[mapped] = address
            } else {
                out.ipv4.append(address)
            }
        }
        return out
    }

    /// `connectable(_:)` for bare address lists (who answered left empty).
    package func connectable(ipv4: [IPAddress], ipv6: [IPAddress]) -> ResolvedAddresses {
        connectable(ResolvedAddresses(ipv4: ipv4, ipv6: ipv6, source: .staticHosts))
    }

    /// One line for logs and `resolve -v`: `network net-…: IPv6 only, NAT64 fd00:64:64::/96`.
    package var summary: String {
        var text = "network \(id): \(stack.map(\.description) ?? "not probed yet")"
        if let stack, !stack.ipv4, stack.ipv6 {
            switch nat64 {
            case .none: text += ", looking for a NAT64 prefix"
            case .some(let p) where p.isEmpty: text += ", no NAT64 prefix"
            case .some(let p): text += ", NAT64 " + p.map(\.description).joined(separator: " ")
            }
        }
        return text + "; asking for \(query.records)"
    }
}

/// A host's addresses as the engine connects to them: each family in preference order, who answered,
/// and (on a NAT64 network) which IPv6 addresses were synthesized from which IPv4 ones (see
/// `NetworkPathState.connectable(_:)`). The one shape from the resolver's answer to the socket.
package struct ResolvedAddresses: Sendable, Hashable {
    package var ipv4: [IPAddress]
    package var ipv6: [IPAddress]
    /// Who answered: a provider, the cache, LocalDNS (the request's metrics and span read it).
    var source: ResolutionSource
    /// NAT64-synthesized addresses among `ipv6`, each to the IPv4 address it reaches.
    var synthesized: [IPAddress: IPAddress] = [:]
    /// The order is meant (a service's list, used in order): connecting moves only recently failed
    /// addresses back, never a known-fast one forward.
    package var ordered = false

    /// IPv4 goes first: the host's IPv6 failed here lately (`FamilyMemory`).
    var ipv4First = false
    /// A cache gave some of them (fresh or stale, a persisted answer too): the source may know others.
    package var remembered = false

    package init(ipv4: [IPAddress], ipv6: [IPAddress], source: ResolutionSource) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.source = source
    }

    /// Every address in the order to try them: the families interleaved (RFC 8305 §4), IPv6 first
    /// unless `ipv4First`.
    var connectOrder: [IPAddress] {
        ipv4First ? interleaved(ipv4, ipv6) : interleavedIPv6First(ipv4: ipv4, ipv6: ipv6)
    }

    /// Only `addresses` (a part of these), in their families and order, with what else is known of them.
    func restricted(to addresses: [IPAddress]) -> ResolvedAddresses {
        let kept = Set(addresses)
        var part = self
        part.ipv4 = ipv4.filter { kept.contains($0) }
        part.ipv6 = ipv6.filter { kept.contains($0) }
        part.synthesized = synthesized.filter { kept.contains($0.key) }
        return part
    }

    /// These addresses and `other`'s not among them (each family after its own), keeping what is known
    /// of each (its NAT64 origin).
    func adding(_ other: ResolvedAddresses) -> ResolvedAddresses {
        var union = self
        union.ipv4 += other.ipv4.filter { !ipv4.contains($0) }
        union.ipv6 += other.ipv6.filter { !ipv6.contains($0) }
        union.synthesized.merge(other.synthesized) { mine, _ in mine }
        return union
    }
}

extension AddressQuery {
    /// `A and AAAA`, `A`, `AAAA`.
    package var records: String {
        switch self {
        case .both: return "A and AAAA"
        case .ipv4: return "A"
        case .ipv6: return "AAAA"
        }
    }
}

/// The network-path rules: events in, actions out; no I/O, no clock.
///
/// A burst of kernel notices (an interface going down removes its addresses and routes one by one)
/// becomes one probe after a short debounce. A probe that finds other sources or another stack is a new
/// path: the network identifier (unless the app names its networks), the stack, and the NAT64
/// prefixes, which are looked for only where IPv4 has no route, remembered per network, and never
/// assumed.
struct NetworkPathMachine: Sendable {
    private(set) var state: NetworkPathState
    let nat64Mode: NAT64Mode
    /// The app named the network (`networkChanged(to:)`): probes no longer change the identifier.
    var appNamed: Bool
    var debouncing = false
    /// Prefixes found per network, the most recent last (a few networks: home, work, cellular).
    var knownPrefixes: [(id: String, prefixes: [NAT64Prefix])] = []
    static let rememberedNetworks = 8

    enum Event: Hashable, Sendable {
        /// The kernel said a link, address or route changed.
        case kernelNotice
        /// The debounce after a kernel notice elapsed.
        case debounceElapsed
        /// A probe's result.
        case probed(RouteProbe)
        /// A prefix discovery for network `id` ended (empty: no DNS64 answer).
        case discovered([NAT64Prefix], network: String)
        /// The app says the device is on network `id` now.
        case appNamed(String)
    }

    enum Action: Hashable, Sendable {
        /// Probe the routes now.
        case probe
        /// Deliver `.debounceElapsed` after the debounce.
        case scheduleDebounce
        /// Ask the network's resolver for `ipv4only.arpa` AAAA, for network `id`.
        case discoverPrefixes(network: String)
        /// The path is now `state` (publish it).
        case update(NetworkPathState)
        /// The device changed path since `from` (not sent for the first probe): switch the cache
        /// partition, drop pooled connections, re-resolve the names in use.
        case pathChanged(from: NetworkPathState)
    }

    /// Starts with the app's identifier, or a placeholder until the first probe derives one.
    init(networkID: String?, nat64: NAT64Mode) {
        self.state = NetworkPathState(id: networkID ?? "local")
        self.appNamed = networkID != nil
        self.nat64Mode = nat64
    }

    mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .kernelNotice:
            guard !debouncing else { return [] }
            debouncing = true
            return [.scheduleDebounce]
        case .debounceElapsed:
            debouncing = false
            return [.probe]
        case .probed(let probe):
            let id = appNamed ? state.id : probe.networkID
            let stack = probe.stack
            guard id != state.id || stack != state.stack else { return [] }
            let old = state
            state.id = id
            state.stack = stack
            var actions: [Action] = []
            state.nat64 = prefixes(for: id, stack: stack, discover: &actions)
            actions.insert(.update(state), at: 0)
            if old.stack != nil { actions.insert(.pathChanged(from: old), at: 1) }
            return actions
        case .discovered(let prefixes, let network):
            remember(prefixes, for: network)
            guard network == state.id, state.nat64 != prefixes else { return [] }
            state.nat64 = prefixes
            return [.update(state)]
        case .appNamed(let id):
            appNamed = true
            guard id != state.id else { return [] }
            // A new network: its stack and prefixes are probed afresh (the probe after this one finds
            // "no stack yet" changed, so it publishes them and starts a discovery where one is needed).
            let old = state
            state = NetworkPathState(id: id)
            var actions: [Action] = [.update(state)]
            if old.stack != nil { actions.append(.pathChanged(from: old)) }
            return actions + [.probe]
        }
    }

    /// The prefixes of the network `id` with `stack`: none where IPv4 has a route (or IPv6 has none),
    /// the configured one, or the remembered ones while a new discovery runs (nil when there are none).
    private func prefixes(for id: String, stack: NetworkStack, discover actions: inout [Action]) -> [NAT64Prefix]? {
        guard !stack.ipv4, stack.ipv6 else { return [] }
        switch nat64Mode {
        case .off: return []
        case .prefix(let p): return [p]
        case .discover:
            actions.append(.discoverPrefixes(network: id))
            return knownPrefixes.last(where: { $0.id == id })?.prefixes
        }
    }

    private mutating func remember(_ prefixes: [NAT64Prefix], for id: String) {
        knownPrefixes.removeAll { $0.id == id }
        knownPrefixes.append((id, prefixes))
        if knownPrefixes.count > Self.rememberedNetworks { knownPrefixes.removeFirst() }
    }
}
