// The Alibaba-style JSON HTTPDNS API (`/{account}/d?host=`), signed where configured, with the service's
// clock and its server list; answers parsed by JSONFormats (Core).

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOHTTP1

/// The Alibaba-style JSON API: `/resolve?host=NAME&query=4|6` and Alibaba Cloud's `/ACCOUNT/d?host=`;
/// with a secret, its signed form `/ACCOUNT/sign_d?host=&query=&t=&s=`. An endpoint `/v2/d?id=ACCOUNT`
/// speaks Alibaba Cloud's newer API in plain mode, signed when given a secret (see AlibabaSigning).
struct AlibabaJSONProvider: DNSProvider {
    enum Form {
        /// `/resolve` or `/ACCOUNT/d`, as given; several names go to `/ACCOUNT/resolve` (nil: no batch).
        case unsigned(batchPath: String?)
        /// `/ACCOUNT/sign_d` with the MD5 signature; several names go to `/ACCOUNT/sign_resolve`.
        case signD(path: String, batchPath: String, secret: ResolverSecret)
        /// `/v2/d`, HMAC-SHA256-signed when `key` is given, its names and answer encrypted with `cipher`
        /// when given (modes 1 and 2).
        case v2(account: String, key: [UInt8]?, cipher: AlibabaV2Cipher?)
    }

    let client: EndpointClient
    let form: Form
    /// Sent as `ip=` (`cip=` on v2), when given.
    let clientSubnet: ClientSubnet?
    /// The service's time, for signatures: learnt from its answers (see ServiceClock).
    let clock: ServiceClock
    var name: String { client.name("json") }

    /// v2, `resolve` and `sign_resolve` take up to 5 names in one query, as the vendor's SDKs send them.
    var maximumBatch: Int {
        switch form {
        case .v2: return AlibabaV2Format.maximumBatch
        case .signD, .unsigned(batchPath: _?): return AlibabaJSONFormat.maximumBatch
        case .unsigned(batchPath: nil): return 1
        }
    }

    func networkChanged() { clock.reset() }

    /// `secret` and `encryption` have passed `ResolverSpec.credentialProblem` (ProviderFactory checks
    /// it): a v2 endpoint names its account and its secret and key are hex; a signed one is `/ACCOUNT/d`.
    init(
        client: EndpointClient,
        secret: ResolverSecret?,
        encryption: AlibabaEncryption? = nil,
        clientSubnet: ClientSubnet? = nil,
        clock: ServiceClock = ServiceClock()
    ) {
        self.client = client
        self.clientSubnet = clientSubnet
        self.clock = clock
        let endpoint = client.endpoint
        if endpoint.path == AlibabaJSONFormat.v2Path {
            // The console shows the secret as hex; the v2 API keys its HMAC with the decoded bytes.
            form = .v2(
                account: endpoint.queryValue("id") ?? "",
                key: secret?.hexBytes,
                cipher: encryption.flatMap(AlibabaV2Cipher.init)
            )
        } else if let secret, let signed = AlibabaJSONFormat.signedPath(for: endpoint.path),
            let batch = AlibabaJSONFormat.signedBatchPath(for: endpoint.path)
        {
            form = .signD(path: signed, batchPath: batch, secret: secret)
        } else {
            form = .unsigned(batchPath: AlibabaJSONFormat.batchPath(for: endpoint.path))
        }
    }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let answers = try await resolveBatch([name], query: family.query, deadline: deadline)
        return answers[normalizeHostname(name)]?[family] ?? .empty
    }

    /// One request for up to 5 names and both families: `q=4,6` on v2, `query=4,6` on the v1 forms, as
    /// the vendor's C SDK and older Android SDK send it (`hdns_resolver.c`, `InterpretHostHelper.java`).
    func resolveBatch(_ names: [String], query: AddressQuery, deadline: NIODeadline) async throws -> [String:
        HostAnswer]
    {
        let offset = clock.currentOffset
        do {
            return try await resolveOnce(names, query: query, deadline: deadline)
        } catch let error as ProviderError
            where ["SignatureExpired", "InvalidSignature"].contains(error.vendorCode) && clock.currentOffset != offset
        {
            // Refused for its time, and the refusal's Date says our clock is off: once more, on the
            // service's time. (Unsigned forms carry no time: their refusals are never for it.)
            return try await resolveOnce(names, query: query, deadline: deadline)
        }
    }

    /// One query for `names`.
    private func resolveOnce(_ names: [String], query: AddressQuery, deadline: NIODeadline) async throws
        -> [String: HostAnswer]
    {
        let types = AlibabaJSONFormat.queryParameter(for: query)
        let name = names.joined(separator: ",")
        var parameters: [(String, String)]
        var path: String?
        // The client's address (its subnet's), when configured: `ip=` outside the sign_d signature, `cip=`
        // inside v2's (see AlibabaSigning).
        let ip = clientSubnet.map { [("ip", $0.address.description)] } ?? []
        let cip = clientSubnet.map { [("cip", $0.address.description)] } ?? []
        switch form {
        case .unsigned(let batchPath):
            parameters = [("host", name), ("query", types)] + ip
            if names.count > 1 { path = batchPath }
        case .signD(let signedPath, let batchPath, let secret):
            // Several names: `sign_resolve`, signed over the comma-joined list as sent (the Go and C SDKs).
            let expiry = clock.now() + AlibabaSigning.validity
            parameters = [("host", name), ("query", types)] + ip + [("t", "\(expiry)")]
            parameters.append(("s", AlibabaSigning.signature(host: name, secret: secret, expiry: expiry)))
            path = names.count > 1 ? batchPath : signedPath
        case .v2(let account, let key, let cipher):
            // The iOS SDK's order: id, m, exp, v, dn, q (or enc), s.
            parameters = [("id", account), ("m", "\(cipher?.mode.rawValue ?? 0)")]
            if key != nil { parameters.append(("exp", "\(clock.now() + AlibabaSigning.validity)")) }
            parameters.append(("v", AlibabaSigning.v2Version))
            let fields = [("dn", name), ("q", types)] + cip
            if let cipher {
                do {
                    parameters.append(("enc", try cipher.encryptedFields(fields)))
                } catch {
                    throw ProviderError("the query's names could not be encrypted: \(error.reason)")
                }
            } else {
                parameters += fields
            }
            if let key { parameters.append(("s", AlibabaSigning.v2Signature(parameters, key: key))) }
            path = AlibabaJSONFormat.v2Path
        }
        let body = try await client.send(
            parameters,
            accept: "application/json",
            deadline: deadline,
            path: path,
            refusalCode: { AlibabaJSONFormat.errorCode($0) },
            clock: clock
        )
        do {
            let answers: [String: HostAnswer]
            if case .v2(_, _, let cipher) = form {
                let envelope = try AlibabaV2Format.envelope(body)
                var data = envelope.plain
                if let text = envelope.encrypted {
                    guard let cipher, cipher.mode.rawValue == envelope.mode else {
                        throw ProviderError("answered in encrypted mode \(envelope.mode), not the mode asked")
                    }
                    do {
                        data = try cipher.openAnswer(text)
                    } catch {
                        throw ProviderError("encrypted v2 answer \(error.reason)")
                    }
                }
                answers = try AlibabaV2Format.answers(data: data ?? [], query: query, hosts: names)
            } else if names.count > 1 {
                answers = try AlibabaJSONFormat.parseBatch(body, query: query, hosts: names)
            } else {
                answers = [normalizeHostname(name): try AlibabaJSONFormat.parse(body, query: query, host: name)]
            }
            return answers
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }
}

extension AlibabaJSONProvider {
    /// Opens the endpoint's connection ahead of the first query.
    func warmUp() async throws { try await client.warmUp() }
}
