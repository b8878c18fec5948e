// Stack detection without sending a packet, as the vendors' SDKs do: a UDP socket connected to a
// global address of each family. connect() on UDP only picks a route and a source address; it fails
// at once (ENETUNREACH) for a family with no route.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import HTTPDNSCore
import NIOCore

extension RouteProbe {
    /// Global addresses to aim at (public DNS anycast; nothing is sent to them).
    static let targets = (ipv4: IPAddress("8.8.8.8")!, ipv6: IPAddress("2001:4860:4860::8888")!)

    /// Which families have a route now, and the source address of each.
    package static func current() -> RouteProbe {
        RouteProbe(ipv4Source: source(towards: targets.ipv4), ipv6Source: source(towards: targets.ipv6))
    }

    /// The local address the kernel would send from to reach `target`; nil without a route.
    static func source(towards target: IPAddress) -> IPAddress? {
        guard let remote = try? SocketAddress(ipAddress: target.description, port: 53) else { return nil }
        #if canImport(Darwin)
            let fd = socket(Int32(remote.protocol.rawValue), SOCK_DGRAM, 0)
        #else
            let fd = socket(Int32(remote.protocol.rawValue), Int32(SOCK_DGRAM.rawValue), 0)
        #endif
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let connected = remote.withSockAddr { connect(fd, $0, socklen_t($1)) }
        guard connected == 0 else { return nil }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return nil }
        return withUnsafePointer(to: &storage) { p -> IPAddress? in
            switch Int32(p.pointee.ss_family) {
            case AF_INET:
                return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin_addr) { IPAddress(bytes: $0) }
                }
            case AF_INET6:
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin6_addr) { IPAddress(bytes: $0) }
                }
            default:
                return nil
            }
        }
    }
}
