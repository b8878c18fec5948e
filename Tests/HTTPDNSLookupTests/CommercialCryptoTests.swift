// AES (Tencent Cloud DNSPod `alg=aes`) and Alibaba's `sign_d` signature against fixed vectors from
// independent implementations, and every way a sealed answer can be wrong.

import HTTPDNSCore
@testable import HTTPDNSLookup
import Testing

@Suite struct DNSPodCipherTests {
    static let aesKey = ResolverSecret("0123456789abcdef")

    /// Made by `openssl enc -aes-128-cbc -K 30313233343536373839616263646566 -iv 000102…0f` (and
    /// `-iv f0f1…ff`): the IV in front, as the vendor's SDKs send it.
    @Test(arguments: [
        ("000102030405060708090a0b0c0d0e0f" + "147d656a8659951bfcd6e76b9a246905", "a.test,b.test"),
        (
            "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"
                + "51c3cbf3271a1a8c65d3bac97d82b9a9f015572a7f462ab33918b3caea862430",
            "192.0.2.7,60|203.0.113.9"
        ),
    ])
    func aesOpensWhatOpenSSLSealed(_ sealed: String, _ plain: String) throws {
        let cipher = DNSPodCipher(.aes, key: Self.aesKey)
        #expect(try cipher.open(sealed) == plain)
        #expect(try cipher.open(sealed.uppercased()) == plain)
    }

    @Test func aesSealsWithAFreshIVEachTime() throws {
        let cipher = DNSPodCipher(.aes, key: Self.aesKey)
        let first = cipher.seal("a.test")
        let second = cipher.seal("a.test")
        #expect(first != second)
        #expect(first.prefix(32) != second.prefix(32))
        #expect(first.count == 64)  // 16-byte IV + one block, in hex
        #expect(first == first.lowercased())
        #expect(try cipher.open(first) == "a.test")
    }

    @Test func desSealsAsTheVendorsExample() throws {
        let cipher = DNSPodCipher(.des, key: ResolverSecret("dnspodpass"))
        #expect(cipher.seal("www.dnspod.cn") == "87ae992c1321f299da3c0210a9900ae7")
        #expect(try cipher.open("87ae992c1321f299da3c0210a9900ae7") == "www.dnspod.cn")
    }

    /// Each failure says which step failed; none traps and none yields text.
    @Test(arguments: [
        (DNSPodCipher.Algorithm.aes, "", "is empty"),
        (.aes, "abc", "odd length"),
        (.aes, "zz" + String(repeating: "00", count: 31), "is not hex"),
        (.aes, "000102030405060708090a0b0c0d0e0f147d656a", "not a 16-byte IV and whole AES blocks"),
        (.aes, "000102030405060708090a0b0c0d0e0f", "not a 16-byte IV and whole AES blocks"),
        // The last ciphertext byte flipped: the padding no longer checks.
        (.aes, "000102030405060708090a0b0c0d0e0f147d656a8659951bfcd6e76b9a246904", "does not decrypt"),
        (.des, "87ae992c1321f299da3c0210a9900a", "not whole 8-byte DES blocks"),
        (.des, "87ae992c1321f299da3c0210a9900ae6", "does not decrypt"),
    ])
    func badSealedTextIsAClearFailure(_ algorithm: DNSPodCipher.Algorithm, _ sealed: String, _ why: String) {
        let key = algorithm == .aes ? Self.aesKey : ResolverSecret("dnspodpass")
        do {
            let text = try DNSPodCipher(algorithm, key: key).open(sealed)
            Issue.record("opened to \(text)")
        } catch {
            #expect(error.reason.contains(why), "\(error.reason)")
        }
    }

    @Test func aWrongKeyDoesNotOpen() {
        let sealed = DNSPodCipher(.aes, key: Self.aesKey).seal("a.test")
        #expect(throws: DNSPodCipherError.self) {
            try DNSPodCipher(.aes, key: ResolverSecret("fedcba9876543210")).open(sealed)
        }
    }
}

@Suite struct AlibabaSigningTests {
    /// The vector in Alibaba Cloud's authentication docs (also checked with Python's hashlib).
    @Test func signatureMatchesTheVendorsVector() {
        let s = AlibabaSigning.signature(
            host: "www.aliyun.com",
            secret: ResolverSecret("IAmASecret"),
            expiry: 1_534_316_400
        )
        #expect(s == "60c71e98b6d7fcbb366243e224eab457")
    }

    /// The v2 API's HMAC-SHA256 over the sorted parameters, checked with Python's hmac module:
    /// `hmac.new(bytes.fromhex(key), b"dn=www.aliyun.com&exp=1534316400&id=139450&m=0&q=4,6&v=1.0",
    /// hashlib.sha256).hexdigest()`.
    @Test func v2SignatureMatchesAnIndependentHMAC() throws {
        let key = try #require(hexDecoded("00112233445566778899aabbccddeeff"))
        let parameters = [
            ("id", "139450"), ("m", "0"), ("exp", "1534316400"), ("v", "1.0"), ("dn", "www.aliyun.com"), ("q", "4,6"),
        ]
        #expect(
            AlibabaSigning.v2Signature(parameters, key: key)
                == "2ba571048a5b8f9c81e5ef9aecc5da674e2da11b4350d90132382e0066885295"
        )
        // The server picks the signed parameters out of a query: not `s`, `sid`, `net` or `sdk`.
        let query = Dictionary(uniqueKeysWithValues: parameters + [("s", "x"), ("sid", "y"), ("sdns-k", "v")])
        #expect(Set(AlibabaSigning.v2Signed(query).map(\.0)) == ["id", "m", "exp", "v", "dn", "q", "sdns-k"])
    }

    @Test func signedPathTakesTheAccountFromTheUnsignedOne() {
        #expect(AlibabaJSONFormat.signedPath(for: "/139450/d") == "/139450/sign_d")
        #expect(AlibabaJSONFormat.signedPath(for: "/139450/sign_d") == "/139450/sign_d")
        #expect(AlibabaJSONFormat.signedPath(for: "/resolve") == nil)
        #expect(AlibabaJSONFormat.signedPath(for: "/a/b/d") == nil)
        #expect(AlibabaJSONFormat.signedPath(for: "//d") == nil)
    }
}

/// Alibaba v2's encrypted modes against vectors made independently: Python's `cryptography` (both modes)
/// and `openssl enc -aes-128-cbc -K 000102…0f -iv a0a1…af` (CBC, the same bytes), with a fixed IV or nonce.
@Suite struct AlibabaV2CipherTests {
    static let key = ResolverSecret("000102030405060708090a0b0c0d0e0f")
    static let plain = Array(#"{"dn":"a.example.com,b.example.com","q":"4,6"}"#.utf8)
    static let vectors: [(AlibabaEncryption.Mode, String)] = [
        (
            .cbc,
            "a0a1a2a3a4a5a6a7a8a9aaabacadaeafab511d570643d9d27d8db2c4209234616e05d649057330ac2fea39337a2b2de2a66a26a4c4"
                + "76bb96baf1304eeff81f16"
        ),
        (
            .gcm,
            "b0b1b2b3b4b5b6b7b8b9babb25ebd4f3e5ad095e904f2367b80a7383f730381ae5803983d9976ac9d6760ca4f4926f078013a1d850"
                + "3a822e52a94012142b41bc707eaf268c834219b98e"
        ),
    ]

    @Test func sealsAndOpensAsPythonAndOpenSSLDo() throws {
        for (mode, expected) in Self.vectors {
            let cipher = try #require(AlibabaV2Cipher(AlibabaEncryption(mode: mode, key: Self.key)))
            let iv = Array(hexDecoded(expected.prefix(mode == .cbc ? 32 : 24))!)
            #expect(hexEncoded(try cipher.seal(Self.plain, iv: iv)) == expected, "\(mode)")
            #expect(try cipher.open(hexDecoded(expected)!) == Self.plain, "\(mode)")
            #expect(try cipher.fields(ofEncrypted: expected) == ["dn": "a.example.com,b.example.com", "q": "4,6"])
            // An IV of the wrong length is refused, never a crash.
            #expect(throws: AlibabaV2CipherError.self) { try cipher.seal(Self.plain, iv: [1, 2, 3]) }
            // A fresh IV each time, and what is sealed opens again.
            let first = try cipher.seal(Self.plain)
            #expect(try first != cipher.seal(Self.plain))
            #expect(try cipher.open(first) == Self.plain)
            #expect(try cipher.openAnswer(try cipher.sealAnswer(Self.plain)) == Self.plain)
        }
    }

    @Test func tamperedTruncatedOrForeignInputIsRefusedWithAReason() throws {
        for (mode, expected) in Self.vectors {
            let cipher = try #require(AlibabaV2Cipher(AlibabaEncryption(mode: mode, key: Self.key)))
            var bytes = hexDecoded(expected)!
            bytes[bytes.count - 1] ^= 0x01
            let other = try #require(
                AlibabaV2Cipher(AlibabaEncryption(mode: mode, key: ResolverSecret("ffeeddccbbaa99887766554433221100")))
            )
            for bad in [bytes, Array(bytes.prefix(20)), [], Array(repeating: 0, count: 33)] {
                #expect(throws: AlibabaV2CipherError.self, "\(mode) \(bad.count)") { try cipher.open(bad) }
            }
            #expect(throws: AlibabaV2CipherError.self) { try other.open(hexDecoded(expected)!) }
            #expect(throws: AlibabaV2CipherError.self) { try cipher.fields(ofEncrypted: "zz") }
            #expect(throws: AlibabaV2CipherError.self) { try cipher.openAnswer("%%%") }
            // Decrypts, but is not a JSON object of text fields.
            #expect(throws: AlibabaV2CipherError.self) {
                try cipher.fields(ofEncrypted: hexEncoded(try cipher.seal(Array("[1]".utf8))))
            }
        }
        // Keys that are not hex of 16, 24 or 32 bytes make no cipher.
        for bad in ["", "00", "not-hex", String(repeating: "0", count: 30)] {
            #expect(AlibabaV2Cipher(AlibabaEncryption(key: ResolverSecret(bad))) == nil, "\(bad)")
        }
    }
}
