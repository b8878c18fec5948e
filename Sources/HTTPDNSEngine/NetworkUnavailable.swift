// When a failed connect means "no network", not "that server": Apple's URL loading reports it as
// `NSURLErrorNotConnectedToInternet` (-1009), with `networkUnavailableReason` when a network exists but
// the request's rules forbid it (cellular, expensive, Low Data Mode); that reason is what Apple tells apps
// to read before retrying with fewer restrictions. A refused or unreachable server stays
// `.cannotConnectToHost` (-1004).
//
// The rule (pure, NetworkUnavailableTests): the operating system's view of the current path decides
// where it has one (Apple platforms: NWPathMonitor); otherwise a connect whose every attempt failed with
// "network is unreachable" or "network is down" had no network. A lookup that failed (a name not cached,
// in airplane mode: the most common offline case) had no network when the path says so, when the
// probed stack has no route of either family, or when every provider asked failed for want of one; an
// app then retries on reconnect, where "cannot find host" (-1003) would tell it the name is wrong.

import HTTPDNSCore
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The device had no network a connection could use.
package struct NetworkUnavailable: Hashable, Sendable {
    /// Why a network that exists could not be used: the request's rules forbid it.
    package enum Reason: Int, Hashable, Sendable {
        // The raw values are `URLError.NetworkUnavailableReason`'s.
        case cellular = 0
        case expensive = 1
        case constrained = 2
    }
    /// Nil: no network at all.
    package var reason: Reason?

    init(reason: Reason? = nil) { self.reason = reason }

    /// Whether a connect that failed with `errnos` (one per attempt; empty when the errors were not the
    /// system's) under `access` had no network, given the system's `path` where it reports one.
    static func judge(errnos: [Int32], path: PathFacts?, access: NetworkAccess) -> NetworkUnavailable? {
        if let path {
            if path.cellular && !access.allowsCellular { return NetworkUnavailable(reason: .cellular) }
            if path.expensive && !access.allowsExpensive { return NetworkUnavailable(reason: .expensive) }
            if path.constrained && !access.allowsConstrained { return NetworkUnavailable(reason: .constrained) }
            if !path.satisfied { return NetworkUnavailable() }
        }
        let noNetwork: Set<Int32> = [ENETUNREACH, ENETDOWN]
        guard !errnos.isEmpty, errnos.allSatisfy(noNetwork.contains) else { return nil }
        return NetworkUnavailable()
    }

    /// Whether a lookup that failed with `error` had no network: the system's `path` is unsatisfied
    /// where it reports one, the probed `stack` has no route of either family, or every provider asked
    /// failed to reach its server for want of a network (`ProviderFailures`).
    static func judge(lookupFailure error: any Error, stack: NetworkStack?, path: PathFacts?)
        -> NetworkUnavailable?
    {
        if let path, !path.satisfied { return NetworkUnavailable() }
        if let stack, !stack.ipv4, !stack.ipv6 { return NetworkUnavailable() }
        guard let failures = (error as? any ProviderFailures)?.providerErrors, !failures.isEmpty else { return nil }
        return failures.allSatisfy(foundNoNetwork) ? NetworkUnavailable() : nil
    }

    /// A provider's error that says the device had no network to reach it.
    static func foundNoNetwork(_ error: any Error) -> Bool {
        if let error = error as? HTTPEngineError { return error.networkUnavailable != nil }
        guard let errno = (error as? IOError)?.errnoCode else { return false }
        return errno == ENETUNREACH || errno == ENETDOWN
    }
}

/// A lookup failure that keeps the error of each provider it asked (the resolver's `ResolverError`), for
/// the engine to judge whether the device had a network (`NetworkUnavailable.judge(lookupFailure:)`).
package protocol ProviderFailures: Error {
    /// Each provider's own error, in the order they were asked.
    var providerErrors: [any Error] { get }
}
