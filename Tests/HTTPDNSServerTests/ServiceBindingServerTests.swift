// `httpdns serve` answering HTTPS records (RFC 9460) over DoH, wire and JSON, from its hosts data
// (`--https-record`), read back by our own resolver. Serving them in front of a real authoritative server
// (BIND) is in ServiceBindingPeerTests.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

@Suite struct ServiceBindingServerTests {
    static let endpoint = try! ServiceBinding(parsing: #"1 . alpn="h2" port=8443 ipv4hint=127.0.0.1"#)
    static let second = try! ServiceBinding(parsing: #"2 . alpn="h2,http/1.1" port=8444"#)

    func startRecordsService() async throws -> HTTPDNSService {
        try await startService {
            $0.httpsRecords = [
                "svc.test": [Self.second, Self.endpoint],
                "alias.test": [try! ServiceBinding(parsing: "0 svc.test.")],
            ]
            $0.staticHosts["plain.test"] = [IPAddress("127.0.0.1")!]
            $0.ttl = 120
        }
    }

    func resolver(_ kind: String, _ service: HTTPDNSService) throws -> HTTPDNSResolver {
        var config = ResolverConfiguration(providers: [
            try ResolverSpec(parsing: "\(kind):http://127.0.0.1:\(service.ports[0])/dns-query")
        ])
        config.policy = .all
        config.fallbackToLocalDNS = false
        // Not a test of timeouts: a bound the whole parallel suite on 2 cores cannot miss.
        config.timeout = .seconds(60)
        return try HTTPDNSResolver(configuration: config, engine: try HTTPEngine(), logger: testLogger)
    }

    /// A relaunch (issue 63): the records, and the AAAA a host with A records only does not have, come
    /// from the cache file; the service is gone, so any query would fail the lookup.
    @Test func aRelaunchedResolverKnowsTheRecordsAndTheMissingAAAAWithoutAsking() async throws {
        let service = try await startRecordsService()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-records-\(UUID()).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        func launch() throws -> HTTPDNSResolver {
            var config = ResolverConfiguration(providers: [
                try ResolverSpec(parsing: "doh:http://127.0.0.1:\(service.ports[0])/dns-query")
            ])
            config.policy = .all
            config.fallbackToLocalDNS = false
            config.timeout = .seconds(60)  // not a test of timeouts
            config.persistencePath = path
            config.cache.serveExpired = .seconds(86_400)
            return try HTTPDNSResolver(configuration: config, engine: try HTTPEngine(), logger: testLogger)
        }
        let first = try launch()
        #expect(try await first.serviceBindings(for: "svc.test").endpoints == [Self.endpoint, Self.second])
        let asked = try await first.resolve("plain.test", .both)
        #expect(asked.ipv4 == [IPAddress("127.0.0.1")!] && asked.ipv6.isEmpty)
        await first.shutdown()
        await service.stop()

        let relaunched = try launch()
        let records = try await relaunched.serviceBindings(for: "svc.test")
        #expect(records.endpoints == [Self.endpoint, Self.second])
        guard case .cache = records.source else {
            Issue.record("the records did not come from the cache file: \(records.source)"); return
        }
        let plain = try await relaunched.resolve("plain.test", .both)
        #expect(plain.ipv4 == [IPAddress("127.0.0.1")!])
        #expect(plain.ipv6.isEmpty)
        guard case .cache = plain.source else {
            Issue.record("the answer did not come from the cache file: \(plain.source)"); return
        }
        await relaunched.shutdown()
    }

    @Test(arguments: ["doh", "doh-post", "doh-json"])
    func ourResolverReadsTheRecordsServeAnswers(_ kind: String) async throws {
        let service = try await startRecordsService()
        defer { Task { await service.stop() } }
        let r = try resolver(kind, service)
        let svc = try await r.serviceBindings(for: "svc.test")
        #expect(svc.endpoints == [Self.endpoint, Self.second], "priority order")
        #expect(svc.source == .httpdns("\(kind):http://127.0.0.1:\(service.ports[0])/dns-query"))
        // The alias is passed on as it is; the client follows it (asking serve again).
        let alias = try await r.serviceBindings(for: "alias.test")
        #expect(alias.aliases == ["svc.test"])
        #expect(alias.endpoints == [Self.endpoint, Self.second])
        // A name in the hosts data without records, and a name the server does not know: none.
        #expect(try await r.serviceBindings(for: "plain.test").endpoints.isEmpty)
        #expect(try await r.serviceBindings(for: "nx.test").endpoints.isEmpty)
        // The addresses are answered as before.
        #expect(try await r.resolve("plain.test").ipv4 == [IPAddress("127.0.0.1")!])
    }

    @Test func theWireAnswerCarriesTheRecordsAndTheirTTL() async throws {
        let service = try await startRecordsService()
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let query = try DNSMessage.query(name: "svc.test", type: .https, id: 7)
        let response = try await engine.execute(
            try HTTPEngineRequest(
                method: .POST,
                url: "http://127.0.0.1:\(service.ports[0])/dns-query",
                headers: ["content-type": "application/dns-message"],
                body: .bytes(query)
            )
        )
        #expect(response.headers.first(name: "cache-control") == "max-age=120")
        let message = try DNSMessage(parsing: Array(try await response.body.collect(upTo: 1 << 16).readableBytesView))
        #expect(message.id == 7)
        #expect(message.rcode == .noError)
        let answer = message.serviceBindings()
        #expect(answer.bindings == [Self.endpoint, Self.second])
        #expect(answer.ttl == 120)
    }

    @Test func theJSONAnswerNamesItsTypeAndPresentationForm() async throws {
        let service = try await startRecordsService()
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let (status, body) = try await rawGet(
            engine,
            "http://127.0.0.1:\(service.ports[0])/dns-query?name=svc.test&type=HTTPS"
        )
        #expect(status == 200)
        #expect(body.contains(#""type":65"#))
        #expect(body.contains(#"port=8443"#))
        let (badStatus, badBody) = try await rawGet(
            engine,
            "http://127.0.0.1:\(service.ports[0])/dns-query?name=svc.test&type=MX"
        )
        #expect(badStatus == 400)
        #expect(badBody.contains("use A, AAAA or HTTPS"))
    }

    @Test func theCLIServesTheRecordsItIsGivenAndRefusesMalformedOnes() async throws {
        let serve = try await ServeProcess.launch([
            "--listen", "127.0.0.1:0", "--https-record", "svc.test 1 . alpn=h2 port=8443",
            "--https-record", "svc.test 2 . alpn=h2",
        ])
        let doh = "doh:http://127.0.0.1:\(serve.port)/dns-query"
        let r = try await runCLI(["resolve", "--type", "https", "svc.test", "--resolver", doh, "--no-fallback"])
        await serve.stop()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == ";; svc.test HTTPS source=\(doh)\n1 . alpn=\"h2\" port=8443\n2 . alpn=\"h2\"\n")
        for wrong in [
            "svc.test", "svc.test one .", "bad_name! 1 .", "svc.test 1 . port=99999", "svc.test 1 . ipv4hint=::1",
        ] {
            let bad = try await runCLI(["serve", "--listen", "127.0.0.1:0", "--https-record", wrong])
            #expect(bad.status == 64 && bad.stderr.contains("--https-record"), "\(wrong): \(bad.stderr)")
        }
    }
}
