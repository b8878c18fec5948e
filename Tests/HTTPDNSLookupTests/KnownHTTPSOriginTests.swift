// http:// to a known https origin goes straight to https (issue 71, item 5): an https origin that sent
// Strict-Transport-Security is reached over https when the app asks for http://, on the same port (RFC
// 6797 §8.3: a port other than 80 stays), before and after a relaunch (the policy is saved with the
// resolver's cache); a host the engine keeps on http is not. The origin listens with TLS only, so an
// http:// request that were sent as it is would fail.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSDemoPKI
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
import NIOCore
import NIOSSL
import Testing

@Suite struct KnownHTTPSOriginTests {
    struct World {
        var origin: HTTPListener
        var dns: DNSServer
        var ca: String
        var folder: String

        func stop() async {
            await origin.stop()
            await dns.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }

        /// A resolver saving its cache to this world's file, and an engine through it.
        func client(keepHTTP: [String] = []) throws -> (HTTPDNSResolver, HTTPEngine) {
            let resolver = makeResolver([try do53(dns)]) { $0.persistencePath = folder + "/cache.json" }
            var config = HTTPEngine.Configuration()
            config.tls = HTTPEngineTLS(additionalTrustRoots: try HTTPEngineTLS.loadPEM(file: ca))
            config.http.keepHTTP = keepHTTP
            return (resolver, try HTTPEngine(configuration: config, addressSource: resolver, path: resolver.path))
        }
    }

    func world() async throws -> World {
        let pki = try DemoPKI()
        let (certificate, key) = try pki.leaf("hsts.test")
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate)],
            privateKey: .privateKey(key)
        )
        tls.applicationProtocols = ["http/1.1"]
        let origin = try await HTTPListener.start(
            host: "127.0.0.1",
            port: 0,
            tls: try NIOSSLContext(configuration: tls),
            limits: HTTPListener.Limits(),
            logger: testLogger
        ) { _ in
            ListenerResponse(status: .ok, text: "secure", headers: ["strict-transport-security": "max-age=600"])
        }
        let folder = NSTemporaryDirectory() + "hsts-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let ca = folder + "/ca.pem"
        try pki.caPEM.write(toFile: ca, atomically: true, encoding: .utf8)
        return World(origin: origin, dns: try await startDNS(["127.0.0.1"]), ca: ca, folder: folder)
    }

    @Test func anHTTPRequestToAHostThatAskedForHSTSGoesStraightToHTTPS() async throws {
        let w = try await world()
        let (resolver, engine) = try w.client()
        let port = w.origin.port
        // Unknown yet: sent as http:// to a TLS-only port, it fails.
        await #expect(throws: (any Error).self) { _ = try await rawGet(engine, "http://hsts.test:\(port)/") }
        let (status, _) = try await rawGet(engine, "https://hsts.test:\(port)/")
        #expect(status == 200)
        // Now known: the http:// URL is sent over https, on the port it names.
        let response = try await engine.execute(try HTTPEngineRequest(url: "http://hsts.test:\(port)/x"))
        _ = try await response.body.collect(upTo: 1 << 16)
        #expect(response.status == .ok)
        #expect(response.url.description == "https://hsts.test:\(port)/x")
        engine.shutdown()
        try resolver.persist()

        // A relaunch: the cache file says so before any https response.
        let (_, relaunched) = try w.client()
        let (again, _) = try await rawGet(relaunched, "http://hsts.test:\(port)/")
        #expect(again == 200)
        relaunched.shutdown()
        // A host the engine keeps on http is sent as it is (and fails here).
        let (_, keeping) = try w.client(keepHTTP: ["hsts.test"])
        await #expect(throws: (any Error).self) { _ = try await rawGet(keeping, "http://hsts.test:\(port)/") }
        keeping.shutdown()
        await w.stop()
    }
}

/// A source that knows one https origin by HSTS and one by its HTTPS records.
private struct KnownOrigins: AddressSource {
    func addresses(for host: String, deadline: NIODeadline?) async throws -> ResolvedAddresses {
        throw HTTPEngineError(.nameNotResolved, "not asked")
    }
    var keepsStrictTransportSecurity: Bool { true }
    func knownHTTPSOrigin(_ host: String, byRecords: Bool) -> Bool {
        host == "hsts.test" || (byRecords && host == "records.test")
    }
}

@Suite struct HTTPSUpgradeRuleTests {
    func engine(keepHTTP: [String] = []) throws -> HTTPEngine {
        var config = HTTPEngine.Configuration()
        config.http.keepHTTP = keepHTTP
        return try HTTPEngine(configuration: config, addressSource: KnownOrigins())
    }

    @Test func hstsUpgradesAnyPortAndAnHTTPSRecordOnlyPort80() throws {
        let e = try engine()
        defer { e.shutdown() }
        func upgraded(_ url: String) throws -> String? { e.httpsUpgrade(of: try HTTPURL(url))?.description }
        #expect(try upgraded("http://hsts.test/a?b") == "https://hsts.test/a?b")
        #expect(try upgraded("http://hsts.test:8080/") == "https://hsts.test:8080/")
        #expect(try upgraded("http://records.test/") == "https://records.test/")
        #expect(try upgraded("http://records.test:8080/") == nil)
        #expect(try upgraded("http://other.test/") == nil)
        #expect(try upgraded("https://hsts.test/") == nil)
        #expect(try upgraded("http://127.0.0.1/") == nil)
    }

    @Test func keepHTTPKeepsAHostOnHTTP() throws {
        let e = try engine(keepHTTP: ["*.test"])
        defer { e.shutdown() }
        #expect(e.httpsUpgrade(of: try HTTPURL("http://hsts.test/")) == nil)
        #expect(throws: (any Error).self) { _ = try self.engine(keepHTTP: ["not a pattern!"]) }
    }
}
