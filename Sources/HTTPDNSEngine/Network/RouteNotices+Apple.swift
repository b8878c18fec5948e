// Apple platforms: NWPathMonitor reports path updates. COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK
// (scripts/apple-check.sh), NEVER RUN HERE: Network.framework does not exist on Linux. Kept minimal.
//
// The rule is the Linux source's (RouteNotices+Linux.swift): a notice means "something changed since
// the source started". NWPathMonitor also reports the path it finds at start, which is no change, so
// that first update is dropped; every later one is a notice, and the probe decides what changed.

#if canImport(Network)
    import Dispatch
    import HTTPDNSCore
    import Network
    import NIOConcurrencyHelpers

    /// The process's monitor: an NWPathMonitor stops reporting once nothing holds it, so this reference
    /// keeps it for the life of the process (never cancelled, like the Linux reader thread). Written
    /// once, under RouteNotices' lock, and never read.
    nonisolated(unsafe) private var pathMonitor: NWPathMonitor?

    /// Starts a process-wide NWPathMonitor whose every update after the first is a notice (called once,
    /// under RouteNotices' lock).
    func startPlatformSource(_ notice: @escaping @Sendable () -> Void) -> Bool {
        let monitor = NWPathMonitor()
        let sawInitialPath = NIOLockedValueBox(false)
        monitor.pathUpdateHandler = { path in
            platformPathFacts.withLockedValue {
                $0 = PathFacts(
                    satisfied: path.status == .satisfied,
                    cellular: path.usesInterfaceType(.cellular),
                    expensive: path.isExpensive,
                    constrained: path.isConstrained
                )
            }
            let initial = sawInitialPath.withLockedValue { seen -> Bool in
                defer { seen = true }
                return !seen
            }
            if !initial { notice() }
        }
        monitor.start(queue: DispatchQueue(label: "httpdns.path-monitor"))
        pathMonitor = monitor
        return true
    }
#endif
