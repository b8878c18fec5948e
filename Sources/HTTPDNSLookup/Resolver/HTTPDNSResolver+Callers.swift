// The resolver for callers that are not async: a completion handler, a blocking call with a timeout,
// and "the cached answer now, or nil and a lookup started" (the vendors' resolveHostSyncNonBlocking /
// WGGetHostByName). Plus a batch call that returns every name's own result. A nil query asks for the
// families the network can use, as `resolve(_:_:)` does.
//
// The blocking call refuses to run on a SwiftNIO event loop thread: the lookup it waits for needs an
// event loop (DoH over the engine, Do53), and if that loop is the one blocked the wait could only end
// by its timeout. On the main thread it never waits, as Alibaba's SDK does for the same call: it answers
// from the cache (a stale answer included, refreshed in the background) or fails at once with
// `.wouldBlockMainThread`, after starting the lookup so that the next call finds the answer.

import Dispatch
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

extension HTTPDNSResolver {
    /// Resolves `host` and calls `completion` once with the result, on no particular thread.
    ///
    /// For callers that are not async (Objective-C era code, delegate-based stacks). Returns at once.
    ///
    /// - Parameters:
    ///   - host: The name to resolve, or an IP literal.
    ///   - query: The address families to ask for; nil for those the network can use.
    ///   - completion: Called once, with the addresses or the `ResolverError` ``resolve(_:_:)->Resolution`` would throw.
    public func resolve(
        _ host: String,
        _ query: AddressQuery? = nil,
        completion: @escaping @Sendable (Result<Resolution, ResolverError>) -> Void
    ) {
        Task {
            completion(await self.result(host, query))
        }
    }

    /// Resolves `host`, blocking the calling thread for at most `timeout`.
    ///
    /// On the main thread it never blocks: it returns the cached answer (a stale one included, refreshed
    /// in the background), an IP literal or an address override at once, or starts the lookup and
    /// throws at once, so a later call finds the answer. When `timeout` passes first the lookup goes on
    /// in the background (its answer is cached for the next call).
    ///
    /// - Parameters:
    ///   - host: The name to resolve, or an IP literal.
    ///   - query: The address families to ask for; nil for those the network can use.
    ///   - timeout: The longest the calling thread is blocked.
    /// - Returns: The addresses, with their TTL and who answered.
    /// - Throws: `ResolverError`: `.wouldBlockMainThread` on the main thread when nothing is cached,
    ///   `.calledOnEventLoop` at once on a SwiftNIO event loop thread (instead of risking a deadlock),
    ///   `.timeout` when `timeout` passes first, or what ``resolve(_:_:)->Resolution`` throws.
    public func resolveBlocking(
        _ host: String,
        _ query: AddressQuery? = nil,
        timeout: Duration = .seconds(5)
    ) throws -> Resolution {
        // NIOPosix's loops say so themselves; Network.framework's (Apple platforms) are asked one by one.
        if MultiThreadedEventLoopGroup.currentEventLoop != nil
            || HTTPEngine.defaultEventLoopGroup.makeIterator().contains(where: { $0.inEventLoop })
        {
            throw ResolverError(
                .calledOnEventLoop,
                name: host,
                "\(host): a blocking resolve was called on a SwiftNIO event loop thread; use the async or completion-handler resolve there"
            )
        }
        if MainThread.isCurrent {
            if let answer = resolveCachedOrStart(host, query) { return answer }
            throw ResolverError(
                .wouldBlockMainThread,
                name: host,
                "\(host): not cached yet, and a blocking resolve on the main thread does not wait; the lookup has started, so call again later, or use the async or completion-handler resolve"
            )
        }
        let done = DispatchSemaphore(value: 0)
        let box = NIOLockedValueBox<Result<Resolution, ResolverError>?>(nil)
        resolve(host, query) { result in
            box.withLockedValue { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + .nanoseconds(Int(max(0, timeout.nanoseconds)))) == .success,
            let result = box.withLockedValue({ $0 })
        else {
            throw ResolverError(.timeout, name: host, "\(host): no answer within \(timeout)")
        }
        return try result.get()
    }

    /// The cached answer for `host` now, or nil; never waits for the network.
    ///
    /// When the cache cannot answer every family asked, a lookup starts in the background and this
    /// returns nil: call again later (or on the next request) to get its answer. A stale or aging
    /// cached answer is returned and refreshed in the background. IP literals and overridden names are
    /// answered at once.
    ///
    /// The fastest lookup there is: a name answered within the last second is one table read under a
    /// lock of its own, with no task, no await and no parsing (`bench resolver` times it).
    ///
    /// - Parameters:
    ///   - host: The name to look up, or an IP literal.
    ///   - query: The address families to ask for; nil for those the network can use.
    /// - Returns: The cached answer, or nil while a lookup starts in the background.
    public func resolveCachedOrStart(_ host: String, _ query: AddressQuery? = nil) -> Resolution? {
        let query = query ?? path.query
        if let hot = hotResolution(host, query) { return hot }
        if let ip = IPAddress(host) { return .literal(host, ip) }
        if !overrides.isEmpty, let pinned = try? overriddenResolution(normalizeHostname(host), query) {
            return pinned
        }
        if let cached = cached(host, query) { return cached }
        Task { _ = try? await self.resolve(host, query) }
        return nil
    }

    /// Resolves every name in `hosts` concurrently and returns each name's own result (a name that
    /// fails does not fail the others). Names repeated in `hosts` are looked up once. Where the first
    /// resolver takes several names per query (DNSPod, Alibaba's signed and v2 forms), the names not
    /// cached are asked for in batches first.
    ///
    /// - Parameters:
    ///   - hosts: The names to resolve.
    ///   - query: The address families to ask for; nil for those the network can use.
    /// - Returns: Each distinct name's addresses, or the `ResolverError` ``resolve(_:_:)->Resolution`` would throw for it.
    public func resolve(
        _ hosts: [String],
        _ query: AddressQuery? = nil
    ) async -> [String: Result<Resolution, ResolverError>] {
        let uncached = Set(hosts).filter { cached($0, query ?? path.query) == nil }
        let batched = uncached.count > 1 ? await resolveInBatches(uncached.sorted(), query).answered : [:]
        return await withTaskGroup(of: (String, Result<Resolution, ResolverError>).self) { group in
            for host in Set(hosts) {
                group.addTask {
                    var result = await self.result(host, query)
                    // A name the batch answered in this call is the provider's answer, not a cache hit,
                    // and took the batch's time.
                    if case .success(var resolution) = result, case .cache(let provider) = resolution.source,
                        let elapsed = (try? validatedHostname(host)).flatMap({ batched[$0] })
                    {
                        resolution.source = .httpdns(provider)
                        resolution.elapsed += elapsed
                        result = .success(resolution)
                    }
                    return (host, result)
                }
            }
            var results: [String: Result<Resolution, ResolverError>] = [:]
            for await (host, result) in group { results[host] = result }
            return results
        }
    }

    /// `resolve(host, query)` as a result.
    private func result(_ host: String, _ query: AddressQuery?) async -> Result<Resolution, ResolverError> {
        await captured(host, otherwise: .allProvidersFailed) { try await resolve(host, query) }
    }
}

/// Whether the caller is on the app's main thread: the main thread itself, or the main queue, where
/// `MainActor` runs. Both are needed: on Linux `dispatch_main` hands the main queue to another thread, so
/// `Thread.isMainThread` is false inside `MainActor.run` there, while the queue's own mark is not.
enum MainThread {
    final class Marker: Sendable {}

    /// Set on the main queue once, on first use.
    private static let key: DispatchSpecificKey<Marker> = {
        let key = DispatchSpecificKey<Marker>()
        DispatchQueue.main.setSpecific(key: key, value: Marker())
        return key
    }()

    static var isCurrent: Bool { Thread.isMainThread || DispatchQueue.getSpecific(key: key) != nil }
}
