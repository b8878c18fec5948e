// Pre-connect through the front door, hermetic: a classic DNS server and our own service as the origin
// (it keeps connections alive), behind a relay that counts the connections it accepts.

import HTTPDNSKit
import NIOCore
import Testing
@testable import HTTPDNSTestSupport

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

    @Test func anOriginThatCannotBeReachedIsReportedNotThrown() async throws {
        try await withHTTPDNS { httpdns in
            let failed = await httpdns.preconnect(["nx.app.test", "ftp://app.test/"])
            #expect(failed["nx.app.test"]?.code == .nameNotResolved)
            #expect(failed["ftp://app.test/"]?.code == .invalidRequest)
        }
    }
}
