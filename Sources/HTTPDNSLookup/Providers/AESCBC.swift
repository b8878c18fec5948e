// AES-CBC with PKCS#7 padding, for the vendors' encrypted modes (Alibaba v2 `m=1`, DNSPod `alg=aes`).
// On Apple platforms it comes from CommonCrypto, the system's own, so Apple builds carry no BoringSSL
// for it; elsewhere from swift-crypto's `_CryptoExtras`. The CommonCrypto branch is
// COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE; the known-answer vectors both branches
// must meet are the ones the Linux tests prove (DNSPodCipherTests, AlibabaV2CipherTests).

#if canImport(CommonCrypto)
    import CommonCrypto
#else
    import Crypto
    import _CryptoExtras
#endif

/// AES-CBC, PKCS#7, with a 16-byte IV and a 16, 24 or 32-byte key.
enum AESCBC {
    /// The cipher refused: a key or IV of the wrong length, or (decrypting) bad padding.
    struct Failure: Error {}

    /// A fresh random IV from the system's generator.
    static func randomIV() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// `plain` encrypted under `key` and `iv`, padded (the IV is not included). Throws `Failure`.
    static func encrypt(_ plain: [UInt8], key: [UInt8], iv: [UInt8]) throws(Failure) -> [UInt8] {
        #if canImport(CommonCrypto)
            return try crypt(CCOperation(kCCEncrypt), plain[...], key: key, iv: iv)
        #else
            do {
                return Array(try AES._CBC.encrypt(plain, using: SymmetricKey(data: key), iv: .init(ivBytes: iv)))
            } catch {
                throw Failure()
            }
        #endif
    }

    /// The plaintext of `sealed` (whole blocks, padded) under `key` and `iv`. Throws `Failure`.
    static func decrypt(_ sealed: ArraySlice<UInt8>, key: [UInt8], iv: [UInt8]) throws(Failure) -> [UInt8] {
        #if canImport(CommonCrypto)
            return try crypt(CCOperation(kCCDecrypt), sealed, key: key, iv: iv)
        #else
            do {
                return Array(try AES._CBC.decrypt(sealed, using: SymmetricKey(data: key), iv: .init(ivBytes: iv)))
            } catch {
                throw Failure()
            }
        #endif
    }

    #if canImport(CommonCrypto)
        private static func crypt(
            _ operation: CCOperation,
            _ input: ArraySlice<UInt8>,
            key: [UInt8],
            iv: [UInt8]
        ) throws(Failure) -> [UInt8] {
            guard [16, 24, 32].contains(key.count), iv.count == 16 else { throw Failure() }
            var output = [UInt8](repeating: 0, count: input.count + 16)
            var written = 0
            let capacity = output.count
            let status = input.withUnsafeBytes { inputBytes in
                output.withUnsafeMutableBytes { outputBytes in
                    CCCrypt(
                        operation,
                        CCAlgorithm(kCCAlgorithmAES),
                        CCOptions(kCCOptionPKCS7Padding),
                        key,
                        key.count,
                        iv,
                        inputBytes.baseAddress,
                        inputBytes.count,
                        outputBytes.baseAddress,
                        capacity,
                        &written
                    )
                }
            }
            guard status == CCCryptorStatus(kCCSuccess) else { throw Failure() }
            return Array(output.prefix(written))
        }
    #endif
}
