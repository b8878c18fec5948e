// Pre-connect through the front door, hermetic: a classic DNS server and our own service as the origin
// (it keeps connections alive), behind a relay that counts the connections it accepts.

import NIOCore
import Testing

@testable import HTTPDNSKit
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools

@Suite struct PreconnectTests {
    @Test func thePreconnectedConnectionServesTheFirstRequest() async throws {
        let origin = try await startService()
        let relay = try await FlakyRelay.start(
            to: try SocketAddress(ipAddress: "127.0.0.1", port: origin.ports[0]),
            faults: []
        )
        try await withHTTPDNS { httpdns in
            let failed = await httpdns.preconnect(["http://app.test:\(relay.port)"])
            #expect(failed.isEmpty)
            // The client's connect completes when the kernel accepts; the relay counts it when its loop
            // runs, which on a starved machine is later: wait for that event.
            try await eventually("the relay accepted the pre-connection") { relay.accepted == 1 }
            // Asked again with the connection open: nothing new.
            #expect(await httpdns.preconnect(["http://app.test:\(relay.port)/any/path"]).isEmpty)
            let response = try await httpdns.engine.send(
                try HTTPEngineRequest(url: "http://app.test:\(relay.port)/healthz")
            )
            #expect(response.status == .ok)
            _ = try await response.body.collect(upTo: 1 << 16)
            #expect(relay.accepted == 1, "the first request opened a connection of its own")
            #expect(response.metrics.ip == "127.0.0.1")
            // It paid no lookup, connect or handshake: its metrics say so, as for any reused connection.
            #expect(response.metrics.reused)
            #expect(response.metrics.connect == nil)
            // On a network change the connection in use is made again, on the new network.
            httpdns.networkChanged(to: "cellular-1")
            try await eventually("the pre-connected host was connected again") { relay.accepted == 2 }
        }
        await relay.close()
        await origin.stop()
    }

    /// An app that makes HTTPDNS after its user's consent and turns `connectsResolverAtStart` on: the
    /// resolver's connection is opened then, and the first lookup is one exchange on it, not a connect
    /// and a handshake first. By default, making HTTPDNS opens nothing.
    @Test func theResolversConnectionIsOpenedAtCreationAndCarriesTheFirstLookup() async throws {
        let service = try await startService()
        let relay = try await FlakyRelay.start(
            to: try SocketAddress(ipAddress: "127.0.0.1", port: service.ports[0]),
            faults: []
        )
        func configuration(_ policy: HostPolicy) throws -> HTTPDNS.Configuration {
            var configuration = HTTPDNS.Configuration(
                resolvers: [try ResolverSpec(parsing: "doh:http://127.0.0.1:\(relay.port)/dns-query")],
                policy: policy
            )
            configuration.timeouts.lookup = .seconds(60)  // not a test of timeouts (a starved machine)
            configuration.connectsResolverAtStart = true
            return configuration
        }
        let httpdns = try HTTPDNS(try configuration(try HostPolicy(only: ["*.example.com"])))
        try await httpdns.resolverConnected()
        try await eventually("the relay accepted the resolver's connection") { relay.accepted == 1 }
        // One family: over HTTP/1.1 (this service's plain http) two queries at once take two connections;
        // a DoH server speaking h2 carries both on the one.
        let answer = try await httpdns.resolver.resolve("v4.example.com", .ipv4)
        #expect(answer.ipv4 == [IPAddress("198.51.0.2")!])
        #expect(relay.accepted == 1, "the first lookup opened a connection of its own")
        await httpdns.shutdown()

        // An embedded library whose app has not chosen a policy, or an app that turned it off, opens
        // nothing.
        let unconfigured = try HTTPDNS(try configuration(.none))
        #expect(unconfigured.resolverWarmUp == nil)
        await unconfigured.shutdown()
        var off = try configuration(try HostPolicy(only: ["*.example.com"]))
        off.connectsResolverAtStart = false
        let switchedOff = try HTTPDNS(off)
        #expect(switchedOff.resolverWarmUp == nil)
        await switchedOff.shutdown()
        // The default: nothing goes out when HTTPDNS is made (an app at launch, before its user's
        // consent), whatever its policy selects.
        let byDefault = try HTTPDNS(
            HTTPDNS.Configuration(
                resolvers: [try ResolverSpec(parsing: "doh:http://127.0.0.1:\(relay.port)/dns-query")],
                policy: try HostPolicy(only: ["*"])
            )
        )
        #expect(byDefault.resolverWarmUp == nil)
        await byDefault.shutdown()
        // A warm-up still on its way when the app shuts HTTPDNS down is cancelled.
        let warming = try HTTPDNS(try configuration(try HostPolicy(only: ["*.example.com"])))
        await warming.shutdown()
        #expect(warming.resolverWarmUp?.isCancelled == true)
        await relay.close()
        await service.stop()
    }

    @Test func anOriginThatCannotBeReachedIsReportedNotThrown() async throws {
        try await withHTTPDNS { httpdns in
            let failed = await httpdns.preconnect(["nx.app.test", "ftp://app.test/"])
            #expect(failed["nx.app.test"]?.code == .nameNotResolved)
            #expect(failed["ftp://app.test/"]?.code == .invalidRequest)
        }
    }
}
