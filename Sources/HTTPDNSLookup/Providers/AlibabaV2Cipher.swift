// Alibaba Cloud EMAS v2's encrypted modes, as the vendor's SDKs build them (aliyun/alibabacloud-httpdns-
// android-sdk `impl/AESEncryptService.java` and `resolve/ResolveHostHelper.java`, -ios-sdk's v2 request
// builder), client and server sharing this type:
//   request  `enc` = lower-case hex of IV ‖ ciphertext of the JSON object {"dn":"a.com,b.com","q":"4,6"}
//            (plus "cip" when a client subnet is set: the fields that plain mode sends in the clear);
//            the signature then covers exactly enc, exp, id, m, v.
//   answer   {"code":"success","mode":N,"data":"BASE64"} with BASE64 = standard Base64 of IV ‖ ciphertext
//            of the plain mode's `data` object ({"cip":…,"answers":[…]}).
//   m=1      AES-CBC, a random 16-byte IV, PKCS#7 padding.
//   m=2      AES-GCM, a random 12-byte nonce, the 16-byte tag after the ciphertext, no additional data.
// The key is the account's AES key, hex-decoded (16 bytes: AES-128, as the iOS SDK requires; 24 and 32
// are taken too). Request hex and answer Base64 differ on purpose: that is what the SDKs do.

import Crypto
import Foundation
import HTTPDNSCore

package struct AlibabaV2Cipher: Sendable {
    let mode: AlibabaEncryption.Mode
    /// The key bytes (not a `SymmetricKey`: on Apple platforms that is CryptoKit's, not Sendable).
    private let key: [UInt8]

    /// Nil when the key is not hex of 16, 24 or 32 bytes (`ResolverSpec.credentialProblem` says so first).
    package init?(_ encryption: AlibabaEncryption) {
        guard let key = encryption.key.hexBytes, [16, 24, 32].contains(key.count) else { return nil }
        self.mode = encryption.mode
        self.key = key
    }

    /// `plain` encrypted under a fresh random IV or nonce: IV ‖ ciphertext (‖ tag). Throws
    /// `AlibabaV2CipherError` when the cipher refuses (it does not with the key lengths `init` allows).
    func seal(_ plain: [UInt8]) throws(AlibabaV2CipherError) -> [UInt8] {
        switch mode {
        case .cbc: return try seal(plain, iv: AESCBC.randomIV())
        case .gcm: return try seal(plain, iv: Array(AES.GCM.Nonce()))
        }
    }

    /// `plain` under the given IV (16 bytes, CBC) or nonce (12, GCM): for known-answer tests. Throws
    /// `AlibabaV2CipherError` for an IV of another length.
    func seal(_ plain: [UInt8], iv: [UInt8]) throws(AlibabaV2CipherError) -> [UInt8] {
        let symmetric = SymmetricKey(data: key)
        do {
            switch mode {
            case .cbc:
                return iv + (try AESCBC.encrypt(plain, key: key, iv: iv))
            case .gcm:
                let box = try AES.GCM.seal(plain, using: symmetric, nonce: try AES.GCM.Nonce(data: iv))
                return iv + Array(box.ciphertext) + Array(box.tag)
            }
        } catch {
            throw AlibabaV2CipherError("cannot be sealed with a \(iv.count)-byte IV (\(error))")
        }
    }

    /// The plaintext of IV ‖ ciphertext (‖ tag). Throws `AlibabaV2CipherError` saying what is wrong.
    func open(_ sealed: [UInt8]) throws(AlibabaV2CipherError) -> [UInt8] {
        switch mode {
        case .cbc:
            guard sealed.count >= 32, sealed.count % 16 == 0 else {
                throw AlibabaV2CipherError("is \(sealed.count) bytes, not a 16-byte IV and whole AES blocks")
            }
            do {
                return try AESCBC.decrypt(sealed[16...], key: key, iv: Array(sealed[0..<16]))
            } catch {
                throw AlibabaV2CipherError("does not decrypt with the AES key (bad padding: wrong key, or tampered)")
            }
        case .gcm:
            guard sealed.count >= 12 + 16 else {
                throw AlibabaV2CipherError("is \(sealed.count) bytes, shorter than a 12-byte nonce and a 16-byte tag")
            }
            do {
                let box = try AES.GCM.SealedBox(combined: sealed)
                return Array(try AES.GCM.open(box, using: SymmetricKey(data: key)))
            } catch {
                throw AlibabaV2CipherError("does not authenticate with the AES key (wrong key, or tampered)")
            }
        }
    }

    /// The request's `enc` for `fields` (their JSON object, keys sorted so the text is stable).
    func encryptedFields(_ fields: [(String, String)]) throws(AlibabaV2CipherError) -> String {
        hexEncoded(try seal(Self.json(fields)))
    }

    /// The fields inside a request's `enc`. Throws `AlibabaV2CipherError`.
    package func fields(ofEncrypted enc: String) throws(AlibabaV2CipherError) -> [String: String] {
        guard let bytes = hexDecoded(enc) else { throw AlibabaV2CipherError("is not hex") }
        let plain = try open(bytes)
        guard let object = try? JSONSerialization.jsonObject(with: Data(plain)) as? [String: Any] else {
            throw AlibabaV2CipherError("decrypts to something that is not a JSON object")
        }
        var fields: [String: String] = [:]
        for (key, value) in object {
            guard let text = value as? String else { throw AlibabaV2CipherError("holds a field that is not text") }
            fields[key] = text
        }
        return fields
    }

    /// An answer's encrypted `data` string opened to the plain `data` object's JSON.
    func openAnswer(_ base64: String) throws(AlibabaV2CipherError) -> [UInt8] {
        guard let bytes = Data(base64Encoded: base64) else { throw AlibabaV2CipherError("is not Base64") }
        return try open(Array(bytes))
    }

    /// The plain `data` object's JSON sealed for an answer: Base64.
    package func sealAnswer(_ data: [UInt8]) throws(AlibabaV2CipherError) -> String {
        Data(try seal(data)).base64EncodedString()
    }

    /// `{"k":"v",…}` with the keys sorted.
    static func json(_ fields: [(String, String)]) -> [UInt8] {
        var object: [String: String] = [:]
        for (key, value) in fields { object[key] = value }
        return Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8))
    }
}

/// Why a v2 encrypted request or answer could not be opened; the reason completes "the enc / data …".
package struct AlibabaV2CipherError: Error, Equatable, CustomStringConvertible {
    package var reason: String
    init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}
