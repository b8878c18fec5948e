// Alibaba Cloud EMAS HTTPDNS request signing, the `sign_d` form its Go and C SDKs send and its iOS and
// Android SDKs sent before 3.x (aliyun/alicloud-httpdns-go-sdk `auth.go`, alibabacloud-httpdns-c-sdk
// `hdns_sign.c`; help.aliyun.com/document_detail/56810):
//   GET /ACCOUNT/sign_d?host=NAME[&query=4|6|4,6]&t=EXPIRY&s=SIGNATURE
//   SIGNATURE = lower-case hex MD5 of the UTF-8 string "NAME-SECRET-EXPIRY"
//   EXPIRY    = Unix seconds when the signature stops being valid; the service accepts at most 24 h
//               ahead. The iOS and Android SDKs use now + 10 minutes, as we do.
// A refused query is HTTP 403 with `{"code":"InvalidSignature"}` or `{"code":"SignatureExpired"}`.
// The docs' vector: www.aliyun.com, IAmASecret, 1534316400 -> 60c71e98b6d7fcbb366243e224eab457.
//
// The newer API, `/v2/d`, is what its iOS 3.x, Android and Node SDKs send (aliyun/alibabacloud-httpdns-
// ios-sdk `HttpdnsRemoteResolver.m`, alicloud-httpdns-nodejs-sdk `src/auth.ts`):
//   GET /v2/d?id=ACCOUNT&m=0&exp=EXPIRY&v=1.0&dn=NAME&q=4|6|4,6&s=SIGNATURE
//   SIGNATURE = lower-case hex HMAC-SHA256 over the signed parameters present (`v2SignedNames` and any
//               sdns-*) sorted by name and joined as `k=v&…` with raw (not percent-encoded) values,
//               keyed with the hex-decoded secret (the console shows it as hex).
// The client's address goes as `ip=` on sign_d (outside the MD5, as the Go and C SDKs send it:
// alibabacloud-httpdns-go-sdk `network.go`, -c-sdk `hdns_resolver.c`) and as `cip=` on v2 (signed: the
// Android signer lists it, and the answer reports `data.cip`; no SDK we read sends it yet).
// `m=0` is plain mode; `m=1`/`m=2` encrypt the parameters and answer with a second key (AES-CBC or
// AES-GCM): not supported here. The answer is `{"code":"success","mode":0,"data":{"cip":…,"answers":…}}`.

import Crypto
import Foundation
import HTTPDNSCore

package enum AlibabaSigning {
    /// How long a signature is valid: the vendor SDKs' default.
    static let validity: Int = 600
    /// The longest validity the service accepts (a later expiry is refused).
    package static let maximumValidity: Int = 24 * 3600

    /// The `s` parameter for `host` expiring at `expiry` (Unix seconds).
    package static func signature(host: String, secret: ResolverSecret, expiry: Int) -> String {
        var input = Array("\(host)-".utf8)
        input += secret.bytes
        input += Array("-\(expiry)".utf8)
        return hexEncoded(Insecure.MD5.hash(data: input))
    }

    /// The `s` parameter of a signed scheduling request (`/ACCOUNT/ss?…&s=&t=&n=`), as Alibaba's C SDK
    /// signs it (alibabacloud-httpdns-c-sdk `hdns_sign.c`, `hdns_gen_sched_req_sign`): lower-case hex
    /// MD5 of "NONCE-SECRET-TIME", the account's signing secret, `t` the time of signing (now, not an
    /// expiry) and `n` 12 hex digits. The other SDKs send `/ss` unsigned.
    /// The same MD5 as `signature(host:secret:expiry:)`, with the nonce where the name goes.
    package static func scheduleSignature(nonce: String, secret: ResolverSecret, time: Int) -> String {
        signature(host: nonce, secret: secret, expiry: time)
    }

    /// The v2 API's version parameter, as the iOS and Android SDKs send it.
    static let v2Version = "1.0"

    /// The v2 `s` parameter over `parameters` (every signed one), keyed with the decoded secret.
    package static func v2Signature(_ parameters: [(String, String)], key: [UInt8]) -> String {
        let text = parameters.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        return hexEncoded(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: SymmetricKey(data: key)))
    }

    /// The parameters a v2 signature covers when present (and every `sdns-*`): the Android SDK's list
    /// (aliyun/alibabacloud-httpdns-android-sdk, its request signer's `includeParamKeys`), which has
    /// `cip` (the client address to answer for) and `enc` (the encrypted modes) besides the iOS SDK's.
    static let v2SignedNames: Set<String> = ["id", "m", "dn", "cip", "q", "enc", "exp", "tags", "v"]

    /// The parameters a v2 signature covers, out of a query's.
    package static func v2Signed(_ query: [String: String]) -> [(String, String)] {
        query.filter { Self.v2SignedNames.contains($0.key) || $0.key.hasPrefix("sdns-") }
            .map { ($0.key, $0.value) }
    }
}
