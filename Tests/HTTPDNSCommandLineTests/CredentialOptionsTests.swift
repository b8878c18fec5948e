// CredentialOptions: the secrets of commercial HTTPDNS services (DNSPod keys and tokens, Alibaba's signing
// secret and AES key) come from files or the environment, never from flag values, since any process can
// read a command line. These tests pin the flag and variable names, which source wins, the file rules of
// `readSecret`, and the exact usage errors, none of which may carry a secret. The flags are parsed by
// ArgumentParser (CredentialOptions.parse) and the environment is passed to `apply(to:environment:)`.

import ArgumentParser
import Foundation
@testable import HTTPDNSCommandLine
@testable import HTTPDNSCore
@testable import HTTPDNSLookup
import Testing

private let dnspod = "dnspod:http://127.0.0.1:8080/d"
private let dnspodTLS = "dnspod:https://127.0.0.1:8443/d"
private let json = "json:http://127.0.0.1:8080/resolve"
private let jsonAccount = "json:http://127.0.0.1:8080/139450/d"
private let jsonV2 = "json:http://127.0.0.1:8080/v2/d?id=139450"
private let doh = "doh:https://127.0.0.1:8473/dns-query"

/// A 16-byte AES key, as DNSPod's console shows it.
private let aesKey = "0123456789abcdef"
/// A 16-byte AES key in hex, as Alibaba's console shows it.
private let aesHex = "000102030405060708090a0b0c0d0e0f"

/// The secret files every mistake below may name as `@NAME`, each with a trailing newline as an editor
/// leaves it. The wrong ones carry "zQx", which no message may ever contain.
private let secretFiles = [
    "aes.key": aesKey,
    "short.key": "zQx-short",  // 9 bytes: not an AES key
    "des.key": "zQx-des",  // 7 bytes: not a DES key
    "token": "zQx-token",
    "alibaba.secret": "zQx-not-hex",
    "aes.hex": aesHex,
    "short.hex": "abcdef01",  // hex of 4 bytes: not an AES key
]

private func specs(_ texts: String...) throws -> [ResolverSpec] {
    try texts.map(ResolverSpec.init(parsing:))
}

/// `flags` parsed as the command line gives them, with `@NAME` read as the path of that file in `dir`.
private func credentials(_ flags: [String], in dir: TemporaryDirectory) throws -> CredentialOptions {
    try CredentialOptions.parse(flags.map { $0.hasPrefix("@") ? dir.path(String($0.dropFirst())) : $0 })
}

/// One mistake: the resolvers, the credential flags and environment given, and the usage error it is.
struct CredentialMistake: Sendable, CustomStringConvertible {
    var resolvers: [String]
    var flags: [String]
    var environment: [String: String] = [:]
    var message: String

    var description: String { message }
}

private let mistakes: [CredentialMistake] = [
    // DNSPod flags need a dnspod: resolver, whichever comes first.
    .init(
        resolvers: [doh],
        flags: ["--dnspod-id", "1001"],
        message: "--dnspod-id: no dnspod: resolver to use it with; add --resolver dnspod:URL"
    ),
    .init(
        resolvers: [doh],
        flags: ["--dnspod-key-file", "@aes.key"],
        message: "--dnspod-key-file: no dnspod: resolver to use it with; add --resolver dnspod:URL"
    ),
    .init(
        resolvers: [json],
        flags: ["--dnspod-alg", "aes"],
        message: "--dnspod-alg: no dnspod: resolver to use it with; add --resolver dnspod:URL"
    ),
    .init(
        resolvers: [doh],
        flags: ["--dnspod-token-file", "@token"],
        message: "--dnspod-token-file: no dnspod: resolver to use it with; add --resolver dnspod:URL"
    ),
    // DNSPod: which pieces go together.
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-key-file", "@aes.key"],
        message: "--dnspod-id: give the account id the key or token belongs to"
    ),
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-alg", "des"],
        message: "--dnspod-id: give the account id the key or token belongs to"
    ),
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-id", "1001"],
        message:
            "--dnspod-id: give --dnspod-key-file FILE (or HTTPDNS_DNSPOD_KEY) or --dnspod-token-file FILE (or HTTPDNS_DNSPOD_TOKEN)"
    ),
    .init(
        resolvers: [dnspodTLS],
        flags: ["--dnspod-id", "1001", "--dnspod-key-file", "@aes.key", "--dnspod-token-file", "@token"],
        message: "--dnspod-key-file and --dnspod-token-file: give one, the key or the token"
    ),
    .init(
        resolvers: [dnspodTLS],
        flags: ["--dnspod-id", "1001", "--dnspod-token-file", "@token"],
        environment: ["HTTPDNS_DNSPOD_KEY": aesKey],
        message: "--dnspod-key-file and --dnspod-token-file: give one, the key or the token"
    ),
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-id", "1001", "--dnspod-key-file", "@aes.key", "--dnspod-alg", "rc4"],
        message: "--dnspod-alg: use aes or des"
    ),
    .init(
        resolvers: [dnspodTLS],
        flags: ["--dnspod-id", "1001", "--dnspod-token-file", "@token", "--dnspod-alg", "aes"],
        message: "--dnspod-alg: the token form is not encrypted; drop --dnspod-alg"
    ),
    // DNSPod: the library's check of each credential, reported under the flag or variable that gave it.
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-id", "acct-1", "--dnspod-key-file", "@aes.key"],
        message: "--dnspod-id: the DNSPod account id \"acct-1\" is not a number (the console shows it as a number)"
    ),
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-id", "1001", "--dnspod-key-file", "@short.key"],
        message: "--dnspod-key-file: an AES key is 16 bytes; this one is 9"
    ),
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-id", "1001"],
        environment: ["HTTPDNS_DNSPOD_KEY": "zQx-short"],
        message: "HTTPDNS_DNSPOD_KEY: an AES key is 16 bytes; this one is 9"
    ),
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-id", "1001", "--dnspod-key-file", "@des.key", "--dnspod-alg", "des"],
        message: "--dnspod-key-file: a DES key is at least 8 bytes (the first 8 are used); this one is 7"
    ),
    .init(
        resolvers: [dnspod],
        flags: ["--dnspod-id", "1001", "--dnspod-token-file", "@token"],
        message:
            "--dnspod-token-file: the token travels only over HTTPS, and dnspod:http://127.0.0.1:8080/d is http; use an https:// resolver URL (e.g. https://119.29.29.99/d), or a key"
    ),
    .init(
        resolvers: [dnspodTLS],
        flags: ["--dnspod-id", "1001"],
        environment: ["HTTPDNS_DNSPOD_TOKEN": "   "],
        message: "HTTPDNS_DNSPOD_TOKEN: the token is empty"
    ),
    // Alibaba flags need a json: resolver.
    .init(
        resolvers: [dnspod],
        flags: ["--alibaba-secret-file", "@alibaba.secret"],
        message: "--alibaba-secret-file: no json: resolver to use it with; add --resolver json:http://HOST/ACCOUNT/d"
    ),
    .init(
        resolvers: [doh],
        flags: ["--alibaba-aes-key-file", "@aes.hex"],
        message:
            "--alibaba-aes-key-file: no json: resolver to use it with; add --resolver json:http://HOST/v2/d?id=ACCOUNT"
    ),
    .init(
        resolvers: [doh],
        flags: ["--alibaba-mode", "gcm"],
        message: "--alibaba-mode: no json: resolver to use it with; add --resolver json:http://HOST/v2/d?id=ACCOUNT"
    ),
    // Alibaba: the secret and the key against the resolver's form.
    .init(
        resolvers: [json],
        flags: ["--alibaba-secret-file", "@alibaba.secret"],
        message:
            "--alibaba-secret-file: signed queries need the account; give the resolver as json:http://HOST/ACCOUNT/d or json:http://HOST/v2/d?id=ACCOUNT, not json:http://127.0.0.1:8080/resolve"
    ),
    .init(
        resolvers: [json],
        flags: [],
        environment: ["HTTPDNS_ALIBABA_SECRET": "zQx-env"],
        message:
            "HTTPDNS_ALIBABA_SECRET: signed queries need the account; give the resolver as json:http://HOST/ACCOUNT/d or json:http://HOST/v2/d?id=ACCOUNT, not json:http://127.0.0.1:8080/resolve"
    ),
    .init(
        resolvers: [jsonAccount],
        flags: [],
        environment: ["HTTPDNS_ALIBABA_SECRET": "   "],
        message: "HTTPDNS_ALIBABA_SECRET: the Alibaba signing secret is empty"
    ),
    .init(
        resolvers: [jsonV2],
        flags: ["--alibaba-secret-file", "@alibaba.secret"],
        message: "--alibaba-secret-file: the v2 API's secret is hex, as the console shows it; this one is not"
    ),
    .init(
        resolvers: [jsonAccount],
        flags: ["--alibaba-aes-key-file", "@aes.hex"],
        message:
            "--alibaba-aes-key-file: encrypted queries are the v2 API's; give the resolver as json:http://HOST/v2/d?id=ACCOUNT, not json:http://127.0.0.1:8080/139450/d"
    ),
    .init(
        resolvers: [jsonV2],
        flags: ["--alibaba-aes-key-file", "@short.hex"],
        message:
            "--alibaba-aes-key-file: the AES key is hex of 16, 24 or 32 bytes, as the console shows it; this one is not"
    ),
    .init(
        resolvers: [jsonV2],
        flags: [],
        environment: ["HTTPDNS_ALIBABA_AES_KEY": "abcdef01"],
        message:
            "HTTPDNS_ALIBABA_AES_KEY: the AES key is hex of 16, 24 or 32 bytes, as the console shows it; this one is not"
    ),
    .init(
        resolvers: [jsonV2],
        flags: ["--alibaba-mode", "gcm"],
        message: "--alibaba-mode: give the AES key too: --alibaba-aes-key-file FILE (or HTTPDNS_ALIBABA_AES_KEY)"
    ),
    .init(
        resolvers: [jsonV2],
        flags: ["--alibaba-aes-key-file", "@aes.hex", "--alibaba-mode", "ECB"],
        message: "--alibaba-mode: ecb is not cbc or gcm"
    ),
    .init(
        resolvers: [jsonV2],
        flags: ["--alibaba-aes-key-file", "@aes.hex", "--alibaba-mode", String(repeating: "x", count: 30)],
        message: "--alibaba-mode: \(String(repeating: "x", count: 20)) is not cbc or gcm"
    ),
    // A problem with the resolver URL itself is --resolver's.
    .init(
        resolvers: ["json:http://127.0.0.1:8080/v2/d"],
        flags: [],
        message: "--resolver: the v2 API needs the account: give the resolver as json:http://HOST/v2/d?id=ACCOUNT"
    ),
]

@Suite struct CredentialOptionsTests {
    @Test func theSecretsVariablesHaveTheDocumentedNames() {
        #expect(CredentialOptions.keyVariable == "HTTPDNS_DNSPOD_KEY")
        #expect(CredentialOptions.tokenVariable == "HTTPDNS_DNSPOD_TOKEN")
        #expect(CredentialOptions.alibabaVariable == "HTTPDNS_ALIBABA_SECRET")
        #expect(CredentialOptions.alibabaAESVariable == "HTTPDNS_ALIBABA_AES_KEY")
    }

    /// Every mistake is a usage error naming the flag, or the variable, that gave the wrong value; the
    /// secret itself is never in it.
    @Test(arguments: mistakes)
    func aCredentialMistakeIsAUsageErrorNamingItsSource(_ mistake: CredentialMistake) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        for (name, secret) in secretFiles { try dir.write(name, secret + "\n") }
        let options = try credentials(mistake.flags, in: dir)
        let resolvers = try mistake.resolvers.map(ResolverSpec.init(parsing:))
        let error = try #require(throws: ValidationError.self) {
            try options.apply(to: resolvers, environment: mistake.environment)
        }
        #expect(error.message == mistake.message)
        #expect(!error.message.contains("zQx"))
        for secret in secretFiles.values where secret != aesKey && secret != aesHex {
            #expect(!error.message.contains(secret), "\(secret)")
        }
    }

    @Test func aKeyFileAndAnIDMakeTheAESFormOfEveryDNSPodResolverAndNoOther() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let key = try dir.write("aes.key", aesKey + "\n")
        let options = try CredentialOptions.parse(["--dnspod-id", "1001", "--dnspod-key-file", key])
        let applied = try options.apply(
            to: try specs(dnspod, doh, "dnspod:http://127.0.0.2:8080/d"),
            environment: [:]
        )
        let auth = DNSPodAuth.aes(id: "1001", key: ResolverSecret(aesKey))
        let first = try ResolverEndpoint(url: "http://127.0.0.1:8080/d")
        let second = try ResolverEndpoint(url: "http://127.0.0.2:8080/d")
        let untouched = try ResolverSpec(parsing: doh)
        #expect(applied == [.dnspod(first, auth: auth), untouched, .dnspod(second, auth: auth)])
        // The specs as text (what --debug and errors show) never carry the key.
        #expect(!applied.map(\.description).joined().contains(aesKey))
    }

    @Test(arguments: ["des", "DES"])
    func theDESFormIsChosenByDnspodAlgInAnyCase(_ alg: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let key = try dir.write("des.key", "01234567")
        let options = try CredentialOptions.parse([
            "--dnspod-id", "1001", "--dnspod-key-file", key, "--dnspod-alg", alg,
        ])
        let endpoint = try ResolverEndpoint(url: "http://127.0.0.1:8080/d")
        #expect(
            try options.apply(to: try specs(dnspod), environment: [:])
                == [.dnspod(endpoint, auth: .des(id: "1001", key: ResolverSecret("01234567")))]
        )
    }

    @Test func aTokenFileMakesTheTokenFormOverHTTPS() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let token = try dir.write("token", "  tok-en\n")
        let options = try CredentialOptions.parse(["--dnspod-id", "1003", "--dnspod-token-file", token])
        let endpoint = try ResolverEndpoint(url: "https://127.0.0.1:8443/d")
        #expect(
            try options.apply(to: try specs(dnspodTLS), environment: [:])
                == [.dnspod(endpoint, auth: .token(id: "1003", token: ResolverSecret("tok-en")))]
        )
    }

    @Test func theKeyOrTokenMayComeFromTheEnvironmentAndAFileBeatsIt() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let endpoint = try ResolverEndpoint(url: "https://127.0.0.1:8443/d")
        let idOnly = try CredentialOptions.parse(["--dnspod-id", "1001"])
        #expect(
            try idOnly.apply(to: try specs(dnspodTLS), environment: ["HTTPDNS_DNSPOD_KEY": aesKey])
                == [.dnspod(endpoint, auth: .aes(id: "1001", key: ResolverSecret(aesKey)))]
        )
        #expect(
            try idOnly.apply(to: try specs(dnspodTLS), environment: ["HTTPDNS_DNSPOD_TOKEN": "env-token"])
                == [.dnspod(endpoint, auth: .token(id: "1001", token: ResolverSecret("env-token")))]
        )
        let fromFile = try CredentialOptions.parse([
            "--dnspod-id", "1001", "--dnspod-key-file", try dir.write("aes.key", "fedcba9876543210"),
        ])
        #expect(
            try fromFile.apply(to: try specs(dnspodTLS), environment: ["HTTPDNS_DNSPOD_KEY": aesKey])
                == [.dnspod(endpoint, auth: .aes(id: "1001", key: ResolverSecret("fedcba9876543210")))]
        )
    }

    /// Secrets in the environment switch nothing on by themselves: without a resolver of their kind they
    /// are ignored, and a DNSPod key without `--dnspod-id` keeps the free form.
    @Test func secretsInTheEnvironmentAloneChangeNothing() throws {
        let options = try CredentialOptions.parse([])
        let environment = [
            "HTTPDNS_DNSPOD_KEY": "zQx", "HTTPDNS_DNSPOD_TOKEN": "zQx",
            "HTTPDNS_ALIBABA_SECRET": "zQx", "HTTPDNS_ALIBABA_AES_KEY": "zQx",
        ]
        let plain = try specs(doh, "dns:127.0.0.1:53", "system")
        #expect(try options.apply(to: plain, environment: environment) == plain)
        let free = try specs(dnspod)
        #expect(try options.apply(to: free, environment: ["HTTPDNS_DNSPOD_KEY": aesKey]) == free)
    }

    @Test func alibabaSecretAndAESKeyAttachToJSONResolvers() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let secret = try dir.write("alibaba.secret", "0123456789abcdef\n")
        let signed = try CredentialOptions.parse(["--alibaba-secret-file", secret])
        let account = try ResolverEndpoint(url: "http://127.0.0.1:8080/139450/d")
        #expect(
            try signed.apply(to: try specs(jsonAccount), environment: [:])
                == [.json(account, secret: ResolverSecret("0123456789abcdef"), encryption: nil)]
        )
        let key = try dir.write("aes.hex", aesHex)
        let v2 = try ResolverEndpoint(url: "http://127.0.0.1:8080/v2/d?id=139450")
        let encrypted = try CredentialOptions.parse([
            "--alibaba-secret-file", secret, "--alibaba-aes-key-file", key, "--alibaba-mode", "gcm",
        ])
        #expect(
            try encrypted.apply(to: try specs(jsonV2), environment: [:])
                == [
                    .json(
                        v2,
                        secret: ResolverSecret("0123456789abcdef"),
                        encryption: AlibabaEncryption(mode: .gcm, key: ResolverSecret(aesHex))
                    )
                ]
        )
        let fromEnvironment = try CredentialOptions.parse([])
        #expect(
            try fromEnvironment.apply(to: try specs(jsonV2), environment: ["HTTPDNS_ALIBABA_AES_KEY": aesHex])
                == [.json(v2, secret: nil, encryption: AlibabaEncryption(mode: .cbc, key: ResolverSecret(aesHex)))]
        )
    }

    /// CBC (m=1) is the default (see above); the mode is named or numbered, in any case.
    @Test(arguments: [
        ("cbc", AlibabaEncryption.Mode.cbc), ("CBC", .cbc), ("1", .cbc), ("gcm", .gcm), ("GCM", .gcm), ("2", .gcm),
    ])
    func alibabaModeIsCBCOrGCM(_ mode: String, _ expected: AlibabaEncryption.Mode) throws {
        let options = try CredentialOptions.parse(["--alibaba-mode", mode])
        let encryption = try options.alibabaEncryption(
            environment: ["HTTPDNS_ALIBABA_AES_KEY": aesHex],
            hasResolver: true
        )
        #expect(encryption == AlibabaEncryption(mode: expected, key: ResolverSecret(aesHex)))
    }

    @Test func eachCredentialIsReportedUnderTheFlagOrVariableThatGaveIt() throws {
        let fromEnvironment = try CredentialOptions.parse([])
        #expect(fromEnvironment.flag(for: .dnspodID) == "--dnspod-id")
        #expect(fromEnvironment.flag(for: .dnspodKey) == "HTTPDNS_DNSPOD_KEY")
        #expect(fromEnvironment.flag(for: .dnspodToken) == "HTTPDNS_DNSPOD_TOKEN")
        #expect(fromEnvironment.flag(for: .alibabaSecret) == "HTTPDNS_ALIBABA_SECRET")
        #expect(fromEnvironment.flag(for: .alibabaAESKey) == "HTTPDNS_ALIBABA_AES_KEY")
        #expect(fromEnvironment.flag(for: nil) == "--resolver")
        let fromFiles = try CredentialOptions.parse([
            "--dnspod-key-file", "k", "--dnspod-token-file", "t", "--alibaba-secret-file", "s",
            "--alibaba-aes-key-file", "a",
        ])
        #expect(fromFiles.flag(for: .dnspodKey) == "--dnspod-key-file")
        #expect(fromFiles.flag(for: .dnspodToken) == "--dnspod-token-file")
        #expect(fromFiles.flag(for: .alibabaSecret) == "--alibaba-secret-file")
        #expect(fromFiles.flag(for: .alibabaAESKey) == "--alibaba-aes-key-file")
    }
}

@Suite struct SecretFlagTests {
    /// There is no flag that takes a secret itself: each such spelling is an unknown option, and the
    /// message does not repeat the value.
    @Test(arguments: ["--dnspod-key", "--dnspod-token", "--alibaba-secret", "--alibaba-aes-key"])
    func aSecretIsNeverAFlagValue(_ flag: String) {
        for arguments in [[flag, "zQx-secret-value"], ["\(flag)=zQx-secret-value"]] {
            let message = usageError(ResolverOptions.self, ["--resolver", dnspod] + arguments) ?? ""
            #expect(message.hasPrefix("Unknown option '\(flag)'"), "\(message)")
            #expect(!message.contains("zQx"), "\(message)")
        }
    }

    /// The credential flags belong to every resolving command through ResolverOptions, and its
    /// validation applies them.
    @Test func resolverOptionsCarryTheCredentialFlags() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let key = try dir.write("aes.key", aesKey + "\n")
        let short = try dir.write("short.key", "zQx-short\n")
        let options = try ResolverOptions.parse(["--resolver", dnspod, "--dnspod-id", "1001", "--dnspod-key-file", key])
        let endpoint = try ResolverEndpoint(url: "http://127.0.0.1:8080/d")
        #expect(options.credentials.dnspodID == "1001")
        #expect(
            try options.parsed().resolvers
                == [.dnspod(endpoint, auth: .aes(id: "1001", key: ResolverSecret(aesKey)))]
        )
        let message = usageError(
            ResolverOptions.self,
            ["--resolver", dnspod, "--dnspod-id", "1001", "--dnspod-key-file", short]
        )
        #expect(message == "--dnspod-key-file: an AES key is 16 bytes; this one is 9")
    }
}

@Suite struct ReadSecretTests {
    @Test func theSecretIsTheFilesTextWithoutSurroundingWhiteSpace() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = try dir.write("secret", "\n  zQx-value \t\n")
        #expect(try readSecret(file, flag: "--x") == ResolverSecret("zQx-value"))
        #expect(try readSecret(file, flag: "--x").bytes == Array("zQx-value".utf8))
    }

    /// A named file that cannot be read is an error even where the environment holds the secret.
    @Test func aMissingFileCannotBeRead() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let missing = dir.path("missing.key")
        let error = try #require(throws: ValidationError.self) { try readSecret(missing, flag: "--dnspod-key-file") }
        #expect(error.message == "--dnspod-key-file: cannot read \(missing)")
        let options = try CredentialOptions.parse(["--dnspod-id", "1001", "--dnspod-key-file", missing])
        let applied = try #require(throws: ValidationError.self) {
            try options.apply(to: try specs(dnspod), environment: ["HTTPDNS_DNSPOD_KEY": aesKey])
        }
        #expect(applied.message == "--dnspod-key-file: cannot read \(missing)")
    }

    @Test(arguments: ["", " \n\t\n"])
    func anEmptyFileIsRefused(_ text: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = try dir.write("empty", text)
        let error = try #require(throws: ValidationError.self) { try readSecret(file, flag: "--alibaba-secret-file") }
        #expect(error.message == "--alibaba-secret-file: \(file) is empty")
    }

    @Test func aFileOfMoreThan4KiBOrNotUTF8DoesNotHoldAKey() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let atLimit = try dir.write("4096", String(repeating: "k", count: 4096))
        #expect(try readSecret(atLimit, flag: "--x").bytes.count == 4096)
        for file in [
            try dir.write("4097", String(repeating: "k", count: 4097)),
            try dir.write("binary", bytes: Data([0x7A, 0xC3, 0x28, 0xFF])),
        ] {
            let error = try #require(throws: ValidationError.self) { try readSecret(file, flag: "--dnspod-token-file") }
            #expect(
                error.message == "--dnspod-token-file: \(file) does not hold a key (text of at most 4 KiB expected)"
            )
        }
    }
}
