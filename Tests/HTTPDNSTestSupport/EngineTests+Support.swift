// The IP-direct engine against nginx (SNI certificates on one IP and port, h2 and HTTP/1.1), with
// names resolved by kresd DoH while the system resolver would give wrong answers.

import Crypto
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

struct Echo: Decodable {
    var method: String
    var length: Int
    var sha256: String
    var host: String?
    var sni: String?
    var proto: String
    var uri: String
}

func text(_ response: HTTPEngineResponse) async throws -> String {
    String(buffer: try await response.body.collect(upTo: 1 << 20))
}

/// The `pin-sha256` value of a PEM certificate's public key.
enum NIOSSLCertificateSPKI {
    static func digest(pem: String) throws -> String {
        let cert = try NIOSSLCertificate(bytes: Array(pem.utf8), format: .pem)
        let spki = try cert.extractPublicKey().toSPKIBytes()
        return Data(SHA256.hash(data: spki)).base64EncodedString()
    }
}
