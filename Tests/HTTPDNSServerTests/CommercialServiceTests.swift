// Our client against our server in every authenticated form: Tencent Cloud DNSPod AES, DES
// and HTTPS token, Alibaba Cloud EMAS signed queries; wrong keys, tokens and signatures, expired and
// future-dated signatures, and --require-auth.

import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSDemoPKI
@testable import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
import NIOSSL
import Testing

@Suite struct CommercialServiceTests {
    static let aesKey = ResolverSecret("0123456789abcdef")
    static let desKey = ResolverSecret("dnspodpass")
    static let token = ResolverSecret("tok-9f2c")
    /// Hex, as Alibaba's console shows it: `sign_d` uses its text, `/v2/d` its decoded bytes.
    static let aliSecret = ResolverSecret("00112233445566778899aabbccddeeff")
    /// The account's AES key for v2's encrypted modes (hex, as the console shows it).
    static let aliAESKey = ResolverSecret("0f0e0d0c0b0a09080706050403020100")

    /// A server with one account of each kind; `tls` serves HTTPS as `dnspod.test` with a throw-away CA.
    static func startVendorService(
        tls pki: DemoPKI? = nil,
        requireAuth: Bool = false,
        unixTime: @escaping @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }
    ) async throws -> HTTPDNSService {
        try await startService { config in
            config.accounts.dnspodKeys["1001"] = DNSPodCipher(.aes, key: aesKey)
            config.accounts.dnspodKeys["1002"] = DNSPodCipher(.des, key: desKey)
            config.accounts.dnspodTokens["1003"] = token
            config.accounts.alibaba["139450"] = [aliSecret]
            config.accounts.alibabaAES["139450"] = aliAESKey
            config.requireAuth = requireAuth
            config.unixTime = unixTime
            if let pki, let (chain, key) = try? pki.leaf("dnspod.test") {
                config.tls = .init(chain: [chain], key: key)
            }
        }
    }

    static func resolver(_ spec: ResolverSpec, pki: DemoPKI? = nil) throws -> HTTPDNSResolver {
        var config = ResolverConfiguration(providers: [spec])
        config.policy = .all
        config.fallbackToLocalDNS = false
        // Not a test of timeouts: a bound a starved 2-core machine cannot miss.
        config.timeout = .seconds(60)
        config.bootstrap = ["dnspod.test": [IPAddress("127.0.0.1")!]]
        let tls = HTTPEngineTLS(
            additionalTrustRoots: try pki.map { [TrustAnchor(der: try $0.caCertificate.toDERBytes())] } ?? []
        )
        return try HTTPDNSResolver(configuration: config, engine: try HTTPEngine(tls: tls), logger: testLogger)
    }

    static func endpoint(_ url: String) throws -> ResolverEndpoint { try ResolverEndpoint(url: url) }

    @Test(arguments: ["aes", "des", "token", "alibaba", "alibaba-v2"])
    func ourClientResolvesAgainstOurServerInEachForm(_ form: String) async throws {
        let pki = form == "token" ? try DemoPKI() : nil
        let service = try await Self.startVendorService(tls: pki, requireAuth: true)
        defer { Task { await service.stop() } }
        let port = service.ports[0]
        let spec: ResolverSpec
        switch form {
        case "aes":
            spec = .dnspod(try Self.endpoint("http://127.0.0.1:\(port)/d"), auth: .aes(id: "1001", key: Self.aesKey))
        case "des":
            spec = .dnspod(try Self.endpoint("http://127.0.0.1:\(port)/d"), auth: .des(id: "1002", key: Self.desKey))
        case "token":
            spec = .dnspod(
                try Self.endpoint("https://dnspod.test:\(port)/d"),
                auth: .token(id: "1003", token: Self.token)
            )
        case "alibaba": spec = .json(try Self.endpoint("http://127.0.0.1:\(port)/139450/d"), secret: Self.aliSecret)
        default: spec = .json(try Self.endpoint("http://127.0.0.1:\(port)/v2/d?id=139450"), secret: Self.aliSecret)
        }
        let resolver = try Self.resolver(spec, pki: pki)
        let r = try await resolver.resolve("a.example.com")
        #expect(r.ipv4 == [IPAddress("198.51.0.1")!])
        #expect(r.ipv6 == [IPAddress("2606:4700::1")!])
        #expect(r.ttl == 90)
        #expect(r.clientAddress == IPAddress("127.0.0.1"))
        // The second answer comes from the cache, with the client address it was given with.
        let cached = try await resolver.resolve("a.example.com")
        #expect(cached.clientAddress == IPAddress("127.0.0.1"))
        await #expect(throws: ResolverError.self) { try await resolver.resolve("unknown.example.com") }
    }

    @Test func theServersAESAnswerIsEncryptedWithAFreshIV() async throws {
        let service = try await Self.startVendorService()
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let cipher = DNSPodCipher(.aes, key: Self.aesKey)
        let url =
            "http://127.0.0.1:\(service.ports[0])/d?dn=\(cipher.seal("a.example.com"))&id=1001&alg=aes&ttl=1&clientip=1"
        let (status1, body1) = try await rawGet(engine, url)
        let (_, body2) = try await rawGet(engine, url)
        #expect(status1 == 200)
        #expect(body1 != body2)
        #expect(hexDecoded(body1) != nil)
        #expect(try cipher.open(body1) == "198.51.0.1,90|127.0.0.1")
        #expect(try cipher.open(body2) == "198.51.0.1,90|127.0.0.1")
    }

    /// What the vendor does for a wrong id, key or token: HTTP 200 with an empty body. Our client
    /// reports that as the provider failing, saying why, so fallback rules apply.
    @Test(arguments: ["wrong-key", "wrong-alg", "unknown-id", "wrong-token"])
    func wrongDNSPodCredentialsGetAnEmptyAnswerAndAClearFailure(_ mistake: String) async throws {
        let pki = mistake == "wrong-token" ? try DemoPKI() : nil
        let service = try await Self.startVendorService(tls: pki)
        defer { Task { await service.stop() } }
        let port = service.ports[0]
        let http = try Self.endpoint("http://127.0.0.1:\(port)/d")
        let auth: DNSPodAuth
        switch mistake {
        case "wrong-key": auth = .aes(id: "1001", key: ResolverSecret("fedcba9876543210"))
        case "wrong-alg": auth = .des(id: "1001", key: Self.desKey)
        case "unknown-id": auth = .aes(id: "9999", key: Self.aesKey)
        default: auth = .token(id: "1003", token: ResolverSecret("tok-wrong"))
        }
        let spec: ResolverSpec =
            mistake == "wrong-token"
            ? .dnspod(try Self.endpoint("https://dnspod.test:\(port)/d"), auth: auth) : .dnspod(http, auth: auth)
        let resolver = try Self.resolver(spec, pki: pki)
        do {
            _ = try await resolver.resolve("a.example.com")
            Issue.record("resolved with \(mistake)")
        } catch let error as ResolverError {
            #expect(error.code == .allProvidersFailed)
            #expect(error.message.contains("empty body"), "\(error.message)")
            #expect(!error.message.contains("fedcba9876543210") && !error.message.contains("tok-wrong"))
        }
    }

    @Test func aTokenIsNeverSentOverPlainHTTP() throws {
        let spec = ResolverSpec.dnspod(
            try Self.endpoint("http://127.0.0.1:1/d"),
            auth: .token(id: "1003", token: Self.token)
        )
        #expect(throws: HTTPDNSConfigurationError.self) { try Self.resolver(spec) }
    }

    /// Alibaba's refusals are 403 with a code, which our client's message carries.
    @Test(arguments: [("wrong-secret", "InvalidSignature"), ("unknown-account", "InvalidAccount")], ["sign_d", "v2"])
    func refusedAlibabaSignaturesCarryTheServiceCode(_ mistakeAndCode: (String, String), _ api: String) async throws {
        let (mistake, code) = mistakeAndCode
        let service = try await Self.startVendorService()
        defer { Task { await service.stop() } }
        let account = mistake == "unknown-account" ? "777" : "139450"
        let secret = mistake == "wrong-secret" ? ResolverSecret("ffeeddccbbaa99887766554433221100") : Self.aliSecret
        let path = api == "v2" ? "/v2/d?id=\(account)" : "/\(account)/d"
        let spec = ResolverSpec.json(try Self.endpoint("http://127.0.0.1:\(service.ports[0])\(path)"), secret: secret)
        do {
            _ = try await Self.resolver(spec).resolve("a.example.com")
            Issue.record("resolved with \(mistake)")
        } catch let error as ResolverError {
            #expect(error.message.contains("HTTP 403 \(code)"), "\(error.message)")
            #expect(!error.message.contains("ffeeddccbbaa") && !error.message.contains("00112233"))
        }
    }

    /// A device whose clock is hours off: the service's clock is moved instead. Our 10-minute
    /// signatures are expired by a clock 2 h ahead, and more than 24 h ahead of one 2 days behind; the
    /// refusal's `Date` gives the offset, the query goes once more on the service's time and succeeds,
    /// and later queries are signed on it from the start. A clock 2 h behind accepts the first query;
    /// its `Date` still sets the offset.
    @Test(arguments: [2 * 3600, -2 * 3600, -2 * 86400], ["sign_d", "v2"])
    func aClockHoursOffIsCorrectedFromTheServicesDate(_ skew: Int, _ api: String) async throws {
        let service = try await Self.startVendorService(unixTime: { Int(Date().timeIntervalSince1970) + skew })
        defer { Task { await service.stop() } }
        let path = api == "v2" ? "/v2/d?id=139450" : "/139450/d"
        let endpoint = try Self.endpoint("http://127.0.0.1:\(service.ports[0])\(path)")
        let resolver = try Self.resolver(.json(endpoint, secret: Self.aliSecret))
        let r = try await resolver.resolve("a.example.com")
        #expect(r.ipv4 == [IPAddress("198.51.0.1")!])
        let provider = try #require(resolver.providers.first as? AlibabaJSONProvider)
        #expect(abs(provider.clock.currentOffset - skew) <= 5, "offset \(provider.clock.currentOffset), skew \(skew)")
        #expect(try await resolver.resolve("v4.example.com").ipv4 == [IPAddress("198.51.0.2")!])
        // A network change forgets it (the resolver tells every provider; the names in use are then
        // resolved again on the new network, which learns the offset there afresh).
        provider.networkChanged()
        #expect(provider.clock.currentOffset == 0)
    }

    /// v2's encrypted modes between our client and our server, several names per query; a wrong AES key
    /// and an account without one are refused with a code.
    @Test(arguments: [AlibabaEncryption.Mode.cbc, .gcm])
    func v2EncryptedModesAnswerBatches(_ mode: AlibabaEncryption.Mode) async throws {
        let service = try await Self.startVendorService(requireAuth: true)
        defer { Task { await service.stop() } }
        func spec(account: String = "139450", key: ResolverSecret = Self.aliAESKey) throws -> ResolverSpec {
            .json(
                try Self.endpoint("http://127.0.0.1:\(service.ports[0])/v2/d?id=\(account)"),
                secret: Self.aliSecret,
                encryption: AlibabaEncryption(mode: mode, key: key)
            )
        }
        let resolver = try Self.resolver(try spec())
        let results = await resolver.resolve(["a.example.com", "v4.example.com", "missing.example.com"], .both)
        #expect(try results["a.example.com"]?.get().ipv4 == [IPAddress("198.51.0.1")!])
        #expect(try results["a.example.com"]?.get().ipv6 == [IPAddress("2606:4700::1")!])
        #expect(try results["v4.example.com"]?.get().ipv4 == [IPAddress("198.51.0.2")!])
        #expect(try results["a.example.com"]?.get().clientAddress == IPAddress("127.0.0.1"))
        #expect(throws: ResolverError.self) { try results["missing.example.com"]?.get() }
        // A wrong AES key: the service cannot read enc.
        let wrong = try Self.resolver(try spec(key: ResolverSecret("ffeeddccbbaa99887766554433221100")))
        await #expect(throws: ResolverError.self) { try await wrong.resolve("a.example.com") }
        do {
            _ = try await wrong.resolve("a.example.com")
        } catch let error as ResolverError {
            #expect(error.message.contains("HTTP 400 InvalidParameter"), "\(error.message)")
            #expect(!error.message.contains("ffeeddcc") && !error.message.contains("0f0e0d0c"))
        }
    }

    /// `sign_resolve` between our client and our server: several names signed as one string.
    @Test func signedBatchesAreAnsweredForEveryName() async throws {
        let service = try await Self.startVendorService(requireAuth: true)
        defer { Task { await service.stop() } }
        let endpoint = try Self.endpoint("http://127.0.0.1:\(service.ports[0])/139450/d")
        let resolver = try Self.resolver(.json(endpoint, secret: Self.aliSecret))
        let results = await resolver.resolve(["a.example.com", "v4.example.com", "missing.example.com"], .both)
        #expect(try results["a.example.com"]?.get().ipv4 == [IPAddress("198.51.0.1")!])
        #expect(try results["a.example.com"]?.get().ipv6 == [IPAddress("2606:4700::1")!])
        #expect(try results["v4.example.com"]?.get().ipv4 == [IPAddress("198.51.0.2")!])
        #expect(try results["v4.example.com"]?.get().ipv6 == [])
        #expect(throws: ResolverError.self) { try results["missing.example.com"]?.get() }
    }

    @Test func theServiceClockReadsAndWritesHTTPDates() {
        #expect(ServiceClock.parseHTTPDate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(ServiceClock.httpDate(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        for bad in [
            "", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 32 Nov 1994 08:49:37 GMT", "x" + String(repeating: " ", count: 24) + " GMT",
        ] {
            #expect(ServiceClock.parseHTTPDate(bad) == nil, "\(bad)")
        }
        let local = 1_700_000_000
        #expect(ServiceClock.offset(served: local + 29, local: local) == 0)
        #expect(ServiceClock.offset(served: local - 7200, local: local) == -7200)
        let clock = ServiceClock(localNow: { local })
        #expect(clock.learn(dateHeader: ServiceClock.httpDate(local + 7200)))
        #expect(clock.now() == local + 7200)
        #expect(!clock.learn(dateHeader: "garbage") && clock.now() == local + 7200)
        clock.reset()
        #expect(clock.now() == local)
    }

    @Test func requireAuthRefusesEveryUnauthenticatedForm() async throws {
        let service = try await Self.startVendorService(requireAuth: true)
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        for path in [
            "/d?dn=a.example.com", "/resolve?host=a.example.com", "/139450/d?host=a.example.com",
            "/dns-query?name=a.example.com&type=A", "/v2/d?id=139450&m=0&dn=a.example.com&q=4",
        ] {
            let (status, body) = try await rawGet(engine, base + path)
            #expect(status == 403, "\(path)")
            #expect(!body.contains("198.51.0.1"), "\(path)")
        }
        let (health, _) = try await rawGet(engine, base + "/healthz")
        #expect(health == 200)
        // A signed query without t= and s= is a bad request with the vendor's code.
        let (missing, body) = try await rawGet(engine, base + "/139450/sign_d?host=a.example.com")
        #expect(missing == 400)
        #expect(body.contains("MissingArgument"))
    }

    @Test func tamperedOrGarbageDNSPodQueriesGetTheEmptyAnswer() async throws {
        let service = try await Self.startVendorService()
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])/d?id=1001&alg=aes&dn="
        var sealed = Array(DNSPodCipher(.aes, key: Self.aesKey).seal("a.example.com"))
        sealed[sealed.count - 1] = sealed[sealed.count - 1] == "0" ? "1" : "0"
        for dn in [String(sealed), "abc", "zz", "", String(repeating: "0", count: 32)] {
            let (status, body) = try await rawGet(engine, base + dn)
            #expect(status == 200)
            #expect(body.isEmpty, "\(dn): \(body)")
        }
    }
}
