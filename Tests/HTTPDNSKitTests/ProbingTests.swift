// Active probing through the front door, hermetic: one name with two addresses, both our own HTTPS
// service, one of them behind a relay that holds every chunk 150 ms each way (a far path whose TCP
// handshake completes at once, as a middlebox's would). The resolver gives the far address first.

import Foundation
@testable import HTTPDNSDemoPKI
@testable import HTTPDNSKit
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOCore
import Testing

@Suite struct ProbingTests {
    /// The origin on 127.0.0.1, the far relay on 127.0.0.2 at the same port, the CA's file, and a DNS
    /// server answering every name with the far address first.
    struct Setup {
        let origin: HTTPDNSService
        let relay: FlakyRelay
        let dns: DNSServer
        let caFile: String
        var url: String { "https://probe.test:\(origin.ports[0])" }

        static func start() async throws -> Setup {
            let pki = try DemoPKI()
            let (chain, key) = try pki.leaf("probe.test")
            // The relay needs the origin's port number on 127.0.0.2.
            let (origin, relay) = try await onOnePort(
                { port in
                    try await startService {
                        $0.listen = [("127.0.0.1", port)]
                        $0.tls = .init(chain: [chain], key: key)
                    }
                },
                port: { $0.ports[0] },
                { port in
                    try await FlakyRelay.start(
                        to: try SocketAddress(ipAddress: "127.0.0.1", port: port),
                        faults: [],
                        latency: .milliseconds(150),
                        host: "127.0.0.2",
                        port: port
                    )
                },
                release: { await $0.stop() }
            )
            let port = origin.ports[0]
            let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("probe-ca-\(port).pem").path
            try pki.caPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
            let dns = try await startDNS(["127.0.0.2", "127.0.0.1"])
            return Setup(origin: origin, relay: relay, dns: dns, caFile: caFile)
        }

        func httpdns(probing: Bool) throws -> HTTPDNS {
            var configuration = HTTPDNS.Configuration(
                resolvers: [try ResolverSpec(parsing: "dns:127.0.0.1:\(dns.port)")],
                policy: try HostPolicy(only: ["*.test"])
            )
            // Not a test of timeouts: a bound a starved 2-core machine cannot miss.
            configuration.timeouts.lookup = .seconds(60)
            configuration.tls.trustedCertificateFiles = [caFile]
            configuration.network.probing = probing ? AddressProbing() : nil
            return try HTTPDNS(configuration)
        }

        func stop() async {
            await relay.close()
            await dns.stop()
            await origin.stop()
            try? FileManager.default.removeItem(atPath: caFile)
        }
    }

    func firstRequest(_ httpdns: HTTPDNS, _ url: String) async throws -> String? {
        let response = try await httpdns.engine.send(try HTTPEngineRequest(url: "\(url)/healthz"))
        _ = try await response.body.collect(upTo: 1 << 16)
        #expect(response.status == .ok)
        return response.metrics.ip
    }

    @Test func withProbingTheFirstRequestGoesToTheFastAddress() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }

        // Without probing: the far address is first and its connect completes at once, so it is used.
        let plain = try setup.httpdns(probing: false)
        await plain.preResolve([setup.url])
        #expect(try await firstRequest(plain, setup.url) == "127.0.0.2")
        await plain.shutdown()
        let relayed = setup.relay.accepted

        // With probing: pre-resolving waits for the probes, and the first request goes to the fast one.
        let probing = try setup.httpdns(probing: true)
        await probing.preResolve([setup.url])
        #expect(setup.relay.accepted == relayed + 1, "the far address was probed once")
        #expect(try await firstRequest(probing, setup.url) == "127.0.0.1")
        #expect(setup.relay.accepted == relayed + 1, "the request went through the relay")

        // Results are per network: on another, the addresses are probed again.
        probing.networkChanged(to: "cellular-1")
        await probing.preResolve([setup.url])
        #expect(setup.relay.accepted == relayed + 2)
        // Within their lifetime on this network, they are not.
        await probing.preResolve([setup.url])
        #expect(setup.relay.accepted == relayed + 2)
        await probing.shutdown()
    }
}
