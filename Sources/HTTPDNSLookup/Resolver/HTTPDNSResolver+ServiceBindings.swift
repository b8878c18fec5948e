// HTTPS records (RFC 9460) of a name, asked next to its addresses: the first provider that has a query for
// them (DoH, JSON DoH, classic DNS; the vendors' APIs have none) answers, and an alias is followed to its
// target, four steps at most. Names outside the HTTPDNS policy ask LocalDNS when it can (a `dns:` server;
// the system resolver has no such query, so they have none). Answers are kept per network for their TTL
// in a small table of their own (the address cache's rules are per address family).

import HTTPDNSCore
import NIOCore

/// The resolver's table of HTTPS answers: per network and name, until their TTL runs out. At most
/// `capacity` names; when full, expired ones go first, then everything (a lookup costs one query).
struct ServiceBindingTable {
    struct Entry {
        var answer: ServiceBindingAnswer
        var source: String
        var expiresAt: Timestamp
    }
    var entries: [String: Entry] = [:]
    static let capacity = 512

    private static func key(_ name: String, _ network: String) -> String { network + " " + name }

    /// `name`'s entry on `network`, while its TTL lasts.
    func fresh(_ name: String, on network: String, now: Timestamp) -> Entry? {
        guard let entry = entries[Self.key(name, network)], now < entry.expiresAt else { return nil }
        return entry
    }

    mutating func store(_ name: String, on network: String, _ entry: Entry, now: Timestamp) {
        let key = Self.key(name, network)
        if entries[key] == nil, entries.count >= Self.capacity {
            entries = entries.filter { now < $0.value.expiresAt }
            if entries.count >= Self.capacity { entries = [:] }
        }
        entries[key] = entry
    }
}

/// Following aliases (RFC 9460 §2.4.2), one answer at a time: the name to ask next, and what was found.
struct AliasWalk {
    private(set) var result: ServiceBindings
    /// The name to ask next.
    private(set) var current: String

    init(_ name: String) {
        result = ServiceBindings(name: name, aliases: [], endpoints: [], source: .literal)
        current = name
    }

    /// Takes the answer for `current`. Returns whether to ask again (for the alias's target); an alias
    /// to "." or back to a name already seen ends the chain with no endpoint.
    mutating func answered(_ answer: ServiceBindingAnswer, source: ResolutionSource) -> Bool {
        result.source = source
        guard let alias = answer.bindings.first, alias.isAlias else {
            result.endpoints = answer.bindings
            return false
        }
        let target = normalizeHostname(alias.target)
        guard alias.target != ".", target != result.name, !result.aliases.contains(target) else { return false }
        result.aliases.append(target)
        current = target
        return true
    }
}

extension HTTPDNSResolver {
    /// Alias steps followed at most.
    static let aliasLimit = 4

    /// The HTTPS records (RFC 9460) of `host`: its service endpoints (ALPN, port, address hints, ECH),
    /// an alias followed to its target. Asked of the first provider that has a query for them, within
    /// the lookup timeout; cached for their TTL.
    ///
    /// A name without records gives none.
    ///
    /// - Parameter host: The name whose records to ask for.
    /// - Returns: The records, with the aliases followed to reach them and who answered.
    /// - Throws: `ResolverError`: `.invalidName` for a name that is not a valid hostname, or the lookup's error
    ///   when no provider could answer.
    public func serviceBindings(for host: String) async throws -> ServiceBindings {
        var walk = AliasWalk(try recordsName(host))
        for _ in 0...Self.aliasLimit {
            let (answer, source) = try await serviceBindingAnswer(walk.current)
            guard walk.answered(answer, source: source) else { break }
        }
        return walk.result
    }

    /// `name`'s records, every alias step answered by the table (fresh), or nil.
    func cachedServiceBindings(_ name: String) -> ServiceBindings? {
        let now = clock.now()
        let network = state.withLockedValue { $0.network }
        var walk = AliasWalk(name)
        for _ in 0...Self.aliasLimit {
            guard let entry = bindingTable.withLockedValue({ $0.fresh(walk.current, on: network, now: now) }) else {
                return nil
            }
            guard walk.answered(entry.answer, source: .cache(entry.source)) else { break }
        }
        return walk.result
    }

    /// `host`'s own HTTPS records, as a DNS server answers the question (an alias is passed on as it is,
    /// for the client to follow), asked as `serviceBindings(for:)` asks each step: for `httpdns serve`.
    /// Throws `ResolverError`.
    package func serviceBindingAnswer(of host: String) async throws -> ServiceBindingAnswer {
        try await serviceBindingAnswer(try recordsName(host)).0
    }

    /// `host` as a name to ask records for; throws `ResolverError` (`.invalidName`) when it is not one.
    private func recordsName(_ host: String) throws -> String {
        do {
            return try validatedHostname(host)
        } catch {
            throw ResolverError(.invalidName, name: host, "\(error)")
        }
    }

    /// `host`'s own HTTPS records from the table, while fresh, with the TTL they have left; nil otherwise.
    package func cachedServiceBindingAnswer(of host: String) -> ServiceBindingAnswer? {
        let now = clock.now()
        let network = state.withLockedValue { $0.network }
        guard let name = try? validatedHostname(host),
            let entry = bindingTable.withLockedValue({ $0.fresh(name, on: network, now: now) })
        else { return nil }
        var answer = entry.answer
        if answer.ttl != nil {
            answer.ttl = UInt32(clamping: (entry.expiresAt - now).nanoseconds / 1_000_000_000)
        }
        return answer
    }

    /// One name's answer: the table's, else the first provider's that answers HTTPS records.
    private func serviceBindingAnswer(_ name: String) async throws -> (ServiceBindingAnswer, ResolutionSource) {
        let now = clock.now()
        let network = state.withLockedValue { $0.network }
        if let entry = bindingTable.withLockedValue({ $0.fresh(name, on: network, now: now) }) {
            return (entry.answer, .cache(entry.source))
        }
        let candidates: [any DNSProvider]
        switch configuration.policy.route(for: name) {
        case .httpdns(let strict):
            candidates = providers + (strict || !configuration.fallbackToLocalDNS ? [] : [localDNS])
        case .localDNS, .literal:
            candidates = [localDNS]
        }
        let deadline = NIODeadline.now() + TimeAmount(configuration.timeout)
        var failures: [ProviderFailure] = []
        for provider in candidates where provider.answersServiceBindings {
            do {
                let answer = try await provider.serviceBindings(name, deadline: deadline)
                let ttl = max(configuration.cache.minTTL, min(answer.ttl ?? configuration.cache.negativeTTL, 86_400))
                let entry = ServiceBindingTable.Entry(
                    answer: answer,
                    source: provider.name,
                    expiresAt: now + .seconds(Int64(ttl))
                )
                bindingTable.withLockedValue { $0.store(name, on: network, entry, now: now) }
                let fromHTTPDNS = providers.contains { $0.name == provider.name }
                return (answer, fromHTTPDNS ? .httpdns(provider.name) : .localDNS(provider.name))
            } catch {
                failures.append(ProviderFailure(provider: provider.name, error: error))
            }
        }
        guard !failures.isEmpty else { return (ServiceBindingAnswer(bindings: [], ttl: nil), .literal) }
        throw ResolverError(
            .allProvidersFailed,
            name: name,
            "no HTTPS records: " + failures.map(\.description).joined(separator: "; "),
            failures: failures
        )
    }
}
