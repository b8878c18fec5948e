// The pure pieces of the commercial services: DES against known answers from independent
// implementations, hex, the DNSPod `|clientip` answers, Alibaba's client_ip and refusal codes, and
// secrets that never print.

import Testing
@testable import HTTPDNSCore
@testable import HTTPDNSLookup

@Suite struct DESTests {
    /// Known answers from OpenSSL (`openssl enc -des-ecb -K … -provider legacy -provider default`); the
    /// first is also the example in Tencent Cloud's AES/DES page (key `dnspodpass`, of which DES uses
    /// the first 8 bytes).
    @Test(arguments: [
        ("www.dnspod.cn", "dnspodpa", "87ae992c1321f299da3c0210a9900ae7"),
        ("www.qq.com", "12345678", "7cc5a7c9601837cd9840ab895aeb46fc"),
        // A whole block: PKCS#7 adds a full block of padding.
        ("abcdefgh", "12345678", "94d4436bc3b5b693feb959b7d4642fcb"),
        (
            "192.0.2.7,60|203.0.113.9", "dnspodpa",
            "523362ba93cdece169d457d3f0351d184c794bac9fb328c709443eb85b754b4d"
        ),
    ])
    func encryptsAsOpenSSLDoes(_ plain: String, _ key: String, _ expected: String) throws {
        let sealed = DESECB.encrypt(Array(plain.utf8), key: DESECB.Key(Array(key.utf8)))
        #expect(hexEncoded(sealed) == expected)
        let bytes = try #require(hexDecoded(expected))
        let opened = try #require(DESECB.decrypt(bytes, key: DESECB.Key(Array(key.utf8))))
        #expect(String(decoding: opened, as: UTF8.self) == plain)
    }

    /// The FIPS 46 worked example, one raw block (no padding): key 133457799BBCDFF1.
    @Test func fipsWorkedExample() {
        let key = [0x13, 0x34, 0x57, 0x79, 0x9B, 0xBC, 0xDF, 0xF1] as [UInt8]
        let block = DESECB.crypt(0x0123_4567_89AB_CDEF, subkeys: DESECB.schedule(key), decrypting: false)
        #expect(block == 0x85E8_1354_0F0A_B405)
    }

    @Test func wrongKeyTruncatedOrTamperedInputIsRefusedNotTrapped() throws {
        let sealed = try #require(hexDecoded("87ae992c1321f299da3c0210a9900ae7"))
        #expect(DESECB.decrypt(sealed, key: DESECB.Key(Array("wrongkey".utf8))) == nil)
        #expect(DESECB.decrypt(Array(sealed.dropLast(3)), key: DESECB.Key(Array("dnspodpa".utf8))) == nil)
        #expect(DESECB.decrypt([], key: DESECB.Key(Array("dnspodpa".utf8))) == nil)
        var tampered = sealed
        tampered[tampered.count - 1] ^= 0x01
        #expect(DESECB.decrypt(tampered, key: DESECB.Key(Array("dnspodpa".utf8))) == nil)
    }
}

@Suite struct HexAndSecretTests {
    @Test func hexRoundTripsAndRefusesWhatIsNotHex() {
        #expect(hexEncoded([0x00, 0xAB, 0xFF]) == "00abff")
        #expect(hexDecoded("00ABff") == [0x00, 0xAB, 0xFF])
        #expect(hexDecoded("abc") == nil)
        #expect(hexDecoded("zz") == nil)
        #expect(hexDecoded("") == [])
    }

    @Test func secretsNeverPrint() {
        let key = ResolverSecret("0123456789abcdef\n")
        #expect(key.bytes.count == 16)
        let auth = DNSPodAuth.aes(id: "1001", key: key)
        let endpoint = try! ResolverEndpoint(url: "http://119.29.29.98/d")
        let specs: [ResolverSpec] = [
            .dnspod(endpoint, auth: auth), .json(endpoint, secret: ResolverSecret("IAmASecret")),
        ]
        var texts = ["\(key)", String(reflecting: key), "\(auth)", String(reflecting: auth)]
        for spec in specs {
            texts += ["\(spec)", String(reflecting: spec), spec.description]
            var dumped = ""
            dump(spec, to: &dumped)
            texts.append(dumped)
        }
        for text in texts {
            #expect(!text.contains("0123456789abcdef"), "\(text)")
            #expect(!text.contains("IAmASecret"), "\(text)")
        }
        #expect("\(key)".contains("<redacted>"))
    }

    @Test func credentialProblemsAreNamedWithoutTheSecret() {
        let short = DNSPodAuth.aes(id: "1001", key: ResolverSecret("tooshort"))
        #expect(short.problem == "an AES key is 16 bytes; this one is 8")
        #expect(DNSPodAuth.des(id: "1001", key: ResolverSecret("1234567")).problem != nil)
        #expect(DNSPodAuth.des(id: "1001", key: ResolverSecret("dnspodpass")).problem == nil)
        #expect(DNSPodAuth.token(id: "x1", token: ResolverSecret("t")).problem?.contains("not a number") == true)
        #expect(DNSPodAuth.token(id: "1", token: ResolverSecret("")).problem == "the token is empty")
    }

    @Test func constantTimeComparison() {
        #expect(constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        #expect(!constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        #expect(!constantTimeEqual(Array("abc".utf8), Array("ab".utf8)))
    }
}

@Suite struct ClientAddressFormatTests {
    @Test func dnspodSingleAndDualStackWithClientAddress() throws {
        let single = try DNSPodFormat.parse("1.2.3.4;5.6.7.8,120|203.0.113.9", names: ["a.com"], query: .ipv4)
        #expect(single["a.com"]?.ipv4?.addresses.map(\.description) == ["1.2.3.4", "5.6.7.8"])
        #expect(single["a.com"]?.ipv4?.clientAddress == IPAddress("203.0.113.9"))
        let dual = try DNSPodFormat.parse("1.2.3.4,120-2001:db8::1,60|2001:db8::99", names: ["a.com"], query: .both)
        #expect(dual["a.com"]?.ipv6?.addresses == [IPAddress("2001:db8::1")!])
        #expect(dual["a.com"]?.ipv6?.clientAddress == IPAddress("2001:db8::99"))
        // `query=1`: the single answer carries its name.
        let named = try DNSPodFormat.parse("a.com.:1.2.3.4,120|203.0.113.9", names: ["a.com"], query: .ipv4)
        #expect(named["a.com"]?.ipv4?.clientAddress == IPAddress("203.0.113.9"))
    }

    /// The vendor's docs show `|clientip` on the last batch line only; its SDKs expect it on each.
    @Test(arguments: [
        "a.com.:1.2.3.4,60\nb.com.:0|203.0.113.9",
        "a.com.:1.2.3.4,60|203.0.113.9\nb.com.:0|203.0.113.9",
    ])
    func dnspodBatchClientAddressEitherWay(_ body: String) throws {
        let r = try DNSPodFormat.parse(body, names: ["a.com", "b.com"], query: .ipv4)
        #expect(r["a.com"]?.ipv4?.addresses == [IPAddress("1.2.3.4")!])
        #expect(r["a.com"]?.ipv4?.clientAddress == IPAddress("203.0.113.9"))
        #expect(r["b.com"]?.ipv4?.addresses == [])
    }

    @Test func dnspodGarbageClientAddressIsAFormatError() {
        #expect(throws: AnswerFormatError.self) {
            try DNSPodFormat.parse("1.2.3.4,60|not-an-ip", names: ["a.com"], query: .ipv4)
        }
        #expect(
            DNSPodFormat.format(
                HostAnswer(ipv4: FamilyAnswer(addresses: [IPAddress("1.2.3.4")!], ttl: 60)),
                query: .ipv4,
                withTTL: true,
                clientAddress: IPAddress("203.0.113.9")
            )
                == "1.2.3.4,60|203.0.113.9"
        )
    }

    @Test func alibabaClientAddressAndRefusalCode() throws {
        let body = Array(#"{"host":"a.com","ips":["1.2.3.4"],"ttl":60,"client_ip":"47.96.236.37"}"#.utf8)
        let answer = try AlibabaJSONFormat.parse(body, query: .ipv4, host: "a.com")
        #expect(answer.ipv4?.clientAddress == IPAddress("47.96.236.37"))
        #expect(throws: AnswerFormatError.self) {
            try AlibabaJSONFormat.parse(Array(#"{"ips":[],"client_ip":"x"}"#.utf8), query: .ipv4)
        }
        #expect(AlibabaJSONFormat.errorCode(Array(#"{"code":"SignatureExpired"}"#.utf8)) == "SignatureExpired")
        #expect(AlibabaJSONFormat.errorCode(Array(#"{"code":"a\u001b[31m b"}"#.utf8)) == "a31mb")
        #expect(AlibabaJSONFormat.errorCode(Array("<html>".utf8)) == nil)
    }
}
