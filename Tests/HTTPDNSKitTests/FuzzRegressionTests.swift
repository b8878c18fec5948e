// Replays the fuzz seeds (Fuzz/Corpus/TARGET) and every crash the fuzzer found (Fuzz/Regressions/TARGET)
// through the same parsers, decoding each input the way the harness in Fuzz/Targets does (selector bytes
// first), and checks the outcome: a file named `bad-…` is refused, any other is accepted (for
// proxy-target the name starts with the expected kind: tunnel-, forward-, pac-, invalid-), and whatever
// is accepted round-trips through the matching writer. The harness is not part of the package, so the
// parsers are called directly here.

import Foundation
import Testing

@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSServer
@testable import HTTPDNSLookup
@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy

@Suite struct FuzzRegressionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every seed and regression input of `target`, by file name.
    static func inputs(_ target: String) throws -> [(name: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        for dir in ["Fuzz/Corpus", "Fuzz/Regressions"] {
            let url = root.appendingPathComponent(dir).appendingPathComponent(target)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: url.path) else { continue }
            for name in names.sorted() where !name.hasPrefix(".") {
                out.append((name, Array(try Data(contentsOf: url.appendingPathComponent(name)))))
            }
        }
        return out
    }

    static func expectsRefusal(_ name: String) -> Bool { name.hasPrefix("bad-") }

    @Test func targetsHaveSeeds() throws {
        for target in [
            "dns-wire", "dnspod", "alibaba-json", "doh-json", "hosts", "cache-file", "proxy-target",
            "resolver-spec",
        ] {
            #expect(try Self.inputs(target).count >= 4, "\(target)")
        }
    }

    /// certificate-der: a certificate's DER gives its key, a PEM text its certificates, and a PEM error
    /// never carries a control byte (pem-label-control-bytes: a label of control bytes was echoed).
    @Test func certificateDER() throws {
        let inputs = try Self.inputs("certificate-der")
        #expect(inputs.count >= 3)
        for (name, bytes) in inputs {
            if name.hasSuffix("-der") {
                #expect((CertificateDER.subjectPublicKeyInfo(of: bytes) == nil) == Self.expectsRefusal(name), "\(name)")
            }
            do {
                let certificates = try CertificateDER.certificates(inPEM: String(decoding: bytes, as: UTF8.self))
                if name.hasSuffix("-pem") {
                    #expect(!certificates.isEmpty, "\(name)")
                    #expect(certificates.allSatisfy { CertificateDER.subjectPublicKeyInfo(of: $0) != nil }, "\(name)")
                }
            } catch let error as PEMError {
                #expect(!name.hasSuffix("-pem"), "\(name): \(error)")
                #expect(error.description.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }, "\(name)")
            }
        }
    }

    @Test func dnsWire() throws {
        for (name, bytes) in try Self.inputs("dns-wire") {
            guard let message = try? DNSMessage(parsing: bytes) else {
                #expect(Self.expectsRefusal(name), "\(name) was refused")
                continue
            }
            #expect(!Self.expectsRefusal(name), "\(name) was accepted")
            #expect(message.questionName.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "\(name)")
            let v4 = message.addresses(for: .a).addresses
            let v6 = message.addresses(for: .aaaa).addresses
            #expect(v4.allSatisfy { !$0.isIPv6 && IPAddress($0.description) == $0 }, "\(name)")
            #expect(v6.allSatisfy { $0.isIPv6 && IPAddress($0.description) == $0 }, "\(name)")
            guard message.questionName != "" else { continue }
            let query = try DNSMessage(
                parsing: try DNSMessage.query(name: message.questionName, type: message.questionType, id: message.id)
            )
            #expect(query.questionName == message.questionName, "\(name)")
            let response = try DNSMessage(
                parsing: try DNSMessage.response(
                    to: message,
                    rcode: message.rcode,
                    addresses: v4 + v6,
                    negativeTTL: message.negativeTTL
                )
            )
            #expect(response.questionName == message.questionName && response.questionType == message.questionType)
            #expect(response.addresses(for: .a).addresses == v4, "\(name)")
            #expect(response.addresses(for: .aaaa).addresses == v6, "\(name)")
            #expect(response.negativeTTL == message.negativeTTL, "\(name)")
        }
    }

    @Test func dnsWireRegressionLabelHoldingADot() throws {
        let bytes = Array(
            try Data(contentsOf: Self.root.appendingPathComponent("Fuzz/Regressions/dns-wire/label-holding-a-dot"))
        )
        // Labels "a" and "tes." once read as the name "a.tes.", which the writer wrote as a.tes.
        #expect(try DNSMessage(parsing: bytes).questionName == "a.tes\\.")
    }

    static let dnspodNameSets: [[String]] = [
        ["a.com"], ["a.com", "b.com"], ["www.example.com.", "B.example.com", "c.example.com"], ["_dns.x-y.test"],
    ]

    @Test func dnspod() throws {
        for (name, bytes) in try Self.inputs("dnspod") {
            guard let selector = bytes.first else { continue }
            let query = AddressQuery.allCases[Int(selector & 3) % 3]
            let names = Self.dnspodNameSets[Int(selector >> 2) & 3]
            let body = String(decoding: bytes.dropFirst(), as: UTF8.self)
            guard let result = try? DNSPodFormat.parse(body, names: names, query: query) else {
                #expect(Self.expectsRefusal(name), "\(name) was refused")
                continue
            }
            #expect(!Self.expectsRefusal(name), "\(name) was accepted")
            #expect(!result.isEmpty, "\(name)")
            for (host, answer) in result {
                let formatted = DNSPodFormat.format(answer, query: query, withTTL: false)
                let back = try DNSPodFormat.parse(formatted, names: [host], query: query)[host]
                #expect(back?.ipv4?.addresses == answer.ipv4?.addresses, "\(name)")
                #expect(back?.ipv6?.addresses == answer.ipv6?.addresses, "\(name)")
            }
        }
    }

    @Test func dnspodRegressionCRLFBatch() throws {
        let bytes = Array(
            try Data(contentsOf: Self.root.appendingPathComponent("Fuzz/Regressions/dnspod/crlf-batch"))
        )
        // "\r\n" is one Character: the lines once ran together and the body was refused.
        let r = try DNSPodFormat.parse(
            String(decoding: bytes.dropFirst(), as: UTF8.self),
            names: ["a.com", "b.com"],
            query: .both
        )
        #expect(
            r["a.com"]
                == HostAnswer(
                    ipv4: FamilyAnswer(addresses: [IPAddress("1.1.1.1")!], ttl: 100),
                    ipv6: FamilyAnswer(addresses: [IPAddress("::1")!], ttl: 50)
                )
        )
        #expect(r["b.com"] == HostAnswer(ipv4: .empty, ipv6: .empty))
    }

    @Test func alibabaJSON() throws {
        for (name, bytes) in try Self.inputs("alibaba-json") {
            guard let selector = bytes.first else { continue }
            let query = AddressQuery.allCases[Int(selector) % 3]
            guard let answer = try? AlibabaJSONFormat.parse(Array(bytes.dropFirst()), query: query) else {
                #expect(Self.expectsRefusal(name), "\(name) was refused")
                continue
            }
            #expect(!Self.expectsRefusal(name), "\(name) was accepted")
            let back = try AlibabaJSONFormat.parse(
                AlibabaJSONFormat.format(host: "a.com", answer: answer),
                query: query
            )
            #expect(back.allAddresses == answer.allAddresses, "\(name)")
        }
    }

    static let dohNames = ["a.com", "www.example.com.", "CNAME.Example.com", "x"]

    @Test func dohJSON() throws {
        for (name, bytes) in try Self.inputs("doh-json") {
            guard let selector = bytes.first else { continue }
            let type: DNSRecordType = selector & 1 == 0 ? .a : .aaaa
            let host = Self.dohNames[Int(selector >> 1) & 3]
            guard let answer = try? DoHJSONFormat.parse(Array(bytes.dropFirst()), name: host, type: type) else {
                #expect(Self.expectsRefusal(name), "\(name) was refused")
                continue
            }
            #expect(!Self.expectsRefusal(name), "\(name) was accepted")
            #expect(answer.addresses.allSatisfy { $0.isIPv6 == (type == .aaaa) }, "\(name)")
            let body = DoHJSONFormat.format(name: host, type: type, rcode: .noError, answer: answer)
            #expect(try DoHJSONFormat.parse(body, name: host, type: type).addresses == answer.addresses, "\(name)")
        }
    }

    @Test func cnameChainSeedFollowsTheChain() throws {
        let bytes = Array(
            try Data(contentsOf: Self.root.appendingPathComponent("Fuzz/Corpus/doh-json/cloudflare-cname"))
        )
        let answer = try DoHJSONFormat.parse(Array(bytes.dropFirst()), name: "www.example.com.", type: .a)
        #expect(answer == FamilyAnswer(addresses: [IPAddress("104.16.1.1")!, IPAddress("104.16.1.2")!], ttl: 20))
    }

    @Test func hosts() throws {
        for (name, bytes) in try Self.inputs("hosts") {
            guard let table = try? HostsFile.parse(String(decoding: bytes, as: UTF8.self)) else {
                #expect(Self.expectsRefusal(name), "\(name) was refused")
                continue
            }
            #expect(!Self.expectsRefusal(name), "\(name) was accepted")
            for (host, addresses) in table {
                #expect((try? validatedHostname(host)) == host, "\(name): \(host)")
                #expect(!addresses.isEmpty && addresses.allSatisfy { IPAddress($0.description) == $0 }, "\(name)")
            }
        }
    }

    @Test func hostsRegressionCRLFLineEnds() throws {
        let bytes = Array(
            try Data(contentsOf: Self.root.appendingPathComponent("Fuzz/Regressions/hosts/crlf-line-ends"))
        )
        // "\r\n" is one Character: the whole file was once one line, a comment, and read as empty.
        let table = try HostsFile.parse(String(decoding: bytes, as: UTF8.self))
        #expect(
            table == [
                "localhost": [IPAddress("127.0.0.1")!, IPAddress("::1")!],
                "db.internal.test": [IPAddress("10.0.0.5")!],
            ]
        )
    }

    @Test func cacheFile() throws {
        for (name, bytes) in try Self.inputs("cache-file") {
            guard let loaded = try? CacheSnapshot.load(from: bytes) else {
                #expect(Self.expectsRefusal(name), "\(name) was refused")
                continue
            }
            #expect(!Self.expectsRefusal(name), "\(name) was accepted")
            #expect(loaded.snapshot.entries.allSatisfy(CacheSnapshot.isValid), "\(name)")
            let again = try CacheSnapshot.load(from: try loaded.snapshot.fileBytes())
            #expect(again == CacheSnapshot.LoadResult(snapshot: loaded.snapshot, dropped: 0), "\(name)")
        }
    }

    @Test func cacheFileSeedWithInvalidEntriesKeepsOnlyTheValidOne() throws {
        let bytes = Array(
            try Data(contentsOf: Self.root.appendingPathComponent("Fuzz/Corpus/cache-file/invalid-entries"))
        )
        let loaded = try CacheSnapshot.load(from: bytes)
        #expect(loaded.snapshot.entries.map(\.key.name) == ["dup.example.com"])
        #expect(loaded.snapshot.entries.first?.entry.addresses == [IPAddress("1.2.3.4")!])
        #expect(loaded.dropped == 7)
    }

    static let methods = ["CONNECT", "GET", "POST", "HEAD", "PUT", "OPTIONS", "DELETE", "connect"]

    @Test func proxyTarget() throws {
        for (name, bytes) in try Self.inputs("proxy-target") {
            guard let selector = bytes.first else { continue }
            let method = Self.methods[Int(selector) & 7]
            let uri = String(decoding: bytes.dropFirst(), as: UTF8.self)
            let target = ProxyRequestTarget.parse(method: method, uri: uri)
            switch target {
            case .tunnel(let host, let port):
                #expect(name.hasPrefix("tunnel-"), "\(name) is a tunnel")
                let again = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
                #expect(ProxyRequestTarget.parse(method: method, uri: again) == target, "\(name)")
            case .forward(let parts):
                #expect(name.hasPrefix("forward-"), "\(name) is a forward")
                #expect(parts.port != nil && parts.scheme == "http", "\(name)")
                #expect(ProxyRequestTarget.parse(method: method, uri: parts.text) == target, "\(name)")
            case .pac:
                #expect(name.hasPrefix("pac-"), "\(name) is the PAC")
            case .invalid(let reason):
                #expect(name.hasPrefix("invalid-") || Self.expectsRefusal(name), "\(name) is invalid: \(reason)")
                #expect(reason.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }, "\(name)")
            }
        }
    }

    @Test func portTooBigForAnIntIsRefusedNotDropped() throws {
        // URLComponents gives nil for such a port, as for none: the URL once went to port 80 / 443.
        let proxy = Array(
            try Data(
                contentsOf: Self.root.appendingPathComponent(
                    "Fuzz/Regressions/proxy-target/invalid-port-overflowing-int"
                )
            )
        )
        #expect(
            ProxyRequestTarget.parse(method: "GET", uri: String(decoding: proxy.dropFirst(), as: UTF8.self))
                == .invalid("\"http://a.com:99999999999999999999/\": port 99999999999999999999 is outside 1-65535")
        )
        let spec = try Data(
            contentsOf: Self.root.appendingPathComponent(
                "Fuzz/Regressions/resolver-spec/bad-port-overflowing-int"
            )
        )
        #expect(throws: HTTPDNSConfigurationError(.invalidResolverSpec, "")) {
            try ResolverSpec(parsing: String(decoding: spec, as: UTF8.self))
        }
    }

    @Test func resolverSpec() throws {
        for (name, bytes) in try Self.inputs("resolver-spec") {
            let text = String(decoding: bytes, as: UTF8.self)
            guard let spec = try? ResolverSpec(parsing: text) else {
                #expect(Self.expectsRefusal(name), "\(name) (\(text)) was refused")
                continue
            }
            #expect(!Self.expectsRefusal(name), "\(name) (\(text)) was accepted")
            #expect(try ResolverSpec(parsing: spec.description) == spec, "\(name)")
        }
    }
}

/// svcb (Fuzz/Targets/FuzzServiceBinding.swift): each input read as RDATA and as presentation text;
/// what either reads encodes and reads back the same, and a `bad-` input is refused by both.
@Suite struct ServiceBindingFuzzRegressionTests {
    @Test func seedsAndCrashesRoundTripOrAreRefused() throws {
        let inputs = try FuzzRegressionTests.inputs("svcb")
        #expect(inputs.count >= 4)
        for (name, bytes) in inputs {
            let read = [
                try? ServiceBinding(rdata: bytes),
                try? ServiceBinding(parsing: String(decoding: bytes, as: UTF8.self)),
            ].compactMap { $0 }
            if FuzzRegressionTests.expectsRefusal(name) {
                #expect(read.isEmpty, "\(name) was accepted")
                continue
            }
            #expect(!read.isEmpty, "\(name) was refused")
            for record in read {
                #expect(try ServiceBinding(rdata: try record.rdata()) == record, "\(name)")
            }
        }
    }
}
