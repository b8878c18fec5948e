// Credentials of commercial HTTPDNS services for the commands that resolve. Secrets come
// from files or the environment, never from flag values: a command line is visible to every process on
// the machine (`ps`, /proc/PID/cmdline). They are read once, held as `ResolverSecret` (which never
// prints its bytes), and apply to every `dnspod:` / `json:` resolver of the command.

import ArgumentParser
import Foundation
import HTTPDNSCore
import HTTPDNSLookup

struct CredentialOptions: ParsableArguments {
    init() {}

    @Option(
        name: .customLong("dnspod-id"),
        help: ArgumentHelp("Tencent Cloud HTTPDNS (DNSPod) account id, for every dnspod: resolver.", valueName: "ID")
    )
    var dnspodID: String?

    @Option(
        name: .customLong("dnspod-key-file"),
        help: ArgumentHelp(
            "File holding the account's AES (16 bytes) or DES key; or set \(Self.keyVariable).",
            valueName: "FILE"
        )
    )
    var dnspodKeyFile: String?

    @Option(
        name: .customLong("dnspod-alg"),
        help: ArgumentHelp(
            "Cipher of the key: aes (default) or des (weak; only where the account has no AES).",
            valueName: "aes|des"
        )
    )
    var dnspodAlg: String?

    @Option(
        name: .customLong("dnspod-token-file"),
        help: ArgumentHelp(
            "File holding the account's HTTPS token (https:// resolvers only); or set \(Self.tokenVariable).",
            valueName: "FILE"
        )
    )
    var dnspodTokenFile: String?

    @Option(
        name: .customLong("alibaba-secret-file"),
        help: ArgumentHelp(
            "File holding the Alibaba Cloud EMAS signing secret, for json:…/ACCOUNT/d and json:…/v2/d?id=ACCOUNT resolvers; or set \(Self.alibabaVariable).",
            valueName: "FILE"
        )
    )
    var alibabaSecretFile: String?

    @Option(
        name: .customLong("alibaba-aes-key-file"),
        help: ArgumentHelp(
            "File holding the Alibaba Cloud EMAS AES key (hex), for json:…/v2/d?id=ACCOUNT resolvers: names and answers encrypted (m=1 or m=2); or set \(Self.alibabaAESVariable).",
            valueName: "FILE"
        )
    )
    var alibabaAESKeyFile: String?

    @Option(
        name: .customLong("alibaba-mode"),
        help: ArgumentHelp(
            "With an AES key: cbc (m=1, the vendor's iOS SDK; the default) or gcm (m=2, its Android SDK).",
            valueName: "cbc|gcm"
        )
    )
    var alibabaMode: String?

    static let keyVariable = "HTTPDNS_DNSPOD_KEY"
    static let tokenVariable = "HTTPDNS_DNSPOD_TOKEN"
    static let alibabaVariable = "HTTPDNS_ALIBABA_SECRET"
    static let alibabaAESVariable = "HTTPDNS_ALIBABA_AES_KEY"

    /// `specs` with the credentials attached, each checked by `ResolverSpec.credentialProblem` (the
    /// library's own check). Every mistake is a usage error (exit 64) naming the flag; no message ever
    /// carries a secret.
    func apply(to specs: [ResolverSpec], environment: [String: String] = ProcessInfo.processInfo.environment)
        throws -> [ResolverSpec]
    {
        let dnspodResolvers = specs.filter { if case .dnspod = $0 { return true } else { return false } }
        let jsonResolvers = specs.filter { if case .json = $0 { return true } else { return false } }
        let auth = try dnspodAuth(environment: environment, hasResolver: !dnspodResolvers.isEmpty)
        let alibaba = try alibabaSecret(environment: environment, hasResolver: !jsonResolvers.isEmpty)
        let encryption = try alibabaEncryption(environment: environment, hasResolver: !jsonResolvers.isEmpty)
        return try specs.map { spec in
            let attached: ResolverSpec
            switch spec {
            case .dnspod(let endpoint, _) where auth != nil: attached = .dnspod(endpoint, auth: auth)
            case .json(let endpoint, let secret, let given) where alibaba != nil || encryption != nil:
                attached = .json(endpoint, secret: alibaba ?? secret, encryption: encryption ?? given)
            default: attached = spec
            }
            if let problem = attached.credentialProblem {
                throw ValidationError("\(flag(for: problem.credential)): \(problem.reason)")
            }
            return attached
        }
    }

    /// The flag (or environment variable) that gave `credential`; `--resolver` for the URL itself.
    func flag(for credential: ResolverCredential?) -> String {
        switch credential {
        case .dnspodID: return "--dnspod-id"
        case .dnspodKey: return dnspodKeyFile != nil ? "--dnspod-key-file" : Self.keyVariable
        case .dnspodToken: return dnspodTokenFile != nil ? "--dnspod-token-file" : Self.tokenVariable
        case .alibabaSecret: return alibabaSecretFile != nil ? "--alibaba-secret-file" : Self.alibabaVariable
        case .alibabaAESKey: return alibabaAESKeyFile != nil ? "--alibaba-aes-key-file" : Self.alibabaAESVariable
        case nil: return "--resolver"
        }
    }

    func dnspodAuth(environment: [String: String], hasResolver: Bool) throws -> DNSPodAuth? {
        let flagged = [
            ("--dnspod-id", dnspodID), ("--dnspod-key-file", dnspodKeyFile), ("--dnspod-alg", dnspodAlg),
            ("--dnspod-token-file", dnspodTokenFile),
        ].first { $0.1 != nil }
        if let (flag, _) = flagged, !hasResolver {
            throw ValidationError("\(flag): no dnspod: resolver to use it with; add --resolver dnspod:URL")
        }
        guard hasResolver else { return nil }
        let key = try secret(file: dnspodKeyFile, flag: "--dnspod-key-file", variable: Self.keyVariable, environment)
        let token = try secret(
            file: dnspodTokenFile,
            flag: "--dnspod-token-file",
            variable: Self.tokenVariable,
            environment
        )
        guard let id = dnspodID else {
            if dnspodKeyFile != nil || dnspodTokenFile != nil || dnspodAlg != nil {
                throw ValidationError("--dnspod-id: give the account id the key or token belongs to")
            }
            return nil  // the free form; a key in the environment alone does not switch it on
        }
        let auth: DNSPodAuth
        switch (key, token) {
        case (nil, nil):
            throw ValidationError(
                "--dnspod-id: give --dnspod-key-file FILE (or \(Self.keyVariable)) or --dnspod-token-file FILE (or \(Self.tokenVariable))"
            )
        case (.some, .some):
            throw ValidationError("--dnspod-key-file and --dnspod-token-file: give one, the key or the token")
        case (let key?, nil):
            switch dnspodAlg?.lowercased() ?? "aes" {
            case "aes": auth = .aes(id: id, key: key)
            case "des": auth = .des(id: id, key: key)
            default: throw ValidationError("--dnspod-alg: use aes or des")
            }
        case (nil, let token?):
            if dnspodAlg != nil {
                throw ValidationError("--dnspod-alg: the token form is not encrypted; drop --dnspod-alg")
            }
            auth = .token(id: id, token: token)
        }
        return auth
    }

    func alibabaSecret(environment: [String: String], hasResolver: Bool) throws -> ResolverSecret? {
        if alibabaSecretFile != nil, !hasResolver {
            throw ValidationError(
                "--alibaba-secret-file: no json: resolver to use it with; add --resolver json:http://HOST/ACCOUNT/d"
            )
        }
        guard hasResolver else { return nil }
        return try secret(
            file: alibabaSecretFile,
            flag: "--alibaba-secret-file",
            variable: Self.alibabaVariable,
            environment
        )
    }

    /// The AES key and mode of Alibaba's encrypted v2 forms; nil when no key is given.
    func alibabaEncryption(environment: [String: String], hasResolver: Bool) throws -> AlibabaEncryption? {
        if let flag = alibabaAESKeyFile != nil ? "--alibaba-aes-key-file" : alibabaMode != nil ? "--alibaba-mode" : nil,
            !hasResolver
        {
            throw ValidationError(
                "\(flag): no json: resolver to use it with; add --resolver json:http://HOST/v2/d?id=ACCOUNT"
            )
        }
        guard hasResolver else { return nil }
        let key = try secret(
            file: alibabaAESKeyFile,
            flag: "--alibaba-aes-key-file",
            variable: Self.alibabaAESVariable,
            environment
        )
        let mode: AlibabaEncryption.Mode
        switch alibabaMode?.lowercased() {
        case nil, "cbc", "1": mode = .cbc
        case "gcm", "2": mode = .gcm
        case let other?: throw ValidationError("--alibaba-mode: \(other.prefix(20)) is not cbc or gcm")
        }
        guard let key else {
            if alibabaMode != nil {
                throw ValidationError(
                    "--alibaba-mode: give the AES key too: --alibaba-aes-key-file FILE (or \(Self.alibabaAESVariable))"
                )
            }
            return nil
        }
        return AlibabaEncryption(mode: mode, key: key)
    }

    /// The secret in `file`, else in the environment `variable`; nil when neither is given.
    func secret(file: String?, flag: String, variable: String, _ environment: [String: String]) throws
        -> ResolverSecret?
    {
        if let file { return try readSecret(file, flag: flag) }
        return environment[variable].map { ResolverSecret($0) }
    }
}

/// The secret in `file` (its text without surrounding white space); a usage error naming `flag` when the
/// file cannot be read, is empty or is not text of at most 4 KiB. Shared with `serve`.
package func readSecret(_ file: String, flag: String) throws -> ResolverSecret {
    guard let data = FileManager.default.contents(atPath: file) else {
        throw ValidationError("\(flag): cannot read \(file)")
    }
    guard data.count <= 4096, let text = String(data: data, encoding: .utf8) else {
        throw ValidationError("\(flag): \(file) does not hold a key (text of at most 4 KiB expected)")
    }
    let secret = ResolverSecret(text)
    guard !secret.isEmpty else { throw ValidationError("\(flag): \(file) is empty") }
    return secret
}
