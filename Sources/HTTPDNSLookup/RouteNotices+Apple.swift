// Apple platforms: NWPathMonitor reports every path update. UNVERIFIED HERE: this project is built and
// tested on Linux, where Network.framework does not exist; this file is kept minimal on purpose.

#if canImport(Network)
    import Dispatch
    import Network

    /// Starts a process-wide NWPathMonitor whose every update is a notice.
    func startPlatformSource(_ notice: @escaping @Sendable () -> Void) -> Bool {
        let monitor = NWPathMonitor()
        monitor.pathUpdateHandler = { _ in notice() }
        monitor.start(queue: DispatchQueue(label: "httpdns.path-monitor"))
        return true
    }
#endif
