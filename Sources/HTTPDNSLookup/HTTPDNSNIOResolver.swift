// Plugs the HTTPDNS resolver into any SwiftNIO ClientBootstrap:
//
//     ClientBootstrap(group: group).resolver(HTTPDNSNIOResolver(resolver, eventLoop: loop))
//         .connect(host: "api.example.com", port: 443)
//
// NIO's happy-eyeballs connector then asks for A and AAAA through HTTPDNS (cache, policy, fallback
// as configured) and races the addresses per RFC 8305. For code that builds its own bootstraps (gRPC,
// database drivers, a proxy) without going through the engine.

import HTTPDNSCore
import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A NIO `Resolver` backed by `HTTPDNSResolver`. One instance serves one connect (NIO's contract:
/// `cancelQueries` applies to the queries of this instance).
package final class HTTPDNSNIOResolver: Resolver, Sendable {
    let resolver: HTTPDNSResolver
    let eventLoop: any EventLoop
    let tasks = NIOLockedValueBox<[Task<Void, Never>]>([])

    package init(_ resolver: HTTPDNSResolver, eventLoop: any EventLoop) {
        self.resolver = resolver
        self.eventLoop = eventLoop
    }

    package func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        query(host, port, .ipv4)
    }

    package func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        query(host, port, .ipv6)
    }

    package func cancelQueries() {
        let running = tasks.withLockedValue { t -> [Task<Void, Never>] in
            defer { t.removeAll() }
            return t
        }
        running.forEach { $0.cancel() }
    }

    /// An empty list for "no such address" (NIO then relies on the other family); a failure when
    /// resolution failed, so NIO's error names the cause.
    private func query(_ host: String, _ port: Int, _ family: AddressQuery) -> EventLoopFuture<[SocketAddress]> {
        let promise = eventLoop.makePromise(of: [SocketAddress].self)
        let resolver = self.resolver
        let task = Task {
            do {
                let r = try await resolver.resolve(host, family)
                // On an IPv6-only network with NAT64 the A answer is connected to through its
                // synthesized IPv6 form (NIO connects to whatever address either query gives).
                let ips = family == .ipv4 ? await resolver.path.connectable(ipv4: r.ipv4, ipv6: []) : nil
                promise.succeed(
                    try (ips.map { $0.ipv4 + $0.ipv6 } ?? r.ipv6).map {
                        try SocketAddress(ipAddress: $0.description, port: port)
                    }
                )
            } catch let e as ResolverError where e.code == .noAddress {
                promise.succeed([])
            } catch {
                promise.fail(error)
            }
        }
        tasks.withLockedValue { $0.append(task) }
        return promise.futureResult
    }
}
