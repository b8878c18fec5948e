// HTTPS records (RFC 9460) of a name, asked next to its addresses: the first provider that has a query for
// them (DoH, JSON DoH, classic DNS; the vendors' APIs have none) answers, and an alias is followed to its
// target, four steps at most. Names outside the HTTPDNS policy ask LocalDNS when it can (a `dns:` server;
// the system resolver has no such query, so they have none). Answers are kept in the answer cache beside
// the addresses (DNSCache+Records.swift): per network, fresh or served stale while one refresh runs, and
// saved in the cache file, so a relaunch knows an origin's records (or that it has none) at once.

import HTTPDNSCore
import NIOCore

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

    /// `name`'s records, every alias step answered by the cache (fresh, or stale while its one refresh
    /// runs behind), or nil.
    func cachedServiceBindings(_ name: String) -> ServiceBindings? {
        var walk = AliasWalk(name)
        for _ in 0...Self.aliasLimit {
            guard let (entry, _) = cachedRecords(walk.current) else { return nil }
            guard walk.answered(entry.answer, source: .cache(entry.source)) else { break }
        }
        return walk.result
    }

    /// `name`'s records from the cache, fresh or stale (then its refresh is started, once), or nil.
    private func cachedRecords(_ name: String) -> (RecordsEntry, stale: Bool)? {
        let now = clock.now()
        let (found, key) = state.withLockedValue { state in
            let key = RecordsKey(network: state.network, name: name)
            return (state.machine.cache.lookupRecords(key, now: now), key)
        }
        switch found {
        case .miss:
            return nil
        case .fresh(let entry):
            return (entry, false)
        case .stale(let entry, let refresh):
            if refresh { refreshRecords(key) }
            return (entry, true)
        }
    }

    /// Asks `key`'s records again behind a stale answer; a failure leaves the stale one for the next
    /// lookup to try again. `waitForBackgroundWork()` waits for it.
    private func refreshRecords(_ key: RecordsKey) {
        state.withLockedValue { state in
            state.recordsRefreshes[key] = Task {
                let failed: Bool
                do {
                    _ = try await self.askRecords(key.name, network: key.network)
                    failed = false
                } catch {
                    failed = true
                }
                // One step, so a refresh the failure lets start is not taken off the list with this one.
                self.state.withLockedValue { state in
                    if failed { state.machine.cache.recordsRefreshFailed(key) }
                    state.recordsRefreshes[key] = nil
                }
            }
        }
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

    /// `host`'s own HTTPS records from the cache, while fresh, with the TTL they have left; nil otherwise.
    package func cachedServiceBindingAnswer(of host: String) -> ServiceBindingAnswer? {
        let now = clock.now()
        guard let name = try? validatedHostname(host),
            let entry = state.withLockedValue({
                $0.machine.cache.freshRecords(RecordsKey(network: $0.network, name: name), now: now)
            })
        else { return nil }
        var answer = entry.answer
        if answer.ttl != nil {
            answer.ttl = UInt32(clamping: (entry.expiresAt - now).nanoseconds / 1_000_000_000)
        }
        return answer
    }

    /// One name's answer: the cache's (fresh, or stale while it is refreshed), else the first provider's
    /// that answers HTTPS records.
    private func serviceBindingAnswer(_ name: String) async throws -> (ServiceBindingAnswer, ResolutionSource) {
        if let (entry, stale) = cachedRecords(name) {
            return (entry.answer, stale ? .stale(entry.source) : .cache(entry.source))
        }
        return try await askRecords(name, network: state.withLockedValue { $0.network })
    }

    /// Asks the providers for `name`'s records and caches the first answer (saved with the cache).
    private func askRecords(_ name: String, network: String) async throws -> (ServiceBindingAnswer, ResolutionSource) {
        let candidates: [any DNSProvider]
        switch configuration.policy.lookup(for: name) {
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
                persistence { machine, now in
                    machine.storedRecords(
                        RecordsKey(network: network, name: name),
                        answer,
                        source: provider.name,
                        now: now
                    )
                }
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
