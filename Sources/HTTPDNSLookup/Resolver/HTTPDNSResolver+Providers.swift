// Asking upstream: the providers in health order, each with its fair share of the time left
// (QueryBudget), their failures merged into one error, and LocalDNS (as policy or as the fallback).

import HTTPDNSCore
import HTTPDNSEngine
import NIOCore

extension HTTPDNSResolver {
    func resolveThroughHTTPDNS(
        _ name: String,
        _ query: AddressQuery,
        started: ContinuousClock.Instant,
        reserveForFallback: Bool,
        until callerDeadline: NIODeadline = .distantFuture,
        pastCache: Bool = false
    ) async throws -> Resolution {
        let budget = QueryBudget(reserveForFallback: reserveForFallback)
        async let v4: Result<(FamilyResult, CacheLookup?), any Error>? =
            query.wantsIPv4
            ? result { try await self.lookup(name, .ipv4, budget, until: callerDeadline, pastCache: pastCache) } : nil
        async let v6: Result<(FamilyResult, CacheLookup?), any Error>? =
            query.wantsIPv6
            ? result { try await self.lookup(name, .ipv6, budget, until: callerDeadline, pastCache: pastCache) } : nil
        let (r4, r6) = await (v4, v6)
        var ipv4: [IPAddress] = []
        var ipv6: [IPAddress] = []
        var ttls: [UInt32] = []
        var sources: [ResolutionSource] = []
        var errors: [any Error] = []
        var clientAddress: IPAddress?
        var expiredFor: Duration?
        let now = clock.now()
        for (r, isV6) in [(r4, false), (r6, true)] {
            switch r {
            case .none: continue
            case .success((let fr, let lookup)):
                if isV6 { ipv6 = fr.answer.addresses } else { ipv4 = fr.answer.addresses }
                clientAddress = clientAddress ?? fr.answer.clientAddress
                let ttl = fr.answer.addresses.isEmpty ? nil : fr.answer.ttl
                switch lookup {
                case .fresh:
                    sources.append(.cache(fr.source))
                    if let ttl { ttls.append(ttl) }
                case .stale(let entry, _):
                    sources.append(.stale(fr.source))
                    expiredFor = max(expiredFor ?? .zero, now - entry.expiresAt)
                    if let ttl { ttls.append(ttl) }
                default:
                    // An upstream answer: its TTL within the cache's bounds (and overrides), as the cache
                    // keeps it, so the first answer says what every later one from the cache says.
                    sources.append(.httpdns(fr.source))
                    if !fr.answer.addresses.isEmpty {
                        ttls.append(configuration.cache.ttl(fr.answer.ttl, for: normalizeHostname(name)))
                    }
                }
            case .failure(let e): errors.append(e)
            }
        }
        if ipv4.isEmpty && ipv6.isEmpty {
            // No address: "no such address" only when every family asked answered so; one that failed
            // makes the lookup fail (FamilyOutcome.combine says why).
            let outcomes = [r4, r6].compactMap { $0 }.map { r -> FamilyOutcome in
                if case .success = r { return .noAddress } else { return .failed }
            }
            if FamilyOutcome.combine(outcomes) == .noAddress {
                throw ResolverError(
                    .noAddress,
                    name: name,
                    "\(name): no \(query == .both ? "A or AAAA" : query == .ipv4 ? "A" : "AAAA") record (HTTPDNS)"
                )
            }
            throw Self.combined(errors, name: name)
        }
        // Prefer the source of a fresh upstream answer, then stale, then cache, in that order of interest.
        let source =
            sources.first(where: { if case .httpdns = $0 { return true } else { return false } })
            ?? sources.first(where: { if case .stale = $0 { return true } else { return false } })
            ?? sources[0]
        var resolution = Resolution(
            name: name,
            ipv4: ipv4,
            ipv6: ipv6,
            ttl: ttls.min(),
            source: source,
            elapsed: ContinuousClock.now - started,
            clientAddress: clientAddress,
            expiredFor: expiredFor
        )
        resolution.remembered = sources.contains { $0.cacheState == "hit" || $0.cacheState == "stale" }
        return resolution
    }

    /// Tries the providers in health order, each with a fair share of the time left.
    func queryProviders(_ name: String, _ family: AddressFamily, _ budget: QueryBudget) async throws -> FamilyResult {
        guard !providers.isEmpty else {
            throw ResolverError(.allProvidersFailed, name: name, "no HTTPDNS provider configured")
        }
        let deadline = NIODeadline.now() + TimeAmount(configuration.timeout)
        let order = state.withLockedValue { $0.health.order(count: providers.count, now: clock.now()) }
        var failures: [ProviderFailure] = []
        var messages: [String] = []
        for (position, index) in order.enumerated() {
            let provider = providers[index]
            let left = deadline - .now()
            guard left > .zero else { break }
            let share = TimeAmount.nanoseconds(budget.share(of: left.nanoseconds, position: position, of: order.count))
            state.withLockedValue { $0.statistics.upstreamQueries += 1 }
            metrics.upstreamQueries[index].increment()
            fetchServiceListIfDue(index)
            do {
                let answer = try await provider.resolve(name, family: family, deadline: .now() + share)
                let checked = validator.validate(answer, for: name)
                if !answer.addresses.isEmpty, checked.answer.addresses.isEmpty {
                    let rejected = checked.rejected
                    var why = rejected.prefix(3).map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
                    if rejected.count > 3 { why += " and \(rejected.count - 3) more" }
                    throw ProviderError("answered only unusable addresses: \(why)")
                }
                state.withLockedValue { $0.health.succeeded(index) }
                logger.debug(
                    "resolved upstream",
                    metadata: ["name": "\(name)", "family": "\(family)", "provider": "\(provider.name)"]
                )
                return FamilyResult(answer: checked.answer, source: provider.name)
            } catch {
                // Nobody waits any more (every caller was cancelled): no other provider is asked, and
                // this one is not marked down for a question it was not given time to answer.
                if Task.isCancelled {
                    throw ResolverError(.cancelled, name: name, "\(name): the lookup was cancelled", failures: failures)
                }
                state.withLockedValue { $0.health.failed(index, now: clock.now()) }
                metrics.upstreamFailures[index].increment()
                logger.debug("provider failed", metadata: ["provider": "\(provider.name)", "error": "\(error)"])
                messages.append("\(provider.name): \(error)")
                // The provider's own error as a value: the engine's, when the exchange with it failed.
                failures.append(
                    ProviderFailure(provider: provider.name, error: error)
                )
            }
        }
        let message = messages.joined(separator: "; ")
        if failures.isEmpty {
            throw ResolverError(.timeout, name: name, "no time left (timeout \(configuration.timeout))")
        }
        if failures.allSatisfy({ ($0.error as? HTTPEngineError)?.code == .shutdown }) {
            throw ResolverError(.shutdown, name: name, message, failures: failures)
        }
        throw ResolverError(.allProvidersFailed, name: name, message, failures: failures)
    }

    /// One error for a lookup whose families all failed: their provider failures together (each said
    /// once: both families usually fail the same way), with the code they share, else
    /// `.allProvidersFailed`. A cancelled task's lookup is `.cancelled`.
    static func combined(_ errors: [any Error], name: String) -> ResolverError {
        var messages: [String] = []
        var failures: [ProviderFailure] = []
        var seen: Set<String> = []
        var codes: Set<ResolverError.Code> = []
        for error in errors {
            let resolverError = error as? ResolverError
            codes.insert(resolverError?.code ?? .allProvidersFailed)
            let text = resolverError?.message ?? "\(error)"
            if !messages.contains(text) { messages.append(text) }
            for failure in resolverError?.failures ?? [] where seen.insert(failure.description).inserted {
                failures.append(failure)
            }
        }
        let message = "\(name): every HTTPDNS provider failed: \(messages.joined(separator: "; "))"
        if Task.isCancelled {
            return ResolverError(.cancelled, name: name, "\(name): the lookup was cancelled", failures: failures)
        }
        let shared = codes.count == 1 ? codes.first! : .allProvidersFailed
        let code = [ResolverError.Code.timeout, .shutdown].contains(shared) ? shared : .allProvidersFailed
        return ResolverError(code, name: name, message, failures: failures)
    }

    func resolveLocally(
        _ name: String,
        _ query: AddressQuery,
        started: ContinuousClock.Instant,
        deadline: NIODeadline,
        fallback: Bool,
        reason: ResolverError?
    ) async throws -> Resolution {
        async let v4: Result<FamilyAnswer, any Error>? =
            query.wantsIPv4 ? result { try await self.localDNS.resolve(name, family: .ipv4, deadline: deadline) } : nil
        async let v6: Result<FamilyAnswer, any Error>? =
            query.wantsIPv6 ? result { try await self.localDNS.resolve(name, family: .ipv6, deadline: deadline) } : nil
        let (r4, r6) = await (v4, v6)
        let ipv4 = (try? r4?.get())?.addresses ?? []
        let ipv6 = (try? r6?.get())?.addresses ?? []
        let ttl = [try? r4?.get(), try? r6?.get()].compactMap { $0??.ttl }.min()
        guard !ipv4.isEmpty || !ipv6.isEmpty else {
            let errors = [r4, r6].compactMap { r -> (any Error)? in
                if case .failure(let e) = r { return e } else { return nil }
            }
            let prefix =
                reason.map { "\($0.message); then LocalDNS (\(localDNS.name)): " }
                ?? "\(name): LocalDNS (\(localDNS.name)): "
            var failures = reason?.failures ?? []
            if errors.isEmpty {
                throw ResolverError(
                    fallback ? .allProvidersFailed : .noAddress,
                    name: name,
                    prefix + "no address",
                    failures: failures
                )
            }
            var seen: Set<String> = []
            for error in errors {
                let failure = ProviderFailure(provider: localDNS.name, error: error)
                if seen.insert(failure.description).inserted { failures.append(failure) }
            }
            throw ResolverError(
                .allProvidersFailed,
                name: name,
                prefix + errors.map { "\($0)" }.joined(separator: "; "),
                failures: failures
            )
        }
        let source: ResolutionSource = fallback ? .fallback(localDNS.name) : .localDNS(localDNS.name)
        return Resolution(
            name: name,
            ipv4: ipv4,
            ipv6: ipv6,
            ttl: ttl,
            source: source,
            elapsed: ContinuousClock.now - started
        )
    }
}
