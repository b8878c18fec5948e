// The system encrypted-DNS mode's executor through the front door, hermetic: our DoH service (TLS, a
// private CA), stopped and started again on the same port by the test, health-checked by real DoH
// queries. Only the applier is the test's: the privacy context it drives on Apple platforms does not
// exist here, so it records what it is told.

import Foundation
@testable import HTTPDNSDemoPKI
@testable import HTTPDNSKit
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import Testing

@Suite struct SystemEncryptedDNSTests {
    /// What the applier was told, in order.
    final class Applied: Sendable {
        let modes = NIOLockedValueBox<[EncryptedDNSMode]>([])
        let servers = NIOLockedValueBox<[(URL, [IPAddress])]>([])
        var last: EncryptedDNSMode? { modes.withLockedValue { $0.last } }
        var count: Int { modes.withLockedValue { $0.count } }

        func applier(_ url: URL, _ addresses: [IPAddress]) -> SystemEncryptedDNS.Apply {
            servers.withLockedValue { $0.append((url, addresses)) }
            return { mode in self.modes.withLockedValue { $0.append(mode) } }
        }
    }

    func settings(port: Int) -> EncryptedDNSSettings {
        var settings = EncryptedDNSSettings(
            url: URL(string: "https://doh.test:\(port)/dns-query"),
            serverAddresses: ["127.0.0.1"]
        )
        settings.checkName = "a.example.com"
        // The first check's TLS handshake to a debug-built server on a busy 2-core machine can take
        // seconds; a check that timed out would tell the system `.system` first, and every order below
        // would be off by one. The checks that must fail here fail at once (connection refused), so a
        // generous bound costs nothing.
        settings.checkTimeout = .seconds(60)
        settings.checkInterval = .milliseconds(50)
        settings.failuresBeforeFallback = 2
        settings.retryAfter = .milliseconds(20)
        settings.confirmAfter = .milliseconds(20)
        settings.maximumRetryAfter = .milliseconds(50)
        return settings
    }

    @Test func theServerIsUsedWhileHealthyAndTheSystemResolverComesBackWhileItIsDown() async throws {
        let pki = try DemoPKI()
        let (chain, key) = try pki.leaf("doh.test")
        var service = try await startService { $0.tls = .init(chain: [chain], key: key) }
        let port = service.ports[0]
        let caFile = FileManager.default.temporaryDirectory.appendingPathComponent("edns-ca-\(port).pem").path
        try pki.caPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        var configuration = HTTPDNS.Configuration(resolvers: [])
        configuration.tls.trustedCertificateFiles = [caFile]
        let httpdns = try HTTPDNS(configuration)
        let applied = Applied()

        let mode = try httpdns.startSystemEncryptedDNS(settings(port: port), applier: applied.applier)
        let told = NIOLockedValueBox<[EncryptedDNSMode]>([])
        mode.onChange { changed in told.withLockedValue { $0.append(changed) } }
        #expect(mode.url.absoluteString == "https://doh.test:\(port)/dns-query")
        #expect(mode.serverAddresses == [IPAddress("127.0.0.1")!])
        try await eventually("the first check points the system at the server") { applied.last == .encrypted }
        #expect(applied.modes.withLockedValue { $0 } == [.encrypted])
        #expect(mode.mode == .encrypted)

        // The server goes away: two failed checks give the system's resolver back.
        await service.stop()
        try await eventually("the system's resolver comes back") { applied.last == .system }
        #expect(applied.modes.withLockedValue { $0 } == [.encrypted, .system])

        // It comes back on the same port: the next check points the system at it again.
        service = try await startService {
            $0.tls = .init(chain: [chain], key: key)
            $0.listen = [("127.0.0.1", port)]
        }
        try await eventually("the server is used again") { applied.last == .encrypted }
        #expect(applied.modes.withLockedValue { $0 } == [.encrypted, .system, .encrypted])

        // Off: the system's resolver, once, and no check changes it after.
        mode.stop()
        #expect(applied.modes.withLockedValue { $0 } == [.encrypted, .system, .encrypted, .system])
        #expect(mode.mode == .system)
        // The app's handlers heard the same, in the same order.
        #expect(told.withLockedValue { $0 } == [.encrypted, .system, .encrypted, .system])

        await httpdns.shutdown()
        await service.stop()
        try? FileManager.default.removeItem(atPath: caFile)
    }

    @Test func aServerDownAtStartNeverTakesResolutionAway() async throws {
        // A port nothing listens on: a relay opened and closed.
        let closed = try await FlakyRelay.start(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9), faults: [])
        let port = closed.port
        await closed.close()
        let httpdns = try HTTPDNS(HTTPDNS.Configuration(resolvers: []))
        let applied = Applied()
        let mode = try httpdns.startSystemEncryptedDNS(settings(port: port), applier: applied.applier)
        // A handler that turns the mode off as soon as it hears of a fall-back (no deadlock).
        mode.onChange { _ in mode.stop() }
        try await eventually("the first check fails") { applied.count > 0 }
        #expect(applied.modes.withLockedValue { $0 } == [.system])
        mode.stop()
        #expect(applied.modes.withLockedValue { $0 } == [.system])
        await httpdns.shutdown()
    }

    @Test func theServerComesFromTheConfigurationAndBadSettingsAreRefused() async throws {
        var configuration = HTTPDNS.Configuration(
            resolvers: [try ResolverSpec(parsing: "doh:https://doh.example:8443/dns-query")],
            policy: try HostPolicy(only: ["*.test"])
        )
        configuration.bootstrap = ["doh.example": [IPAddress("127.0.0.9")!]]
        let httpdns = try HTTPDNS(configuration)
        let applied = Applied()
        let mode = try httpdns.startSystemEncryptedDNS(EncryptedDNSSettings(), applier: applied.applier)
        #expect(mode.url.absoluteString == "https://doh.example:8443/dns-query")
        #expect(mode.serverAddresses == [IPAddress("127.0.0.9")!])
        mode.stop()

        let refusals: [(EncryptedDNSSettings, String)] = [
            (EncryptedDNSSettings(url: URL(string: "http://127.0.0.1/dns-query")), "https"),
            (EncryptedDNSSettings(url: URL(string: "https://nobody.example/dns-query")), "no address"),
            (
                EncryptedDNSSettings(url: URL(string: "https://doh.example/dns-query"), serverAddresses: ["doh"]),
                "not an IP address"
            ),
        ]
        for (settings, says) in refusals {
            do {
                _ = try httpdns.startSystemEncryptedDNS(settings, applier: applied.applier)
                Issue.record("\(settings) was accepted")
            } catch let error as HTTPDNSConfigurationError {
                #expect(error.code == .invalidResolverSpec)
                #expect(error.message.contains(says), "\(error.message)")
            }
        }
        // No doh: resolver and no URL: nothing to point the system at.
        let plain = try HTTPDNS(resolvers: ["dns:127.0.0.1:53"], only: ["*.test"])
        #expect(throws: HTTPDNSConfigurationError(.invalidResolverSpec, "")) {
            try plain.startSystemEncryptedDNS(EncryptedDNSSettings(), applier: applied.applier)
        }
        await plain.shutdown()
        await httpdns.shutdown()
    }
}
