// How many connections and upstream lookups `serve` (and the proxy) can hold without running out of
// descriptors. A process that runs out fails in code it does not control: on Linux, libdispatch's thread
// pool monitor opens /proc/self/task/TID/stat and crashes the process when it cannot (seen here: SIGILL
// in `_dispatch_workq_monitor_pools` under `ulimit -n 64`, about one flood in five). Failing accepts
// and sockets gracefully is not enough, so the servers never plan to use every descriptor: they raise
// the soft limit to the hard one at start (as Go and HAProxy do), and fit their bounds into what is left
// after a reserve, saying so when that is less than asked (as HAProxy derives maxconn from ulimit -n,
// where nginx only warns).

import HTTPDNSEngine
import HTTPDNSListener

/// The descriptors a process may still open, and the bounds that fit in them. Pure.
package struct DescriptorBudget: Equatable, Sendable {
    /// The process's limit (RLIMIT_NOFILE, soft).
    package var limit: Int
    /// Descriptors open when the budget was taken (listeners, event loops, standard streams…).
    var inUse: Int

    package init(limit: Int, inUse: Int) {
        self.limit = limit
        self.inUse = inUse
    }

    /// Kept free for everything else the process opens: files, the runtime's own, a connection being
    /// closed while its successor is accepted.
    var reserve: Int { max(16, limit / 20) }

    /// What the bounds may use.
    var available: Int { max(0, limit - inUse - reserve) }

    /// `serve`: a connection holds one descriptor, an upstream lookup up to two (a UDP socket per
    /// family), and the listener its headroom besides its connections (newcomers waiting, connections
    /// being closed: `ConnectionLimiter.headroom`). The bounds as asked when they fit; else smaller ones
    /// that do: upstream lookups take at most an eighth of what is available, connections the rest.
    package func fitServe(maxConnections: Int, maxUpstreamLookups: Int) -> (connections: Int, upstreamLookups: Int) {
        guard Self.listenerCost(maxConnections, perConnection: 1) + 2 * maxUpstreamLookups > available else {
            return (maxConnections, maxUpstreamLookups)
        }
        let lookups = maxUpstreamLookups == 0 ? 0 : max(1, min(maxUpstreamLookups, available / 8))
        return (Self.fit(maxConnections, perConnection: 1, into: available - 2 * lookups), lookups)
    }

    /// The proxy: a connection holds up to two descriptors (the client's, and its tunnel's or the
    /// forwarded request's); the listener's headroom one each.
    package func fitProxy(maxConnections: Int) -> Int {
        Self.fit(maxConnections, perConnection: 2, into: available)
    }

    /// Descriptors a listener of `connections` holds at most.
    private static func listenerCost(_ connections: Int, perConnection: Int) -> Int {
        perConnection * connections + ConnectionLimiter.headroom(limit: connections)
    }

    /// The most connections, at most `asked` and at least 1, whose listener fits into `room`.
    private static func fit(_ asked: Int, perConnection: Int, into room: Int) -> Int {
        var connections = max(1, min(asked, room / perConnection))
        while connections > 1, listenerCost(connections, perConnection: perConnection) > room {
            // The headroom grows by at most one for every 8 connections: this lands in a few steps.
            let excess = listenerCost(connections, perConnection: perConnection) - room
            connections = max(1, connections - max(1, excess / perConnection))
        }
        // The steps may overshoot by the headroom they took off: take back what fits.
        while connections < asked, listenerCost(connections + 1, perConnection: perConnection) <= room {
            connections += 1
        }
        return connections
    }
}
