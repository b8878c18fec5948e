// Apple platforms: NWPathMonitor reports every path update. UNVERIFIED HERE: this project is built and
// tested on Linux, where Network.framework does not exist; this file is kept minimal on purpose.

#if canImport(Network)
    import Dispatch
    import Network

    /// The process's monitor: an NWPathMonitor stops reporting once nothing holds it.
    nonisolated(unsafe) private var pathMonitor: NWPathMonitor?

    /// Starts a process-wide NWPathMonitor whose every update is a notice (called once, under
    /// RouteNotices' lock).
    func startPlatformSource(_ notice: @escaping @Sendable () -> Void) -> Bool {
        let monitor = NWPathMonitor()
        monitor.pathUpdateHandler = { _ in notice() }
        monitor.start(queue: DispatchQueue(label: "httpdns.path-monitor"))
        pathMonitor = monitor
        return true
    }
#endif
