// HTTP authentication as URLSession does it for an app's delegate: the server's challenges read from
// `WWW-Authenticate` (RFC 9110 §11.6.1), the strongest scheme we speak chosen (Digest before Basic), and
// the `Authorization` value for the credential the delegate gave (Basic, RFC 7617; Digest with MD5 or
// SHA-256, with or without `qop=auth`, RFC 7616). Pure: no I/O, tested with the RFCs' examples.

import Crypto
import Foundation
import NIOHTTP1

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One challenge a server sent.
struct AuthChallenge: Equatable {
    /// The scheme, lowercased: `basic`, `digest`, `bearer`, ...
    var scheme: String
    /// Its parameters, names lowercased, values unquoted.
    var parameters: [String: String]

    var realm: String? { parameters["realm"] }

    /// The URLProtectionSpace authentication method for the schemes we answer; nil for others.
    var authenticationMethod: String? {
        switch scheme {
        case "basic": NSURLAuthenticationMethodHTTPBasic
        case "digest" where DigestAlgorithm(parameters["algorithm"]) != nil: NSURLAuthenticationMethodHTTPDigest
        default: nil
        }
    }

    /// Every challenge in the header values, in order. A malformed part ends the parse (what came
    /// before it is kept).
    static func parse(_ values: [String]) -> [AuthChallenge] {
        var found: [AuthChallenge] = []
        for value in values {
            var scanner = Scanner(Array(value.utf8))
            while let challenge = scanner.challenge() { found.append(challenge) }
        }
        return found
    }

    /// The challenge we answer among a 401's `WWW-Authenticate` fields. The raw field values are
    /// parsed: `canonicalForm` would split a challenge at the commas between its parameters.
    static func preferred(in headers: HTTPHeaders) -> AuthChallenge? {
        preferred(parse(headers["www-authenticate"]))
    }

    /// The challenge we answer: Digest (a supported algorithm) before Basic; nil when none is either.
    static func preferred(_ challenges: [AuthChallenge]) -> AuthChallenge? {
        challenges.first { $0.scheme == "digest" && $0.authenticationMethod != nil }
            ?? challenges.first { $0.scheme == "basic" }
    }

    /// The `Authorization` value answering this challenge for `user` and `password`, for a request of
    /// `method` to `uri` (the request target: path and query). `cnonce` is random except in tests.
    func authorization(
        user: String,
        password: String,
        method: String,
        uri: String,
        cnonce: String = AuthChallenge.makeCnonce()
    ) -> String? {
        switch scheme {
        case "basic":
            return "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        case "digest":
            guard let algorithm = DigestAlgorithm(parameters["algorithm"]), let nonce = parameters["nonce"] else {
                return nil
            }
            let realm = parameters["realm"] ?? ""
            // qop: "auth" when offered; "auth-int" alone is not spoken (it would hash the body).
            let offered = parameters["qop"]?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if let offered, !offered.contains("auth") { return nil }
            let qop = offered == nil ? nil : "auth"
            let nc = "00000001"
            var ha1 = algorithm.hash("\(user):\(realm):\(password)")
            if algorithm.session { ha1 = algorithm.hash("\(ha1):\(nonce):\(cnonce)") }
            let ha2 = algorithm.hash("\(method):\(uri)")
            let response =
                qop.map { algorithm.hash("\(ha1):\(nonce):\(nc):\(cnonce):\($0):\(ha2)") }
                ?? algorithm.hash("\(ha1):\(nonce):\(ha2)")
            var fields = [
                "username=\(quoted(user))", "realm=\(quoted(realm))", "uri=\(quoted(uri))",
                "algorithm=\(algorithm.name)", "nonce=\(quoted(nonce))",
            ]
            if let qop { fields += ["nc=\(nc)", "cnonce=\(quoted(cnonce))", "qop=\(qop)"] }
            fields.append("response=\(quoted(response))")
            if let opaque = parameters["opaque"] { fields.append("opaque=\(quoted(opaque))") }
            return "Digest " + fields.joined(separator: ", ")
        default:
            return nil
        }
    }

    static func makeCnonce() -> String {
        Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }

    private func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

/// Digest's hash: MD5 or SHA-256, each with its `-sess` form.
struct DigestAlgorithm {
    var name: String
    var sha256: Bool
    var session: Bool

    /// nil for an algorithm we do not speak (SHA-512-256 among them).
    init?(_ parameter: String?) {
        let name = parameter ?? "MD5"
        switch name.uppercased() {
        case "MD5": (sha256, session) = (false, false)
        case "MD5-SESS": (sha256, session) = (false, true)
        case "SHA-256": (sha256, session) = (true, false)
        case "SHA-256-SESS": (sha256, session) = (true, true)
        default: return nil
        }
        self.name = name
    }

    func hash(_ text: String) -> String {
        let data = Data(text.utf8)
        let bytes: [UInt8] = sha256 ? Array(SHA256.hash(data: data)) : Array(Insecure.MD5.hash(data: data))
        return bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// Reads `scheme param=value, param="quoted", scheme2 ...` (RFC 9110's challenge grammar, token68
/// forms taken as a parameterless challenge).
private struct Scanner {
    let bytes: [UInt8]
    var at = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func challenge() -> AuthChallenge? {
        skip(while: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\t") })
        guard let scheme = token(), !scheme.isEmpty else { return nil }
        var parameters: [String: String] = [:]
        while true {
            let mark = at
            skip(while: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\t") })
            guard let name = token(), !name.isEmpty else { break }
            skip(while: { $0 == UInt8(ascii: " ") })
            guard at < bytes.count, bytes[at] == UInt8(ascii: "=") else {
                at = mark  // the next challenge's scheme
                break
            }
            at += 1
            skip(while: { $0 == UInt8(ascii: " ") })
            if at < bytes.count, bytes[at] == UInt8(ascii: "\"") {
                guard let value = quotedString() else { return nil }
                parameters[name.lowercased()] = value
            } else {
                parameters[name.lowercased()] = token() ?? ""
            }
        }
        return AuthChallenge(scheme: scheme.lowercased(), parameters: parameters)
    }

    private mutating func skip(while predicate: (UInt8) -> Bool) {
        while at < bytes.count, predicate(bytes[at]) { at += 1 }
    }

    /// A token (with token68's `/`, `+` and `=`-free characters).
    private mutating func token() -> String? {
        let start = at
        skip(while: { byte in
            byte > 0x20 && byte < 0x7f && !"\"(),;:<>?@[]{}= \\".utf8.contains(byte)
        })
        return String(decoding: bytes[start..<at], as: UTF8.self)
    }

    private mutating func quotedString() -> String? {
        at += 1
        var value: [UInt8] = []
        while at < bytes.count {
            let byte = bytes[at]
            at += 1
            if byte == UInt8(ascii: "\\"), at < bytes.count {
                value.append(bytes[at])
                at += 1
            } else if byte == UInt8(ascii: "\"") {
                return String(decoding: value, as: UTF8.self)
            } else {
                value.append(byte)
            }
        }
        return nil  // unterminated
    }
}
