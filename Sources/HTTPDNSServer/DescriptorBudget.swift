// How many connections and upstream lookups `serve` (and the proxy) can hold without running out of
// descriptors. A process that runs out fails in code it does not control: on Linux, libdispatch's thread
// pool monitor opens /proc/self/task/TID/stat and crashes the process when it cannot (seen here: SIGILL
// in `_dispatch_workq_monitor_pools` under `ulimit -n 64`, about one flood in five). Failing accepts
// and sockets gracefully is not enough, so the servers never plan to use every descriptor: they raise
// the soft limit to the hard one at start (as Go and HAProxy do), and fit their bounds into what is left
// after a reserve, saying so when that is less than asked (as HAProxy derives maxconn from ulimit -n,
// where nginx only warns).

/// The descriptors a process may still open, and the bounds that fit in them. Pure.
package struct DescriptorBudget: Equatable, Sendable {
    /// The process's limit (RLIMIT_NOFILE, soft).
    package var limit: Int
    /// Descriptors open when the budget was taken (listeners, event loops, standard streams…).
    package var inUse: Int

    package init(limit: Int, inUse: Int) {
        self.limit = limit
        self.inUse = inUse
    }

    /// Kept free for everything else the process opens: files, the runtime's own, a connection being
    /// closed while its successor is accepted.
    package var reserve: Int { max(16, limit / 20) }

    /// What the bounds may use.
    package var available: Int { max(0, limit - inUse - reserve) }

    /// `serve`: a connection holds one descriptor, an upstream lookup up to two (a UDP socket per
    /// family). The bounds as asked when they fit; else smaller ones that do: upstream lookups take at
    /// most an eighth of what is available, connections the rest.
    package func fitServe(maxConnections: Int, maxUpstreamLookups: Int) -> (connections: Int, upstreamLookups: Int) {
        guard maxConnections + 2 * maxUpstreamLookups > available else { return (maxConnections, maxUpstreamLookups) }
        let lookups = maxUpstreamLookups == 0 ? 0 : max(1, min(maxUpstreamLookups, available / 8))
        return (max(1, min(maxConnections, available - 2 * lookups)), lookups)
    }

    /// The proxy: a connection holds up to two descriptors (the client's, and its tunnel's or the
    /// forwarded request's).
    package func fitProxy(maxConnections: Int) -> Int {
        max(1, min(maxConnections, available / 2))
    }
}
