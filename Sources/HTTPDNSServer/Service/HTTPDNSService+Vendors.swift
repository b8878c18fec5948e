// The authenticated forms of the commercial services, so `httpdns serve` can stand in for them for apps
// built on the vendors' SDKs. The wire facts are in DNSPodCipher.swift and
// AlibabaSigning.swift; how a refusal looks follows the vendors:
//   Tencent Cloud DNSPod  a wrong id, key or token, or a `dn` that does not decrypt, is answered
//                         HTTP 200 with an empty body (the service documents 200 for every well-formed
//                         call; its SDKs treat an empty body as a failure). Answers to the AES and DES
//                         forms are encrypted with the account's key (AES: a fresh IV each time).
//   Alibaba Cloud EMAS    HTTP 403 with `{"code":"…"}`: InvalidSignature (wrong `s`, or an expiry more
//                         than 24 h ahead, which the service does not accept), SignatureExpired (`t` in
//                         the past by the server's clock), InvalidAccount (an account this server does
//                         not know; the vendor's code for it is not public, this one is ours). A signed
//                         query without `t` or `s` is 400 `{"code":"MissingArgument"}`; an unsigned v2
//                         query where only signed ones are taken is 403 `UnsignedInterfaceDisabled`,
//                         the code Alibaba's Android SDK knows (it then stops retrying). The v2 API
//                         (`/v2/d`) is answered in plain mode only (`m=0`); `m=1`/`m=2` get 400
//                         `{"code":"UnsupportedMode"}` (ours). Its signature is checked like the
//                         vendor's (HMAC-SHA256 keyed with the hex-decoded secret; a secret that is
//                         not hex cannot sign v2 queries, so they are InvalidSignature). An account may have
//                         several secrets (a v1 MD5 secret and a v2 hex one): any of them signs.
// Signatures and tokens are compared in constant time. `requireAuth` refuses the unauthenticated forms
// with 403 and a text saying which forms are accepted.

import Foundation
import HTTPDNSCore
import HTTPDNSLookup
import NIOHTTP1

/// Who may query the authenticated forms, and with which secrets.
package struct VendorAccounts: Sendable {
    /// DNSPod enterprise accounts with an AES or DES key, by account id.
    package var dnspodKeys: [String: DNSPodCipher] = [:]
    /// DNSPod enterprise accounts with an HTTPS token, by account id.
    package var dnspodTokens: [String: ResolverSecret] = [:]
    /// Alibaba Cloud EMAS accounts and their signing secrets, by account id. An account may have
    /// several: a query is taken when it is signed with any of them. The vendor's SDKs sign v1 (MD5) and v2
    /// (HMAC-SHA256, hex-decoded key) with one `secretKey`, but an account moving from one protocol to
    /// the other, or rotating its secret, has apps in the field signing with each.
    package var alibaba: [String: [ResolverSecret]] = [:]
    /// The AES keys (hex) of the accounts that take v2's encrypted modes, by account id.
    package var alibabaAES: [String: ResolverSecret] = [:]

    package init() {}

    package var isEmpty: Bool { dnspodKeys.isEmpty && dnspodTokens.isEmpty && alibaba.isEmpty }
}

extension ServiceCore {
    /// Nil when the unauthenticated form may be answered, else the refusal.
    func refuseUnauthenticated(_ form: String) -> ListenerResponse? {
        guard configuration.requireAuth else { return nil }
        return ListenerResponse(
            status: .forbidden,
            text:
                "\(form) is refused: this server answers only authenticated queries (/d with id= and alg=aes|des or token=, /ACCOUNT/sign_d, /v2/d with s=)"
        )
    }

    /// Whether `signature` is the one `sign` makes with any of `secrets` (each compared in constant time,
    /// all of them compared, so the time taken does not say which secret came close).
    func signedByAny<Key>(
        _ signature: String,
        _ secrets: [Key],
        _ sign: (Key) -> String
    ) -> Bool {
        let given = Array(signature.lowercased().utf8)
        return secrets.reduce(false) { found, secret in constantTimeEqual(given, Array(sign(secret).utf8)) || found }
    }

    /// The refusal of a signature expiring at `expiry` by the server's clock: expired, or further ahead
    /// than the service accepts. Nil when in range.
    func expiryRefusal(_ expiry: Int) -> ListenerResponse? {
        let now = configuration.unixTime()
        if expiry < now { return alibabaRefusal("SignatureExpired") }
        if expiry > now + AlibabaSigning.maximumValidity { return alibabaRefusal("InvalidSignature") }
        return nil
    }

    /// Alibaba's refusal: `status` (403 unless said) with `{"code":CODE}`, logged at debug.
    func alibabaRefusal(_ code: String, status: HTTPResponseStatus = .forbidden) -> ListenerResponse {
        logger.debug("alibaba query refused", metadata: ["code": "\(code)"])
        return ListenerResponse(
            status: status,
            contentType: "application/json",
            body: AlibabaJSONFormat.formatError(code)
        )
    }

    /// `/d` with `id=`: the AES, DES and token forms. Refusals are an empty 200, as the vendor's.
    /// `subnet`: the configured one; an `ip=` (encrypted like `dn` in the AES and DES forms) replaces it.
    func dnspodAuthenticated(
        _ request: ListenerRequest,
        _ query: [String: String],
        subnet: ClientSubnet?,
        _ lookup: (String, ClientSubnet?) throws -> Lookup
    ) throws -> ListenerResponse {
        let refused = ListenerResponse(body: [UInt8]())
        guard let id = query["id"], !id.isEmpty else { return refused }
        let accounts = configuration.accounts
        if let token = query["token"] {
            guard let expected = accounts.dnspodTokens[id], constantTimeEqual(Array(token.utf8), expected.bytes) else {
                logger.debug("dnspod token refused", metadata: ["id": "\(id)"])
                return refused
            }
            return try dnspod(query, names: query["dn"], clientAddress: request.remoteIP) { try lookup($0, subnet) }
        }
        // The service reads a query with neither alg nor token as DES.
        let algorithm = DNSPodCipher.Algorithm(rawValue: query["alg"]?.lowercased() ?? "des")
        guard let algorithm, let cipher = accounts.dnspodKeys[id], cipher.algorithm == algorithm else {
            logger.debug("dnspod account or algorithm refused", metadata: ["id": "\(id)"])
            return refused
        }
        let names: String
        do {
            names = try cipher.open(query["dn"] ?? "")
        } catch {
            logger.debug("dnspod dn refused", metadata: ["id": "\(id)", "why": "\(error.reason)"])
            return refused
        }
        // `ip=` encrypted like `dn`, as the API documentation asks (cloud.tencent.com/document/product/
        // 379/95499, tencentcloud.com/document/product/1130/44468), or in clear, as the vendor's iOS and
        // Android SDKs send it (DNSPod/httpdns-sdk-ios `MSDKDnsService.m`, -android's request formats).
        var requested = subnet
        if let given = query["ip"], !given.isEmpty {
            guard let ip = (try? cipher.open(given)) ?? (IPAddress(given) != nil ? given : nil) else {
                logger.debug("dnspod ip refused", metadata: ["id": "\(id)"])
                return refused
            }
            requested = try requestSubnet(request, ip: ip)
        }
        let text = try dnspodText(query, names: names, clientAddress: request.remoteIP) { try lookup($0, requested) }
        return ListenerResponse(body: Array(cipher.seal(text).utf8))
    }

    /// Alibaba Cloud EMAS: `/ACCOUNT/d` answered like `/resolve` (unless `requireAuth`), `/ACCOUNT/sign_d`
    /// only with a valid, unexpired signature of a known account. `batch`: `/ACCOUNT/resolve` and
    /// `/ACCOUNT/sign_resolve`, up to 5 comma-joined names signed as one string, answered `{"dns":[…]}`.
    func alibabaAccount(
        _ request: ListenerRequest,
        account: String,
        signed: Bool,
        batch: Bool = false,
        _ query: [String: String],
        _ lookup: (String) throws -> Lookup
    ) throws -> ListenerResponse {
        if signed {
            guard let secrets = configuration.accounts.alibaba[account] else { return alibabaRefusal("InvalidAccount") }
            guard let host = query["host"], let t = query["t"], let s = query["s"] else {
                return alibabaRefusal("MissingArgument", status: .badRequest)
            }
            guard let expiry = Int(t), t.utf8.count <= 12 else { return alibabaRefusal("InvalidSignature") }
            if let refusal = expiryRefusal(expiry) { return refusal }
            guard signedByAny(s, secrets, { AlibabaSigning.signature(host: host, secret: $0, expiry: expiry) }) else {
                return alibabaRefusal("InvalidSignature")
            }
        } else if configuration.requireAuth {
            return alibabaRefusal("MissingArgument")
        }
        guard batch else { return try alibaba(query, lookup, clientAddress: request.remoteIP) }
        guard let list = query["host"] else { return alibabaRefusal("MissingArgument", status: .badRequest) }
        let wants = try addressTypes(query["query"], parameter: "query")
        switch try batchAnswers(list, parameter: "host", wants: wants, lookup) {
        case .answered(let answers):
            return ListenerResponse(
                contentType: "application/json",
                body: AlibabaJSONFormat.formatBatch(answers, clientAddress: request.remoteIP)
            )
        case .refused(let response):
            return response
        }
    }

    enum BatchOutcome {
        case answered([(String, HostAnswer)])
        case refused(ListenerResponse)
    }

    /// The answers for the comma-joined names of an Alibaba batch (`sign_resolve`'s `host`, v2's `dn`,
    /// named `parameter` in errors), with the families `wants`: refused with `TooManyHosts` past the
    /// vendor's 5 names, or with 502 when the upstream did not answer.
    func batchAnswers(
        _ list: String,
        parameter: String,
        wants: AddressQuery,
        _ lookup: (String) throws -> Lookup
    ) throws -> BatchOutcome {
        let names = try list.split(separator: ",", omittingEmptySubsequences: false).map {
            try name(String($0), parameter: parameter)
        }
        guard names.count <= AlibabaJSONFormat.maximumBatch else {
            return .refused(alibabaRefusal("TooManyHosts", status: .badRequest))
        }
        var answers: [(String, HostAnswer)] = []
        for n in names {
            switch try lookup(n) {
            case .found(let v4, let v6):
                answers.append((n, HostAnswer(ipv4: wants.wantsIPv4 ? v4 : nil, ipv6: wants.wantsIPv6 ? v6 : nil)))
            case .nxdomain:
                answers.append(
                    (n, HostAnswer(ipv4: wants.wantsIPv4 ? .empty : nil, ipv6: wants.wantsIPv6 ? .empty : nil))
                )
            case .failure, .records:  // (an address question is never answered with records)
                return .refused(ListenerResponse(status: .badGateway, text: "the upstream DNS server did not answer"))
            }
        }
        return .answered(answers)
    }

    /// Alibaba Cloud EMAS `/v2/d`: signed queries of a known account with an unexpired, valid `s`;
    /// unsigned ones unless `requireAuth`. Modes 1 and 2 (for an account with an AES key) carry the names
    /// in `enc` and are answered encrypted the same way (see AlibabaV2Cipher). Up to 5 names, as the
    /// vendor's. `subnet`: the configured one; `cip=` (inside `enc` when encrypted) replaces it.
    func alibabaV2(
        _ request: ListenerRequest,
        _ query: [String: String],
        subnet: ClientSubnet?,
        _ lookup: (String, ClientSubnet?) throws -> Lookup
    ) throws -> ListenerResponse {
        guard let account = query["id"], !account.isEmpty else {
            return alibabaRefusal("MissingArgument", status: .badRequest)
        }
        guard let mode = Int(query["m"] ?? "0"), (0...2).contains(mode) else {
            return alibabaRefusal("UnsupportedMode", status: .badRequest)
        }
        if let s = query["s"] {
            guard let secrets = configuration.accounts.alibaba[account] else { return alibabaRefusal("InvalidAccount") }
            guard let expiry = query["exp"].flatMap({ Int($0) }) else {
                return alibabaRefusal("MissingArgument", status: .badRequest)
            }
            if let refusal = expiryRefusal(expiry) { return refusal }
            // Only a hex secret can key v2's HMAC.
            let signed = AlibabaSigning.v2Signed(query)
            guard
                signedByAny(
                    s,
                    secrets.compactMap(\.hexBytes),
                    { AlibabaSigning.v2Signature(signed, key: $0) }
                )
            else {
                return alibabaRefusal("InvalidSignature")
            }
        } else if configuration.requireAuth {
            // The code Alibaba's Android SDK knows for it: no retry, no other server, an empty answer
            // kept for an hour (request/HttpException.java, ERROR_MSG_UNSIGNED).
            return alibabaRefusal("UnsignedInterfaceDisabled")
        }
        // The fields: in the clear, or inside `enc` for the encrypted modes.
        var fields = query
        var cipher: AlibabaV2Cipher?
        if mode != 0 {
            guard let key = configuration.accounts.alibabaAES[account],
                let made = AlibabaV2Cipher(AlibabaEncryption(mode: mode == 1 ? .cbc : .gcm, key: key))
            else {
                // The account has no AES key here: it cannot be read, nor answered.
                return alibabaRefusal("UnsupportedMode", status: .badRequest)
            }
            guard let enc = query["enc"] else { return alibabaRefusal("MissingArgument", status: .badRequest) }
            do {
                fields = try made.fields(ofEncrypted: enc)
            } catch {
                logger.debug("v2 enc refused", metadata: ["id": "\(account)", "why": "\(error.reason)"])
                return alibabaRefusal("InvalidParameter", status: .badRequest)  // ours: the vendor's is not public
            }
            cipher = made
        }
        guard let dn = fields["dn"] else { return alibabaRefusal("MissingArgument", status: .badRequest) }
        let wants = try addressTypes(fields["q"], parameter: "q")
        let requested = try fields["cip"].map { try requestSubnet(request, ip: $0) } ?? subnet
        let answers: [(String, HostAnswer)]
        switch try batchAnswers(dn, parameter: "dn", wants: wants, { try lookup($0, requested) }) {
        case .answered(let given): answers = given
        case .refused(let response): return response
        }
        // `cip`: the address the answers are for, the one the request named if it named one.
        let data = AlibabaV2Format.data(
            answers,
            clientAddress: fields["cip"].flatMap(IPAddress.init) ?? request.remoteIP
        )
        let body: [UInt8]
        if let cipher {
            do {
                body = AlibabaV2Format.format(mode: mode, data: nil, encrypted: try cipher.sealAnswer(data))
            } catch {
                logger.warning("v2 answer not sealed", metadata: ["id": "\(account)", "why": "\(error.reason)"])
                return ListenerResponse(status: .internalServerError, text: "the answer could not be encrypted")
            }
        } else {
            body = AlibabaV2Format.format(mode: 0, data: data)
        }
        return ListenerResponse(contentType: "application/json", body: body)
    }
}

extension ServiceCore {
    /// The refusal of a scheduling request when no service address is configured.
    private var noServiceList: ListenerResponse {
        ListenerResponse(
            status: .notFound,
            text: "no service list here: start the server with --service-ip to answer /ACCOUNT/ss and /conf"
        )
    }

    /// Alibaba's `/ACCOUNT/ss`: the configured service addresses. Unsigned, as the vendor's iOS,
    /// Android, Go and Node SDKs send it, or signed as its C SDK signs it (`s`, `t`, `n`; see
    /// `AlibabaSigning.scheduleSignature`): a signature that is there is checked, always, and `t` must be
    /// within `AlibabaSigning.maximumValidity` of the server's clock. An account this server does not
    /// know is refused like its queries, unless the server knows no Alibaba account and answers
    /// unauthenticated forms.
    func alibabaServiceList(account: String, _ query: [String: String]) -> ListenerResponse {
        let accounts = configuration.accounts
        if accounts.alibaba[account] == nil, !accounts.alibaba.isEmpty || configuration.requireAuth {
            return alibabaRefusal("InvalidAccount")
        }
        if let s = query["s"] {
            guard let secrets = accounts.alibaba[account] else { return alibabaRefusal("InvalidAccount") }
            guard let time = query["t"].flatMap({ Int($0) }), let nonce = query["n"] else {
                return alibabaRefusal("MissingArgument", status: .badRequest)
            }
            let now = configuration.unixTime()
            if time < now - AlibabaSigning.maximumValidity { return alibabaRefusal("SignatureExpired") }
            guard time <= now + AlibabaSigning.maximumValidity,
                signedByAny(s, secrets, { AlibabaSigning.scheduleSignature(nonce: nonce, secret: $0, time: time) })
            else { return alibabaRefusal("InvalidSignature") }
        }
        let addresses = configuration.serviceAddresses
        guard !addresses.isEmpty else { return noServiceList }
        return ListenerResponse(
            contentType: "application/json",
            body: ServiceListFormat.formatAlibaba(
                ipv4: addresses.filter { !$0.isIPv6 },
                ipv6: addresses.filter(\.isIPv6),
                ports: configuration.servicePorts
            )
        )
    }

    /// DNSPod's `/conf?id=ID&alg=aes|des` (the text encrypted with the account's key), or `?token=T`
    /// with or without `id`: DNSPod's Android and iOS SDKs send the token alone over HTTPS
    /// (httpdns-sdk-android `ConfigFromServer.java`, httpdns-sdk-ios `MSDKDnsManager.m`), so without an
    /// `id` any account's token is accepted. Refusals are an empty 200, as for `/d`.
    func dnspodServiceList(_ query: [String: String]) -> ListenerResponse {
        let refused = ListenerResponse(body: [UInt8]())
        let id = query["id"].flatMap { $0.isEmpty ? nil : $0 }
        guard id != nil || query["token"] != nil else { return refused }
        let addresses = configuration.serviceAddresses
        guard !addresses.isEmpty else { return noServiceList }
        let text = ServiceListFormat.formatTencent(addresses, minutes: configuration.serviceListMinutes)
        let accounts = configuration.accounts
        if let token = query["token"] {
            let candidates =
                id.map { accounts.dnspodTokens[$0].map { [$0] } ?? [] } ?? Array(accounts.dnspodTokens.values)
            guard candidates.contains(where: { constantTimeEqual(Array(token.utf8), $0.bytes) }) else {
                return refused
            }
            return ListenerResponse(body: Array(text.utf8))
        }
        guard let id else { return refused }
        let algorithm = DNSPodCipher.Algorithm(rawValue: query["alg"]?.lowercased() ?? "des")
        guard let algorithm, let cipher = accounts.dnspodKeys[id], cipher.algorithm == algorithm else {
            return refused
        }
        return ListenerResponse(body: Array(cipher.seal(text).utf8))
    }
}
