// The DNSPod / Tencent HTTPDNS text API (`/d?dn=`), plain or encrypted (DES/AES), single names and batches;
// answers parsed by DNSPodFormat (Core).

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOHTTP1

/// The DNSPod / Tencent Cloud HTTPDNS text API: `/d?dn=NAME[,NAME…]&ttl=1&clientip=1[&type=aaaa]`,
/// free or, with `auth`, the enterprise forms (`&id=ID&alg=aes|des` with `dn` and the answer encrypted,
/// or `&id=ID&token=TOKEN` over HTTPS). Batches up to 8 names, the service's limit
/// (cloud.tencent.com/document/product/213/3522).
struct DNSPodProvider: DNSProvider {
    let client: EndpointClient
    let auth: DNSPodAuth?
    let cipher: DNSPodCipher?
    /// Sent as `ip=` (encrypted like `dn` in the AES and DES forms), when given.
    let clientSubnet: ClientSubnet?
    var name: String { client.name("dnspod") }
    var maximumBatch: Int { 8 }

    /// `auth` has passed `ResolverSpec.credentialProblem` (ProviderFactory checks it).
    init(client: EndpointClient, auth: DNSPodAuth?, clientSubnet: ClientSubnet? = nil) {
        self.client = client
        self.auth = auth
        self.cipher = auth.flatMap(DNSPodCipher.init)
        self.clientSubnet = clientSubnet
    }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let answers = try await resolveBatch([name], query: family.query, deadline: deadline)
        guard let answer = answers[normalizeHostname(name)]?[family] else {
            throw ProviderError("gave no line for \(name)")
        }
        return answer
    }

    /// One request for up to 8 names, both families with `type=addrs` (DNSPod's Android and iOS SDKs).
    func resolveBatch(_ names: [String], query: AddressQuery, deadline: NIODeadline) async throws -> [String:
        HostAnswer]
    {
        let body = try await client.send(
            parameters(names, query: query),
            accept: "text/plain",
            deadline: deadline,
            maxBytes: 256 * 1024,
            redacting: auth?.token
        )
        do {
            return try DNSPodFormat.parse(try text(of: body), names: names, query: query)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }

    /// The query's parameters, in the order the vendor's iOS SDK sends them.
    func parameters(_ names: [String], query: AddressQuery) -> [(String, String)] {
        let dn = names.joined(separator: ",")
        var parameters = [("dn", cipher?.seal(dn) ?? dn), ("clientip", "1"), ("ttl", "1")]
        if let clientSubnet {
            // The service takes an address: the subnet's, its host bits cleared; encrypted like `dn` under
            // AES and DES, as the API documentation asks (cloud.tencent.com/document/product/379/95499),
            // though the vendor's SDKs send it in clear (our server takes both).
            let ip = clientSubnet.address.description
            parameters.append(("ip", cipher?.seal(ip) ?? ip))
        }
        if let auth { parameters.append(("id", auth.id)) }
        if let type = DNSPodFormat.typeParameter(for: query) { parameters.append(("type", type)) }
        switch auth {
        case .aes: parameters.append(("alg", "aes"))
        case .des: parameters.append(("alg", "des"))
        case .token(_, let token): parameters.append(("token", token.text))
        case nil: break
        }
        return parameters
    }

    /// The answer's text: decrypted for the AES and DES forms. With credentials, an empty body is a
    /// failure (the service answers a wrong id, key or token that way; the vendor's SDKs treat it as
    /// an error too); without, it means "no address".
    func text(of body: [UInt8]) throws -> String {
        if auth != nil, body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            throw ProviderError(
                "answered an empty body, which the service sends for a wrong account id, key or token"
            )
        }
        guard let cipher else { return String(decoding: body, as: UTF8.self) }
        do {
            return try cipher.open(String(decoding: body, as: UTF8.self))
        } catch {
            throw ProviderError("\(cipher.algorithm.rawValue.uppercased())-encrypted answer \(error.reason)")
        }
    }
}

extension DNSPodProvider {
    /// Opens the endpoint's connection ahead of the first query.
    func warmUp() async throws { try await client.warmUp() }
}
