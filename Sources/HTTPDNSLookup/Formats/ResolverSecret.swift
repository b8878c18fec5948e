// Credentials of commercial HTTPDNS services. A secret is held as bytes in a type that never
// shows them: its reflection (which `print`, string interpolation, `String(reflecting:)` and `dump`
// use) says `<redacted>`, and nothing in the library formats its bytes except to use them.

import Foundation
import HTTPDNSCore

/// A key, token or signing secret for an HTTPDNS service. Its bytes are never shown: printed,
/// interpolated or dumped it reads `ResolverSecret(value: "<redacted>")`.
///
/// Build it from what the vendor's console shows (a key such as `0123456789abcdef`, a token, a secret),
/// read from the keychain or a file at run time, never from source code.
public struct ResolverSecret: Hashable, Sendable, CustomReflectable {
    package let bytes: [UInt8]

    /// The secret as the vendor's console shows it; its UTF-8 bytes are used, surrounding white space
    /// (a trailing newline from a file) removed.
    ///
    /// - Parameter value: The secret as text.
    public init(_ value: String) {
        bytes = Array(value.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    }

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// Shows `<redacted>` in place of the secret.
    public var customMirror: Mirror { Mirror(self, children: ["value": "<redacted>"], displayStyle: .struct) }

    package var isEmpty: Bool { bytes.isEmpty }

    /// The secret as text, to send (a token) or to decode (a hex key). Never for messages or logs.
    package var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The bytes of a secret written in hex (Alibaba's v2 key, as its console shows it); nil when it is
    /// empty or not hex.
    package var hexBytes: [UInt8]? { hexDecoded(text).flatMap { $0.isEmpty ? nil : $0 } }
}

/// How queries to a Tencent Cloud HTTPDNS (DNSPod enterprise) account are protected, as the account's
/// console gives it: the account id with an AES key, a DES key or an HTTPS token.
///
/// - `aes`: the name is sent AES-128-CBC encrypted (`alg=aes`), the answer comes back encrypted; the
///   key is 16 bytes.
/// - `des`: the same with DES-ECB (`alg=des`); only the key's first 8 bytes are used, as the vendor's
///   SDKs do. DES is weak (a 56-bit key): use it only where the account offers nothing else.
/// - `token`: plain name and answer over HTTPS (`token=`); refused on an `http:` endpoint.
public enum DNSPodAuth: Hashable, Sendable {
    /// Account id and 16-byte AES key (`alg=aes`).
    case aes(id: String, key: ResolverSecret)
    /// Account id and DES key, at least 8 bytes (`alg=des`). Weak; see above.
    case des(id: String, key: ResolverSecret)
    /// Account id and token, sent over HTTPS only.
    case token(id: String, token: ResolverSecret)

    var id: String {
        switch self {
        case .aes(let id, _), .des(let id, _), .token(let id, _): return id
        }
    }

    /// The token of the token form, nil for the others.
    var token: ResolverSecret? {
        if case .token(_, let token) = self { return token }
        return nil
    }

    /// The console shows an account id as a number.
    var hasValidID: Bool { !id.isEmpty && id.utf8.allSatisfy { (0x30...0x39).contains($0) } }

    /// Nil when usable, else what is wrong (the secret itself is never in the text).
    package var problem: String? {
        guard hasValidID else {
            return "the DNSPod account id \"\(id.prefix(40))\" is not a number (the console shows it as a number)"
        }
        switch self {
        case .aes(_, let key) where key.bytes.count != 16:
            return "an AES key is 16 bytes; this one is \(key.bytes.count)"
        case .des(_, let key) where key.bytes.count < 8:
            return "a DES key is at least 8 bytes (the first 8 are used); this one is \(key.bytes.count)"
        case .token(_, let token) where token.isEmpty:
            return "the token is empty"
        default:
            return nil
        }
    }
}

/// Which credential of a resolver spec a problem is with (the CLI names the flag that gave it).
package enum ResolverCredential: Sendable {
    case dnspodID, dnspodKey, dnspodToken, alibabaSecret, alibabaAESKey
}

extension ResolverSpec {
    /// Nil when the spec's credentials fit its endpoint, else which credential is wrong (nil: the
    /// resolver URL itself) and what to do; never the secret. The one check for the library (the
    /// resolver refuses such a spec) and the CLI (a usage error naming the flag).
    package var credentialProblem: (credential: ResolverCredential?, reason: String)? {
        switch self {
        case .dnspod(let endpoint, let auth?):
            if let problem = auth.problem {
                let credential: ResolverCredential =
                    !auth.hasValidID ? .dnspodID : auth.token == nil ? .dnspodKey : .dnspodToken
                return (credential, problem)
            }
            if auth.token != nil, !endpoint.isTLS {
                return (
                    .dnspodToken,
                    "the token travels only over HTTPS, and \(self) is http; use an https:// resolver URL (e.g. https://119.29.29.99/d), or a key"
                )
            }
            return nil
        case .json(let endpoint, let secret, let encryption):
            if secret?.isEmpty == true { return (.alibabaSecret, "the Alibaba signing secret is empty") }
            if endpoint.path == AlibabaJSONFormat.v2Path {
                guard let account = endpoint.queryValue("id"), !account.isEmpty else {
                    return (nil, "the v2 API needs the account: give the resolver as json:http://HOST/v2/d?id=ACCOUNT")
                }
                if let secret, secret.hexBytes == nil {
                    return (.alibabaSecret, "the v2 API's secret is hex, as the console shows it; this one is not")
                }
                if let encryption, ![16, 24, 32].contains(encryption.key.hexBytes?.count ?? 0) {
                    return (
                        .alibabaAESKey,
                        "the AES key is hex of 16, 24 or 32 bytes, as the console shows it; this one is not"
                    )
                }
                return nil
            }
            if encryption != nil {
                return (
                    .alibabaAESKey,
                    "encrypted queries are the v2 API's; give the resolver as json:http://HOST/v2/d?id=ACCOUNT, not \(self)"
                )
            }
            if secret != nil, AlibabaJSONFormat.accountPath(endpoint.path) == nil {
                return (
                    .alibabaSecret,
                    "signed queries need the account; give the resolver as json:http://HOST/ACCOUNT/d or json:http://HOST/v2/d?id=ACCOUNT, not \(self)"
                )
            }
            return nil
        default:
            return nil
        }
    }
}

// MARK: hex

/// Lower-case hex, as the vendors' SDKs write it.
func hexEncoded(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Bytes of a hex string (either case); nil when the length is odd or a character is not a hex digit.
func hexDecoded(_ text: some StringProtocol) -> [UInt8]? {
    let utf8 = Array(text.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
    var out: [UInt8] = []
    out.reserveCapacity(utf8.count / 2)
    for i in stride(from: 0, to: utf8.count, by: 2) {
        guard let high = nibble(utf8[i]), let low = nibble(utf8[i + 1]) else { return nil }
        out.append(high << 4 | low)
    }
    return out
}

/// Compares in time that depends on the lengths only, not on where the bytes differ (for signatures
/// and tokens a server checks).
package func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}
