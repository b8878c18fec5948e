@testable import HTTPDNSTestSupport
import HTTPDNSCore
import HTTPDNSLookup
import HTTPDNSServer
import NIOCore
import NIOPosix
import Testing

@Suite struct NIOResolverTests {
    @Test func anyClientBootstrapConnectsToTheHTTPDNSAnswer() async throws {
        // The trusted resolver says where the name lives; a plain TCP server listens there.
        let target = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { target.close(promise: nil) }
        let trusted = try await startDNS(["127.0.0.1"])
        let hijacker = try await startDNS(["127.0.0.66"])
        defer {
            Task {
                await trusted.stop(); await hijacker.stop()
            }
        }
        let resolver = makeResolver([try do53(trusted)], local: try do53(hijacker)) {
            $0.fallbackToLocalDNS = false
            $0.timeout = .seconds(60)  // not a test of timeouts: a bound a starved machine cannot miss
        }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let channel = try await ClientBootstrap(group: loop)
            .connectTimeout(.seconds(60))  // the lookup is part of the connect; NIO's default is 10 s
            .resolver(HTTPDNSNIOResolver(resolver, eventLoop: loop))
            .connect(host: "service.test", port: target.localAddress!.port!).get()
        #expect(channel.remoteAddress?.ipAddress == "127.0.0.1")
        try await channel.close()
        // Through HTTPDNS (A, and AAAA unless happy eyeballs had already connected), never LocalDNS.
        #expect(trusted.queries.udp >= 1)
        #expect(hijacker.queries.udp == 0)
    }

    @Test func unresolvableNameFailsTheConnect() async throws {
        let trusted = try await startDNS(["127.0.0.1"])
        defer { Task { await trusted.stop() } }
        let resolver = makeResolver([try do53(trusted)]) { $0.fallbackToLocalDNS = false }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        await #expect(throws: (any Error).self) {
            _ = try await ClientBootstrap(group: loop)
                .resolver(HTTPDNSNIOResolver(resolver, eventLoop: loop))
                .connect(host: "nx.service.test", port: 9).get()
        }
    }
}
