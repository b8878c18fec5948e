// The providers that speak HTTP: RFC 8484 DoH (wire format, GET or POST), JSON DoH, the DNSPod text API
// and the Alibaba-style JSON API. All go through the project's one HTTP engine, to the endpoint's IP (or
// its bootstrap IP), with the endpoint's hostname as SNI and Host.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOHTTP1

/// Where and how to reach one HTTP resolver endpoint.
struct EndpointClient: Sendable {
    let engine: HTTPEngine
    let endpoint: ResolverEndpoint
    /// Nil for an IP-literal endpoint (the engine connects to the literal).
    let addresses: ResolvedAddresses?
    /// The service's published addresses, used before `addresses` (see ServiceRoutes); nil when
    /// service lists are off.
    let routes: ServiceRoutes?
    /// Sent as Alibaba's `region=` when asking for the list.
    let region: String

    /// `bootstrap` gives the IPs of an endpoint named by hostname: a resolver must be reachable without
    /// DNS, so a hostname without a bootstrap entry is a configuration error. `serviceLists`: route
    /// queries through the service's published addresses, the endpoint's own as the last resort.
    init(
        engine: HTTPEngine,
        endpoint: ResolverEndpoint,
        bootstrap: [String: [IPAddress]],
        serviceLists: ServiceListSettings? = nil
    ) throws {
        self.engine = engine
        self.endpoint = endpoint
        self.region = serviceLists?.region ?? "global"
        let mapped = endpoint.bootstrapAddresses(in: bootstrap)
        if mapped == nil {
            addresses = nil
        } else if let mapped, !mapped.isEmpty {
            addresses = ResolvedAddresses(
                ipv4: mapped.filter { !$0.isIPv6 },
                ipv6: mapped.filter(\.isIPv6),
                source: .bootstrap
            )
        } else {
            throw HTTPDNSConfigurationError(
                .invalidResolverSpec,
                "resolver host \(endpoint.host) has no bootstrap address (a resolver must be reachable without DNS)"
            )
        }
        if serviceLists != nil {
            let own = addresses.map { $0.ipv4 + $0.ipv6 } ?? IPAddress(endpoint.host).map { [$0] } ?? []
            routes = ServiceRoutes(bootstrap: own)
        } else {
            routes = nil
        }
    }

    /// `KIND:scheme://host:port/path`: the query string is left out, it may carry an account token.
    func name(_ kind: String) -> String {
        "\(kind):\(endpoint.scheme)://\(endpoint.host):\(endpoint.port)\(endpoint.path)"
    }

    func send(
        method: HTTPMethod = .GET,
        _ parameters: [(String, String)],
        accept: String,
        body: [UInt8]? = nil,
        contentType: String? = nil,
        deadline: NIODeadline,
        maxBytes: Int = 64 * 1024,
        path: String? = nil,
        refusalCode: (@Sendable ([UInt8]) -> String?)? = nil,
        redacting secret: ResolverSecret? = nil,
        clock: ServiceClock? = nil
    ) async throws -> [UInt8] {
        let scheduling = path == ServiceListFormat.tencentPath || path?.hasSuffix("/ss") == true
        if let routes, routes.disabled, !scheduling {
            throw ProviderError("is switched off by its scheduling endpoint (service_status disable)")
        }
        var headers = HTTPHeaders([("accept", accept)])
        if let contentType { headers.add(name: "content-type", value: contentType) }
        // The service list's addresses, grouped by port (usually one group on the endpoint's port), or the
        // endpoint's own; a group none of whose addresses connects passes on to the next.
        let attempts: [(port: Int, addresses: ResolvedAddresses?)] =
            routes?.attempts(defaultPort: endpoint.port).map { ($0.port, $0.addresses) } ?? [(endpoint.port, addresses)]
        for (index, attempt) in attempts.enumerated() {
            var request = HTTPEngineRequest(
                method: method,
                url: HTTPURL(
                    scheme: endpoint.scheme,
                    host: endpoint.host,
                    port: attempt.port,
                    target: endpoint.target(adding: parameters, path: path)
                ),
                headers: headers,
                body: body.map { .bytes($0) }
            )
            let remaining = deadline - .now()
            guard remaining > .zero else { throw ProviderError("no time left for the query") }
            request.timeout = Duration(remaining)
            do {
                return try await exchange(
                    request,
                    attempt.addresses,
                    refusalCode: refusalCode,
                    redacting: secret,
                    clock: clock,
                    maxBytes: maxBytes
                )
            } catch let error as ProviderError
                where index < attempts.count - 1 && (error.underlying as? HTTPEngineError).map(Self.unreachable) == true
            {
                continue
            }
        }
        throw ProviderError("has no address to send to")
    }

    /// An engine error that says no address of the attempt could be reached.
    static func unreachable(_ error: HTTPEngineError) -> Bool {
        [.connectFailed, .connectTimeout, .noAddresses].contains(error.code)
    }

    /// One request to `addresses`, its answer's body.
    private func exchange(
        _ request: HTTPEngineRequest,
        _ addresses: ResolvedAddresses?,
        refusalCode: (@Sendable ([UInt8]) -> String?)?,
        redacting secret: ResolverSecret?,
        clock: ServiceClock?,
        maxBytes: Int
    ) async throws -> [UInt8] {
        do {
            let response = try await engine.execute(request, addresses: addresses)
            routes?.answered(from: response.metrics.ip)
            if let clock, let date = response.headers.first(name: "date") { clock.learn(dateHeader: date) }
            let body = try await response.body.collect(upTo: maxBytes)
            guard response.status == .ok else {
                if let code = refusalCode?(Array(body.readableBytesView)) {
                    throw ProviderError("answered HTTP \(response.status.code) \(code)", vendorCode: code)
                }
                var snippet = String(String(buffer: body).prefix(120).split(separator: "\n").first ?? "")
                if let secret, !secret.isEmpty {
                    // A server that echoes the query must not put a token into our messages and logs.
                    snippet = snippet.replacingOccurrences(of: secret.text, with: "<redacted>")
                }
                throw ProviderError("answered HTTP \(response.status.code) \(snippet)")
            }
            return Array(body.readableBytesView)
        } catch let error as HTTPEngineError {
            if Self.unreachable(error) { routes?.unreachable() }
            throw ProviderError(error.description, underlying: error)
        }
    }
}

/// A provider that can put a client subnet into one query (ECS): the server passing its client's on.
package protocol SubnetQuerying: DNSProvider {
    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline, clientSubnet: ClientSubnet?)
        async throws -> FamilyAnswer
}

/// RFC 8484 DNS-over-HTTPS, wire format. GET `?dns=<base64url>` or POST `application/dns-message`.
/// The engine offers h2 and http/1.1 through ALPN, so h2-only servers (kresd doh2, bind9, unbound) and
/// HTTP/1.1 ones both work.
package struct DoHProvider: SubnetQuerying {
    let client: EndpointClient
    let usePOST: Bool
    /// Sent as an EDNS Client Subnet option in every query (RFC 7871), when given.
    let clientSubnet: ClientSubnet?
    package var name: String { client.name(usePOST ? "doh-post" : "doh") }

    init(client: EndpointClient, usePOST: Bool, clientSubnet: ClientSubnet? = nil) {
        self.client = client
        self.usePOST = usePOST
        self.clientSubnet = clientSubnet
    }

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        try await resolve(name, family: family, deadline: deadline, clientSubnet: clientSubnet)
    }

    /// One query, with `clientSubnet` as its ECS option (the server passing its client's on).
    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline, clientSubnet: ClientSubnet?)
        async throws -> FamilyAnswer
    {
        let query = try DNSMessage.query(name: name, type: family.recordType, id: 0, clientSubnet: clientSubnet)
        return try interpretWireAnswer(try await exchange(query, deadline: deadline), name: name, family: family)
    }

    package var answersServiceBindings: Bool { true }

    package func serviceBindings(_ name: String, deadline: NIODeadline) async throws -> ServiceBindingAnswer {
        let query = try DNSMessage.query(name: name, type: .https, id: 0, clientSubnet: clientSubnet)
        return try interpretWireBindings(try await exchange(query, deadline: deadline), name: name)
    }

    /// Sends one wire-format query and returns the answer's bytes.
    private func exchange(_ query: [UInt8], deadline: NIODeadline) async throws -> [UInt8] {
        if usePOST {
            return try await client.send(
                method: .POST,
                [],
                accept: "application/dns-message",
                body: query,
                contentType: "application/dns-message",
                deadline: deadline
            )
        }
        return try await client.send([("dns", base64URL(query))], accept: "application/dns-message", deadline: deadline)
    }
}

/// Reads a wire-format answer to our query: NOERROR gives addresses (maybe none), NXDOMAIN none,
/// anything else is the server's failure.
func interpretWireAnswer(_ bytes: [UInt8], name: String, family: AddressFamily, expectedID: UInt16? = nil) throws
    -> FamilyAnswer
{
    let message = try checkedWireResponse(bytes, name: name, type: family.recordType, expectedID: expectedID)
    guard message.rcode == .noError else { return FamilyAnswer(addresses: [], ttl: message.negativeTTL) }
    let (addresses, ttl) = message.addresses(for: family.recordType)
    return FamilyAnswer(addresses: addresses, ttl: addresses.isEmpty ? message.negativeTTL : ttl)
}

/// Reads a wire-format answer to our query for `name`'s HTTPS records: NOERROR gives them (maybe
/// none), NXDOMAIN none, anything else is the server's failure.
func interpretWireBindings(_ bytes: [UInt8], name: String, expectedID: UInt16? = nil) throws -> ServiceBindingAnswer {
    let message = try checkedWireResponse(bytes, name: name, type: .https, expectedID: expectedID)
    var answer = message.rcode == .noError ? message.serviceBindings() : ServiceBindingAnswer(bindings: [], ttl: nil)
    if answer.bindings.isEmpty { answer.ttl = message.negativeTTL }
    return answer
}

/// The response to our query for `name` / `type`, checked: NOERROR or NXDOMAIN; throws `ProviderError`
/// for a malformed message, another question or id, or another rcode.
private func checkedWireResponse(_ bytes: [UInt8], name: String, type: DNSRecordType, expectedID: UInt16?) throws
    -> DNSMessage
{
    let message: DNSMessage
    do {
        message = try DNSMessage(parsing: bytes)
    } catch {
        throw ProviderError("\(error)")
    }
    guard message.isResponse else { throw ProviderError("sent a query, not a response") }
    if let expectedID, message.id != expectedID { throw ProviderError("answered with the wrong query id") }
    guard normalizeHostname(message.questionName) == normalizeHostname(name), message.questionType == type else {
        throw ProviderError("answered another question (\(message.questionName) \(message.questionType))")
    }
    switch message.rcode {
    case .noError, .nameError: return message
    default: throw ProviderError("answered \(message.rcode) for \(type)", rcode: message.rcode)
    }
}

func base64URL(_ bytes: [UInt8]) -> String {
    var s = Data(bytes).base64EncodedString()
    s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    while s.hasSuffix("=") { s.removeLast() }
    return s
}

/// JSON DNS-over-HTTPS (`?name=&type=`, `application/dns-json`).
package struct DoHJSONProvider: DNSProvider {
    let client: EndpointClient
    package var name: String { client.name("doh-json") }

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let body = try await client.send(
            [("name", name), ("type", family.recordType.description)],
            accept: "application/dns-json",
            deadline: deadline
        )
        do {
            return try DoHJSONFormat.parse(body, name: name, type: family.recordType)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }

    package var answersServiceBindings: Bool { true }

    package func serviceBindings(_ name: String, deadline: NIODeadline) async throws -> ServiceBindingAnswer {
        let body = try await client.send(
            [("name", name), ("type", "HTTPS")],
            accept: "application/dns-json",
            deadline: deadline
        )
        do {
            return try DoHJSONFormat.parseServiceBindings(body, name: name)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }
}

/// The DNSPod / Tencent Cloud HTTPDNS text API: `/d?dn=NAME[,NAME…]&ttl=1&clientip=1[&type=aaaa]`,
/// free or, with `auth`, the enterprise forms (`&id=ID&alg=aes|des` with `dn` and the answer encrypted,
/// or `&id=ID&token=TOKEN` over HTTPS). Batches up to 8 names, the service's limit
/// (cloud.tencent.com/document/product/213/3522).
package struct DNSPodProvider: DNSProvider {
    let client: EndpointClient
    let auth: DNSPodAuth?
    let cipher: DNSPodCipher?
    /// Sent as `ip=` (encrypted like `dn` in the AES and DES forms), when given.
    let clientSubnet: ClientSubnet?
    package var name: String { client.name("dnspod") }
    package var maximumBatch: Int { 8 }

    /// `auth` has passed `ResolverSpec.credentialProblem` (ProviderFactory checks it).
    init(client: EndpointClient, auth: DNSPodAuth?, clientSubnet: ClientSubnet? = nil) {
        self.client = client
        self.auth = auth
        self.cipher = auth.flatMap(DNSPodCipher.init)
        self.clientSubnet = clientSubnet
    }

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let answers = try await resolveBatch([name], query: family.query, deadline: deadline)
        guard let answer = answers[normalizeHostname(name)]?[family] else {
            throw ProviderError("gave no line for \(name)")
        }
        return answer
    }

    /// One request for up to 8 names, both families with `type=addrs` (DNSPod's Android and iOS SDKs).
    package func resolveBatch(_ names: [String], query: AddressQuery, deadline: NIODeadline) async throws -> [String:
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

/// The Alibaba-style JSON API: `/resolve?host=NAME&query=4|6` and Alibaba Cloud's `/ACCOUNT/d?host=`;
/// with a secret, its signed form `/ACCOUNT/sign_d?host=&query=&t=&s=`. An endpoint `/v2/d?id=ACCOUNT`
/// speaks Alibaba Cloud's newer API in plain mode, signed when given a secret (see AlibabaSigning).
package struct AlibabaJSONProvider: DNSProvider {
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
    package var name: String { client.name("json") }

    /// v2, `resolve` and `sign_resolve` take up to 5 names in one query, as the vendor's SDKs send them.
    package var maximumBatch: Int {
        switch form {
        case .v2: return AlibabaV2Format.maximumBatch
        case .signD, .unsigned(batchPath: _?): return AlibabaJSONFormat.maximumBatch
        case .unsigned(batchPath: nil): return 1
        }
    }

    package func networkChanged() { clock.reset() }

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

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let answers = try await resolveBatch([name], query: family.query, deadline: deadline)
        return answers[normalizeHostname(name)]?[family] ?? .empty
    }

    /// One request for up to 5 names and both families: `q=4,6` on v2, `query=4,6` on the v1 forms, as
    /// the vendor's C SDK and older Android SDK send it (`hdns_resolver.c`, `InterpretHostHelper.java`).
    package func resolveBatch(_ names: [String], query: AddressQuery, deadline: NIODeadline) async throws -> [String:
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
