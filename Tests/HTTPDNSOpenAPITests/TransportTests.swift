// The OpenAPI transport: a client swift-openapi-generator made from openapi.yaml (committed
// under Generated/) sends through HTTPDNSTransport. Against the test nginx over HTTP/1.1 and HTTP/2:
// names resolved through kresd's DoH, bodies streamed both ways, a declared error status. Hermetic:
// the per-request timeout and errors mapped to our codes.
// Compiled with the package trait `OpenAPI`, as the test command builds (`--traits OpenAPI`).
#if OpenAPI

    import Crypto
    import Foundation
    import HTTPDNSKit
    import HTTPDNSOpenAPI
    import HTTPTypes
    import NIOCore
    import OpenAPIRuntime
    import Testing
    @testable import HTTPDNSTestSupport

    /// An `HTTPDNS` resolving the `.test` names through kresd's DoH and trusting the test CA.
    func peersHTTPDNS(_ peers: Peers, versions: HTTPVersionPolicy) throws -> HTTPDNS {
        var configuration = HTTPDNS.Configuration(
            resolvers: [try ResolverSpec(parsing: "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query")],
            policy: try HostPolicy(only: ["*.test"])
        )
        configuration.fallbackToLocalDNS = false
        configuration.tls.trustedCertificateFiles = [peers.ca]
        configuration.http.versions = versions
        return try HTTPDNS(configuration)
    }

    /// `count` bytes of a fixed pattern, as chunks of 64 KiB that are made only when the transport asks.
    func patternBody(_ count: Int) -> (HTTPBody, String) {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 13) }
        let digest = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        let chunks = stride(from: 0, to: count, by: 1 << 16).map { ArraySlice(bytes[$0..<min($0 + (1 << 16), count)]) }
        let stream = AsyncStream<ArraySlice<UInt8>> { continuation in
            for chunk in chunks { continuation.yield(chunk) }
            continuation.finish()
        }
        return (HTTPBody(stream, length: .unknown, iterationBehavior: .single), digest)
    }

    @Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
    struct OpenAPIPeerTests {
        @Test(arguments: [HTTPVersionPolicy.http1Only, .http2Only])
        func aGeneratedClientTalksToNginxThroughHTTPDNS(versions: HTTPVersionPolicy) async throws {
            let peers = try Peers.require()
            let httpdns = try peersHTTPDNS(peers, versions: versions)
            defer { Task { await httpdns.shutdown() } }
            let client = Client(
                serverURL: URL(string: "https://a.test:\(peers.nginxTLS)/")!,
                transport: HTTPDNSTransport(httpdns)
            )
            let proto = versions == .http2Only ? "HTTP/2.0" : "HTTP/1.1"

            // The name went through HTTPDNS; SNI and Host stayed on it.
            let whoami = try await String(collecting: try client.whoami().ok.body.plainText, upTo: 1 << 16)
            #expect(whoami == "host=a.test sni=a.test proto=\(proto) scheme=https\n")

            // A 3 MB upload of unknown length, streamed: nginx saw every byte (chunked on HTTP/1.1).
            let (upload, digest) = patternBody(3 << 20)
            let echo = try await client.echo(body: .binary(upload)).ok.body.json
            #expect(echo.method == "POST" && echo.length == 3 << 20 && echo.sha256 == digest)
            #expect(echo.proto == proto && echo.sni == "a.test")
            #expect(echo.transfer_encoding == (versions == .http2Only ? nil : "chunked"))

            // A 64 MB download, read as it streams in: every byte, in order.
            let file = try await client.download(path: .init(name: "big.bin")).ok.body.binary
            var hash = SHA256()
            var received = 0
            for try await chunk in file {
                hash.update(data: chunk)
                received += chunk.count
            }
            let expected = try Data(contentsOf: URL(fileURLWithPath: peers.www + "/big.bin"))
            #expect(received == expected.count)
            #expect(Data(hash.finalize()) == Data(SHA256.hash(data: expected)))

            // A status the document declares comes back as its case.
            let missing = try await client.missing()
            guard case .notFound(let notFound) = missing else {
                Issue.record("expected the declared 404, got \(missing)")
                return
            }
            #expect(try await String(collecting: notFound.body.plainText, upTo: 1 << 10) == "status 404\n")
        }
    }

    @Suite struct OpenAPITransportTests {
        /// The engine's error a generated client's call failed with.
        func engineError(_ call: () async throws -> Void) async -> HTTPEngineError? {
            do {
                try await call()
            } catch let error as ClientError {
                return error.underlyingError as? HTTPEngineError
            } catch {
                Issue.record("expected a ClientError, got \(error)")
            }
            return nil
        }

        @Test func theRequestTimeoutBoundsAServerThatNeverAnswers() async throws {
            let (silent, port) = try await startSilentTCP()
            defer { silent.close(promise: nil) }
            try await withHTTPDNS { httpdns in
                let client = Client(
                    serverURL: URL(string: "http://app.test:\(port)")!,
                    transport: HTTPDNSTransport(httpdns, configuration: .init(timeout: .milliseconds(300)))
                )
                let started = ContinuousClock.now
                let error = await engineError { _ = try await client.whoami() }
                #expect(error?.code == .totalTimeout, "\(String(describing: error))")
                // Hang check: 60 s, a bound a starved 2-core machine cannot miss, against a 300 ms timeout.
                #expect(ContinuousClock.now - started < .seconds(60))
            }
        }

        @Test func failuresCarryOurCodes() async throws {
            try await withHTTPDNS { httpdns in
                let gone = try await HTTPFixtureServer.start { _, _, _ in (.ok, "text/plain", []) }
                let closed = gone.port
                await gone.stop()
                let transport = HTTPDNSTransport(httpdns)
                let refused = Client(serverURL: URL(string: "http://app.test:\(closed)")!, transport: transport)
                #expect(await engineError { _ = try await refused.whoami() }?.code == .connectFailed)
                let unknown = Client(serverURL: URL(string: "http://nx.app.test:\(closed)")!, transport: transport)
                #expect(await engineError { _ = try await unknown.whoami() }?.code == .nameNotResolved)
            }
        }

        @Test func theServerURLKeepsItsPathAndRefusesAQuery() throws {
            let base = URL(string: "https://api.test/v1/")!
            #expect(try HTTPDNSTransport.url(base, "/echo?x=1") == "https://api.test/v1/echo?x=1")
            #expect(try HTTPDNSTransport.url(URL(string: "https://api.test")!, nil) == "https://api.test/")
            #expect(throws: HTTPEngineError.self) {
                try HTTPDNSTransport.url(URL(string: "https://api.test/?k=v")!, "/a")
            }
        }
    }

#endif  // OpenAPI
