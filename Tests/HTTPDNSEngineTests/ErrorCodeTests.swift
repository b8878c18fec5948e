// Error codes of the engine, without peers: how codes compare, and which code each TLS failure gets
// against a TLS server on loopback whose certificate is untrusted, for another name, or not pinned.
// The certificates below are a throw-away test CA and an a.test leaf it signed (P-256, valid from
// 2000 to 2100), made with openssl for these tests only.

@testable import HTTPDNSCore
@testable import HTTPDNSEngine
import NIOCore
import NIOPosix
import NIOSSL
import Testing

@Suite struct EngineErrorCodeTests {
    @Test func errorsCompareByCodeOnly() {
        let a = HTTPEngineError(.untrustedCertificate, "one message")
        let b = HTTPEngineError(.untrustedCertificate, "another message")
        #expect(a == b)
        #expect(a != HTTPEngineError(.certificateNameMismatch, "one message"))
        #expect(HTTPEngineError.Code.totalTimeout != .readTimeout)
        #expect(Set<HTTPEngineError.Code>([.tlsFailed, .tlsFailed, .pinMismatch]).count == 2)
        #expect(HTTPEngineError.Code.certificateNameMismatch.description == "certificateNameMismatch")
        #expect(a.description == "one message")
        #expect(a.underlying == nil)
    }

    @Test func shutDownEngineRefusesRequestsWithShutdown() async throws {
        let engine = try HTTPEngine()
        engine.shutdown()
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: "http://127.0.0.1:9/"))
            Issue.record("a shut-down engine sent a request")
        } catch let e as HTTPEngineError {
            #expect(e.code == .shutdown)
        }
    }
}

@Suite struct TLSFailureCodeTests {
    static let caPEM = """
        -----BEGIN CERTIFICATE-----
        MIIBkzCCATigAwIBAgIBATAKBggqhkjOPQQDAjAuMSwwKgYDVQQDDCNzd2lmdC1o
        dHRwZG5zIHRlc3QgQ0EgKGVycm9yIGNvZGVzKTAgFw0wMDAxMDEwMDAwMDBaGA8y
        MTAwMDEwMTAwMDAwMFowLjEsMCoGA1UEAwwjc3dpZnQtaHR0cGRucyB0ZXN0IENB
        IChlcnJvciBjb2RlcykwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQvNDxQKjNn
        CC2ZRuoWvtrYOGCcjW2VV+CB9EqiZ/NKNni77LKLjr27dNHMoQyvqCO/SBVaAC6K
        c5GmQuTkt0eko0UwQzASBgNVHRMBAf8ECDAGAQH/AgEAMA4GA1UdDwEB/wQEAwIB
        BjAdBgNVHQ4EFgQUiGtJiBZlZryDYLy+yiLmZWMHBecwCgYIKoZIzj0EAwIDSQAw
        RgIhAKcojo6ghnkRgsZNpXS9ny4rCBY4Q2QzKzWpC+okqL4QAiEA79UdVEGio9S3
        +a7zec5uqDIPzKSwx2xo+DOERRYBrrk=
        -----END CERTIFICATE-----
        """

    /// Issued by the CA above for a.test only (DNS SAN, serverAuth).
    static let leafPEM = """
        -----BEGIN CERTIFICATE-----
        MIIBuTCCAWCgAwIBAgIBAjAKBggqhkjOPQQDAjAuMSwwKgYDVQQDDCNzd2lmdC1o
        dHRwZG5zIHRlc3QgQ0EgKGVycm9yIGNvZGVzKTAgFw0wMDAxMDEwMDAwMDBaGA8y
        MTAwMDEwMTAwMDAwMFowETEPMA0GA1UEAwwGYS50ZXN0MFkwEwYHKoZIzj0CAQYI
        KoZIzj0DAQcDQgAEJlAnJDIuIOiURhmSm48JHLNLJzH2Qk57jikAXX4ydIbses5h
        x4WHxqxrmwLWYoJIVuIH1R0d3us/qPTd2v4BOaOBiTCBhjAMBgNVHRMBAf8EAjAA
        MA4GA1UdDwEB/wQEAwIHgDATBgNVHSUEDDAKBggrBgEFBQcDATARBgNVHREECjAI
        ggZhLnRlc3QwHQYDVR0OBBYEFOt0CWhTGZzr4CyhAth8wuy/AA39MB8GA1UdIwQY
        MBaAFIhrSYgWZWa8g2C8vsoi5mVjBwXnMAoGCCqGSM49BAMCA0cAMEQCIDJjzxPk
        piZESbbkvZGDQYAUFz9nyDq90FbeFI7lbqujAiBVGhaU8xg1QMn0pt/hHoqTjsmN
        +o8tXRP+UAgBJos9dg==
        -----END CERTIFICATE-----
        """

    static let leafKeyPEM = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgepOBsJDuPdLKFHAT
        EMLuDWK4Cec9fTvfWBxkfmtrFJehRANCAAQmUCckMi4g6JRGGZKbjwkcs0snMfZC
        TnuOKQBdfjJ0hux6zmHHhYfGrGubAtZigkhW4gfVHR3e6z+o9N3a/gE5
        -----END PRIVATE KEY-----
        """

    /// A TLS server on 127.0.0.1 presenting the a.test certificate; it never answers HTTP (every case
    /// here fails in or right after the handshake).
    static func startTLSServer() async throws -> any Channel {
        let leaf = try NIOSSLCertificate(bytes: Array(leafPEM.utf8), format: .pem)
        let key = try NIOSSLPrivateKey(bytes: Array(leafKeyPEM.utf8), format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(leaf)],
            privateKey: .privateKey(key)
        )
        tls.applicationProtocols = ["http/1.1"]
        let context = try NIOSSLContext(configuration: tls)
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// The engine's error for `https://host:port/` with `host` resolved to the server's address.
    static func failure(host: String, tls: HTTPEngineTLS, fastOpen: Bool = false) async throws -> HTTPEngineError? {
        let server = try await startTLSServer()
        defer { server.close(promise: nil) }
        var configuration = HTTPEngine.Configuration()
        configuration.tls = tls
        configuration.network.tcpFastOpen = fastOpen
        configuration.timeouts.tlsHandshake = .seconds(5)
        let engine = try HTTPEngine(
            configuration: configuration,
            addressSource: StaticAddressSource([host: [IPAddress("127.0.0.1")!]])
        )
        defer { engine.shutdown() }
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: "https://\(host):\(server.localAddress!.port!)/"))
            return nil
        } catch let e as HTTPEngineError {
            return e
        }
    }

    static func ca() throws -> TrustAnchor {
        TrustAnchor(der: try NIOSSLCertificate(bytes: Array(caPEM.utf8), format: .pem).toDERBytes())
    }

    @Test func certificateFromAnUnknownCAIsUntrusted() async throws {
        let error = try #require(try await Self.failure(host: "a.test", tls: HTTPEngineTLS()))
        #expect(error.code == .untrustedCertificate, "\(error)")
        #expect(error.description.contains("not trusted"))
        #expect(!error.description.contains("--"), "library text gives no command-line advice: \(error)")
        #expect(error.underlying is NIOSSLError)
    }

    @Test func trustedCertificateForAnotherNameIsANameMismatch() async throws {
        let tls = HTTPEngineTLS(additionalTrustRoots: [try Self.ca()])
        let error = try #require(try await Self.failure(host: "b.test", tls: tls))
        #expect(error.code == .certificateNameMismatch, "\(error)")
        #expect(error.description.contains("not valid for b.test"))
    }

    /// Under TCP Fast Open NIOSSL cannot check names (a deferred connect has no peer address when the
    /// handshake ends); ours does, and the chain is BoringSSL's as ever.
    @Test func underFastOpenTheChainAndTheNameAreCheckedAsEver() async throws {
        let untrusted = try #require(try await Self.failure(host: "a.test", tls: HTTPEngineTLS(), fastOpen: true))
        #expect(untrusted.code == .untrustedCertificate, "\(untrusted)")
        let tls = HTTPEngineTLS(additionalTrustRoots: [try Self.ca()])
        let otherName = try #require(try await Self.failure(host: "b.test", tls: tls, fastOpen: true))
        #expect(otherName.code == .certificateNameMismatch, "\(otherName)")
        // An IP-literal URL is checked against the IP: the a.test certificate has no IP address.
        let literal = try #require(try await Self.failure(host: "127.0.0.1", tls: tls, fastOpen: true))
        #expect(literal.code == .certificateNameMismatch, "\(literal)")
    }

    @Test func trustedCertificateWithAnUnpinnedKeyIsAPinMismatch() async throws {
        let tls = HTTPEngineTLS(
            additionalTrustRoots: [try Self.ca()],
            pins: ["a.test": ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]]
        )
        let error = try #require(try await Self.failure(host: "a.test", tls: tls))
        #expect(error.code == .pinMismatch, "\(error)")
        #expect(error.description.contains("pin"))
    }

    @Test func pemFileErrorsAreConfigurationErrors() {
        #expect(throws: HTTPDNSConfigurationError(.invalidCertificate, "")) {
            try HTTPEngineTLS.loadPEM(file: "/nonexistent/ca.pem")
        }
    }
}
