// The process's descriptor limit, for `serve` and `proxy` (DescriptorBudget.swift says why): the soft
// limit is raised to the hard one, and the descriptors already open are counted.

import Foundation
import HTTPDNSServer
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

enum DescriptorLimit {
    /// Raises the soft RLIMIT_NOFILE to the hard one (at most 1,048,576), then returns the budget, with
    /// `opening` more counted as in use (the listeners about to be opened); nil where the limit cannot be
    /// read. The event loops are made first, so their descriptors are counted.
    static func budget(opening: Int) -> DescriptorBudget? {
        _ = MultiThreadedEventLoopGroup.singleton.next()
        var limits = rlimit()
        #if canImport(Glibc)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limits) == 0 else { return nil }
        let ceiling = rlim_t(1 << 20)
        let wanted = min(limits.rlim_max, ceiling)
        if limits.rlim_cur < wanted {
            var raised = limits
            raised.rlim_cur = wanted
            if setrlimit(resource, &raised) == 0 { limits = raised }
        }
        // Open now: /proc/self/fd lists them on Linux; elsewhere a generous guess.
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 64
        return DescriptorBudget(limit: Int(min(limits.rlim_cur, ceiling)), inUse: open + opening)
    }
}
