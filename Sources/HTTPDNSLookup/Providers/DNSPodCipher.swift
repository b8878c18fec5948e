// The encrypted forms of Tencent Cloud HTTPDNS (DNSPod enterprise), as the vendor's SDKs send them
// (DNSPod/httpdns-sdk-ios `MSDKDnsInfoTool.m`, httpdns-sdk-android `AesCipherSuite`/`DesCipherSuite`,
// and cloud.tencent.com/document/product/379/95499):
//   alg=aes  dn = hex(IV) + hex(AES-128-CBC(key, IV, text)), a fresh random 16-byte IV per query, PKCS#7;
//            the answer body is the same shape, with the service's own IV. The key is the 16 UTF-8
//            bytes the console shows (not hex).
//   alg=des  dn = hex(DES-ECB(key, text)), PKCS#7; the answer is DES-ECB hex. Only the key's first 8
//            bytes are used. The service takes a query with `id` and neither `alg` nor `token` as DES.
// Hex is written in lower case and read in either. A batch (`a.com,b.com`) is one encrypted string.
// The client (DNSPodProvider) and the server (`httpdns serve`) share this type.

import Foundation
import HTTPDNSCore

/// Encrypts and decrypts DNSPod enterprise text (the `dn` parameter, the answer body) for one key.
package struct DNSPodCipher: Sendable {
    package enum Algorithm: String, Sendable {
        case aes, des
    }

    /// The key, ready to use: AES's 16 bytes (for `AESCBC`), DES's with its round keys worked out once.
    private enum Material: Sendable {
        case aes([UInt8])
        case des(DESECB.Key)
    }

    private let material: Material
    package var algorithm: Algorithm {
        switch material {
        case .aes: return .aes
        case .des: return .des
        }
    }

    /// `key`: 16 bytes for AES; at least 8 for DES (the first 8 are used). The caller has checked it
    /// (`ResolverSpec.credentialProblem`, `DNSPodAuth.problem`).
    init(_ algorithm: Algorithm, key: ResolverSecret) {
        switch algorithm {
        case .aes:
            precondition(key.bytes.count == 16, "DNSPod AES key length not checked")
            material = .aes(Array(key.bytes))
        case .des:
            precondition(key.bytes.count >= 8, "DNSPod DES key length not checked")
            material = .des(DESECB.Key(Array(key.bytes.prefix(8))))
        }
    }

    /// The cipher of an AES or DES account, nil for the token form.
    package init?(_ auth: DNSPodAuth) {
        switch auth {
        case .aes(_, let key): self.init(.aes, key: key)
        case .des(_, let key): self.init(.des, key: key)
        case .token: return nil
        }
    }

    /// `text` encrypted and hex-encoded (AES: a fresh IV in front).
    package func seal(_ text: String) -> String {
        let plain = Array(text.utf8)
        switch material {
        case .des(let key):
            return hexEncoded(DESECB.encrypt(plain, key: key))
        case .aes(let key):
            let iv = AESCBC.randomIV()
            // Cannot fail: the key is 16 bytes and the IV is 16 bytes.
            let sealed = (try? AESCBC.encrypt(plain, key: key, iv: iv)) ?? []
            return hexEncoded(iv) + hexEncoded(sealed)
        }
    }

    /// The text inside hex `sealed`. Throws a `DNSPodCipherError` saying which step failed: not hex,
    /// not whole blocks, bad padding (a wrong key or a tampered answer), not UTF-8 text.
    package func open(_ sealed: some StringProtocol) throws(DNSPodCipherError) -> String {
        let trimmed = String(sealed).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw DNSPodCipherError("is empty") }
        guard let bytes = hexDecoded(trimmed) else {
            throw DNSPodCipherError(
                trimmed.utf8.count % 2 == 1 ? "is not hex (odd length)" : "is not hex (\"\(trimmed.prefix(16))…\")"
            )
        }
        let plain: [UInt8]
        switch material {
        case .des(let key):
            guard bytes.count % 8 == 0 else {
                throw DNSPodCipherError("is \(bytes.count) bytes, not whole 8-byte DES blocks (truncated?)")
            }
            guard let opened = DESECB.decrypt(bytes, key: key) else {
                throw DNSPodCipherError("does not decrypt with the DES key (bad padding: wrong key, or tampered)")
            }
            plain = opened
        case .aes(let key):
            guard bytes.count >= 32, bytes.count % 16 == 0 else {
                throw DNSPodCipherError(
                    "is \(bytes.count) bytes, not a 16-byte IV and whole AES blocks (truncated?)"
                )
            }
            do {
                plain = try AESCBC.decrypt(bytes[16...], key: key, iv: Array(bytes[0..<16]))
            } catch {
                throw DNSPodCipherError("does not decrypt with the AES key (bad padding: wrong key, or tampered)")
            }
        }
        guard let text = String(strictUTF8: plain) else {
            throw DNSPodCipherError("decrypts to bytes that are not text (wrong key?)")
        }
        return text
    }
}

/// Why DNSPod enterprise text could not be opened; the reason completes "the answer …".
package struct DNSPodCipherError: Error, Hashable, Sendable, CustomStringConvertible {
    package var reason: String
    init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}
