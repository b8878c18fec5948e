// What `httpdns serve` accepts and answers as the vendors' own SDKs expect, beyond the forms
// CommercialServiceTests covers: the Android SDK's unsigned-refusal code, `cip`, `no_ip_code`, DNSPod's
// `/conf?token=` without an id, the C SDK's signed `/ss`, and one account with a v1 and a v2 secret.

@testable import HTTPDNSTestSupport
import Foundation
@testable import HTTPDNSCore
import HTTPDNSEngine
@testable import HTTPDNSLookup
import HTTPDNSServer
import Testing

@Suite struct VendorInteropTests {
    static let serviceIPs = [IPAddress("203.107.1.1")!, IPAddress("2401:b180::1")!]

    static func start(requireAuth: Bool = false) async throws -> HTTPDNSService {
        try await startService { config in
            config.accounts.dnspodTokens["1003"] = CommercialServiceTests.token
            config.accounts.alibaba["139450"] = [CommercialServiceTests.aliSecret]
            config.requireAuth = requireAuth
            config.serviceAddresses = serviceIPs
        }
    }

    static func json(_ body: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }

    @Test func anUnsignedV2QueryWhereOnlySignedOnesAreTakenGetsTheCodeTheAndroidSDKKnows() async throws {
        let service = try await Self.start(requireAuth: true)
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let (status, body) = try await rawGet(
            engine,
            "http://127.0.0.1:\(service.ports[0])/v2/d?id=139450&m=0&dn=a.example.com&q=4"
        )
        #expect(status == 403)
        #expect(Self.json(body)["code"] as? String == "UnsignedInterfaceDisabled", "\(body)")
    }

    @Test func aV2AnswerReportsTheAddressAskedForAndMarksAFamilyWithNoAddress() async throws {
        let service = try await Self.start()
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])/v2/d?id=139450&m=0&q=4,6"
        let (_, echoed) = try await rawGet(engine, base + "&dn=a.example.com&cip=203.0.113.7")
        #expect((Self.json(echoed)["data"] as? [String: Any])?["cip"] as? String == "203.0.113.7", "\(echoed)")
        let (_, own) = try await rawGet(engine, base + "&dn=a.example.com")
        #expect((Self.json(own)["data"] as? [String: Any])?["cip"] as? String == "127.0.0.1", "\(own)")
        let (_, v4Only) = try await rawGet(engine, base + "&dn=v4.example.com")
        let answer = ((Self.json(v4Only)["data"] as? [String: Any])?["answers"] as? [[String: Any]])?.first
        #expect((answer?["v6"] as? [String: Any])?["no_ip_code"] as? String == "RRNotExist", "\(v4Only)")
        #expect((answer?["v4"] as? [String: Any])?["no_ip_code"] == nil, "\(v4Only)")
    }

    @Test func dnspodConfWithATokenAloneIsAnsweredAsTheSDKsSendIt() async throws {
        let service = try await Self.start(requireAuth: true)
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])/conf"
        let token = String(decoding: CommercialServiceTests.token.bytes, as: UTF8.self)
        for query in ["?token=\(token)", "?id=1003&token=\(token)"] {
            let (status, body) = try await rawGet(engine, base + query)
            #expect(status == 200)
            #expect(try ServiceListFormat.parseTencent(body, now: .seconds(0)).all == Self.serviceIPs, "\(query)")
        }
        for query in ["?token=wrong", "?id=9999&token=\(token)", "", "?id="] {
            let (status, body) = try await rawGet(engine, base + query)
            #expect(status == 200 && body.isEmpty, "\(query): \(body)")
        }
    }

    @Test func aSignedSchedulingRequestIsChecked() async throws {
        let now = Int(Date().timeIntervalSince1970)
        let service = try await Self.start(requireAuth: true)
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])/139450/ss?region=global&platform=linux&n=0a1b2c3d4e5f"
        func signed(_ time: Int, secret: ResolverSecret = CommercialServiceTests.aliSecret) -> String {
            "&t=\(time)&s=" + AlibabaSigning.scheduleSignature(nonce: "0a1b2c3d4e5f", secret: secret, time: time)
        }
        // Signed as Alibaba's C SDK signs it, and unsigned as its other SDKs send it (no per-address port
        // configured: no service_ip_port).
        for query in [signed(now), ""] {
            let (status, body) = try await rawGet(engine, base + query)
            #expect(status == 200, "\(query): \(body)")
            #expect(try ServiceListFormat.parseAlibaba(Array(body.utf8), now: .seconds(0)).all == Self.serviceIPs)
        }
        let refusals = [
            (signed(now, secret: ResolverSecret("ffeeddccbbaa99887766554433221100")), "InvalidSignature"),
            (signed(now - 3 * 86400), "SignatureExpired"),
            (signed(now + 3 * 86400), "InvalidSignature"),
            ("&s=00", "MissingArgument"),
        ]
        for (query, code) in refusals {
            let (status, body) = try await rawGet(engine, base + query)
            #expect(status == 403 || status == 400, "\(query)")
            #expect(Self.json(body)["code"] as? String == code, "\(query): \(body)")
        }
    }

    @Test func anAccountWithAV1SecretAndAV2SecretTakesQueriesSignedWithEither() async throws {
        let v1Secret = ResolverSecret("plain-v1-secret")
        let v2Secret = CommercialServiceTests.aliSecret
        let service = try await startService { config in
            config.accounts.alibaba["139450"] = [v1Secret, v2Secret]
            config.requireAuth = true
        }
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        let expiry = Int(Date().timeIntervalSince1970) + 600
        func signD(_ secret: ResolverSecret) -> String {
            let s = AlibabaSigning.signature(host: "a.example.com", secret: secret, expiry: expiry)
            return base + "/139450/sign_d?host=a.example.com&t=\(expiry)&s=\(s)"
        }
        func v2(_ key: [UInt8]) -> String {
            let fields = [("id", "139450"), ("m", "0"), ("exp", "\(expiry)"), ("dn", "a.example.com"), ("q", "4")]
            let s = AlibabaSigning.v2Signature(fields, key: key)
            return base + "/v2/d?" + fields.map { "\($0.0)=\($0.1)" }.joined(separator: "&") + "&s=\(s)"
        }
        let other = ResolverSecret("ffeeddccbbaa99887766554433221100")
        for (url, taken) in [
            (signD(v1Secret), true), (signD(v2Secret), true), (v2(v2Secret.hexBytes!), true),
            (signD(other), false), (v2(other.hexBytes!), false),
            // The v1 secret is not hex: it cannot key v2's HMAC, so a v2 query is never taken on it.
            (v2(Array("plain-v1-secret".utf8)), false),
        ] {
            let (status, body) = try await rawGet(engine, url)
            #expect((status == 200) == taken, "\(url): \(status) \(body)")
            if !taken { #expect(Self.json(body)["code"] as? String == "InvalidSignature", "\(body)") }
        }
    }

    @Test func aServiceAddressWithItsOwnPortIsListedWithIt() async throws {
        let service = try await startService { config in
            config.serviceAddresses = [IPAddress("10.0.0.1")!, IPAddress("10.0.0.2")!, IPAddress("fd00::1")!]
            config.servicePorts = [IPAddress("10.0.0.2")!: 8443]
            config.accounts.dnspodTokens["1003"] = CommercialServiceTests.token
        }
        defer { Task { await service.stop() } }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        let (status, body) = try await rawGet(engine, "http://127.0.0.1:\(service.ports[0])/139450/ss?region=global")
        #expect(status == 200)
        #expect(Self.json(body)["service_ip_port"] as? [Int] == [0, 8443], "\(body)")
        #expect(Self.json(body)["service_ipv6_port"] as? [Int] == [0], "\(body)")
        let list = try ServiceListFormat.parseAlibaba(Array(body.utf8), now: .seconds(0))
        #expect(list.port(of: IPAddress("10.0.0.2")!) == 8443 && list.port(of: IPAddress("10.0.0.1")!) == nil)
        // DNSPod's list cannot carry a port: the address is listed alone.
        let token = String(decoding: CommercialServiceTests.token.bytes, as: UTF8.self)
        let (_, conf) = try await rawGet(engine, "http://127.0.0.1:\(service.ports[0])/conf?token=\(token)")
        #expect(try ServiceListFormat.parseTencent(conf, now: .seconds(0)).ipv4.count == 2, "\(conf)")
        #expect(!conf.contains("8443"), "\(conf)")
    }
}
