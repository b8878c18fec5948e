// rtnetlink: the kernel multicasts a message on every link, address and route change to sockets
// subscribed to the groups below. The messages are not parsed: each read is one notice, and the probe
// that follows looks at the result (see RouteNotices.swift). Read by one blocking thread per process.

#if os(Linux)
    import Foundation
    import Glibc

    // From <linux/netlink.h> and <linux/rtnetlink.h>, which Glibc's module does not export.
    private let netlinkRoute: Int32 = 0  // NETLINK_ROUTE
    private let groups: UInt32 =
        0x1  // RTMGRP_LINK
        | 0x10  // RTMGRP_IPV4_IFADDR
        | 0x40  // RTMGRP_IPV4_ROUTE
        | 0x100  // RTMGRP_IPV6_IFADDR
        | 0x400  // RTMGRP_IPV6_ROUTE

    /// `struct sockaddr_nl`.
    private struct NetlinkAddress {
        var family = sa_family_t(AF_NETLINK)
        var pad: UInt16 = 0
        var pid: UInt32 = 0
        var groups: UInt32 = 0
    }

    /// Opens the rtnetlink socket and starts the thread reading it; false when the kernel refuses
    /// (a sandbox without netlink): the app then feeds its own events.
    func startPlatformSource(_ notice: @escaping @Sendable () -> Void) -> Bool {
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkRoute)
        guard fd >= 0 else { return false }
        var address = NetlinkAddress(groups: groups)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<NetlinkAddress>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            return false
        }
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                // ENOBUFS: the kernel dropped notices because we were slow; that is a change too.
                if n > 0 || (n < 0 && errno == ENOBUFS) {
                    notice()
                } else if n < 0 && errno != EINTR {
                    return  // the socket is gone; notices stop
                }
            }
        }
        thread.name = "httpdns-rtnetlink"
        thread.start()
        return true
    }
#endif
