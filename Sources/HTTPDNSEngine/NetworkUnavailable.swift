// When a failed connect means "no network", not "that server": Apple's URL loading reports it as
// `NSURLErrorNotConnectedToInternet` (-1009), with `networkUnavailableReason` when a network exists but
// the request's rules forbid it (cellular, expensive, Low Data Mode); that reason is what Apple tells apps
// to read before retrying with fewer restrictions. A refused or unreachable server stays
// `.cannotConnectToHost` (-1004).
//
// The rule (pure, NetworkUnavailableTests): the operating system's view of the current path decides
// where it has one (Apple platforms: NWPathMonitor); otherwise a connect whose every attempt failed with
// "network is unreachable" or "network is down" had no network.

import HTTPDNSCore

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

    package init(reason: Reason? = nil) { self.reason = reason }

    /// Whether a connect that failed with `errnos` (one per attempt; empty when the errors were not the
    /// system's) under `access` had no network, given the system's `path` where it reports one.
    package static func judge(errnos: [Int32], path: PathFacts?, access: NetworkAccess) -> NetworkUnavailable? {
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
}
