import HTTPDNSCore
import HTTPDNSEngine

/// The addresses of a name, ready to connect to.
public struct Resolution: Hashable, Sendable {
    /// The name looked up, in normal form (lower case, no trailing dot).
    public var name: String {
        get { storage.fields.name }
        set { unique().fields.name = newValue }
    }
    /// IPv4 addresses, in the order to try them.
    public var ipv4: [IPAddress] {
        get { storage.fields.ipv4 }
        set { unique().fields.ipv4 = newValue }
    }
    /// IPv6 addresses, in the order to try them.
    public var ipv6: [IPAddress] {
        get { storage.fields.ipv6 }
        set { unique().fields.ipv6 = newValue }
    }
    /// Seconds the answer stays valid (the smaller of the two families'; nil when unknown, e.g. system).
    public var ttl: UInt32? {
        get { storage.fields.ttl }
        set { unique().fields.ttl = newValue }
    }
    /// Where the answer came from.
    public var source: ResolutionSource {
        get { storage.fields.source }
        set { unique().fields.source = newValue }
    }
    /// How long the lookup took (zero for an IP literal, and for a cached answer served again within the
    /// second, which is one table read).
    public var elapsed: Duration {
        get { storage.fields.elapsed }
        set { unique().fields.elapsed = newValue }
    }
    /// The address the HTTPDNS service saw the query come from, when it says (Tencent Cloud / DNSPod
    /// `clientip=1`, Alibaba `client_ip`): the public address of the device's network as the service
    /// sees it, which is what it chose the answer for. Nil for other sources.
    public var clientAddress: IPAddress? {
        get { storage.fields.clientAddress }
        set { unique().fields.clientAddress = newValue }
    }
    /// How long past its TTL this answer was when served (serve-expired, source `.stale`); nil for a
    /// fresh one. The app may treat an answer expired for hours as a guess (it is refreshed in the
    /// background at once).
    public var expiredFor: Duration? {
        get { storage.fields.expiredFor }
        set { unique().fields.expiredFor = newValue }
    }
    /// Whether the cache gave any of the addresses (fresh or stale, a persisted answer too): a connect
    /// that fails at them asks again past the cache (the engine's ConnectFailover).
    var remembered: Bool {
        get { storage.fields.remembered }
        set { unique().fields.remembered = newValue }
    }

    /// The fields, shared by copies until one of them changes (copy-on-write): copying a resolution is
    /// one retain instead of one per array and string, which was a third of a cached lookup served
    /// again. Written only through `unique()`, so a shared storage is never written: that is
    /// what makes it safe to send.
    private final class Storage: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private struct Fields: Hashable {
        var name: String
        var ipv4: [IPAddress]
        var ipv6: [IPAddress]
        var ttl: UInt32?
        var source: ResolutionSource
        var elapsed: Duration
        var clientAddress: IPAddress?
        var expiredFor: Duration?
        var remembered = false
    }

    private var storage: Storage

    init(
        name: String,
        ipv4: [IPAddress],
        ipv6: [IPAddress],
        ttl: UInt32?,
        source: ResolutionSource,
        elapsed: Duration,
        clientAddress: IPAddress? = nil,
        expiredFor: Duration? = nil
    ) {
        storage = Storage(
            Fields(
                name: name,
                ipv4: ipv4,
                ipv6: ipv6,
                ttl: ttl,
                source: source,
                elapsed: elapsed,
                clientAddress: clientAddress,
                expiredFor: expiredFor
            )
        )
    }

    /// The storage, copied first if another resolution shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return storage
    }

    /// Equal when every field is.
    public static func == (l: Resolution, r: Resolution) -> Bool {
        l.storage === r.storage || l.storage.fields == r.storage.fields
    }

    /// Hashes every field, consistent with `==`.
    public func hash(into hasher: inout Hasher) {
        storage.fields.hash(into: &hasher)
    }

    /// The answer for an IP-literal host: the address itself, no lookup.
    static func literal(_ host: String, _ ip: IPAddress) -> Resolution {
        Resolution(
            name: host,
            ipv4: ip.isIPv6 ? [] : [ip],
            ipv6: ip.isIPv6 ? [ip] : [],
            ttl: nil,
            source: .literal,
            elapsed: .zero
        )
    }

    /// All addresses, IPv6 and IPv4 interleaved with IPv6 first (RFC 8305 §4), the order to try them in.
    public var addresses: [IPAddress] { interleavedIPv6First(ipv4: ipv4, ipv6: ipv6) }
}

/// Why a name could not be resolved.
///
/// Compare errors, or switch on `code`, to decide what to do; `description` says what happened with
/// each provider that was asked, and `failures` keeps each provider's own error as a value (an
/// `HTTPEngineError` for a DoH server whose certificate is not trusted, for one). Two errors are
/// equal when their codes and names are. New codes may be added in minor releases.
public struct ResolverError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kind of failure this is. An open set of values, like an enum that may grow.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidName
            case noAddress
            case allProvidersFailed
            case timeout
            case cancelled
            case shutdown
            case calledOnEventLoop
            case wouldBlockMainThread
            case notRewritable
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The name is not a valid hostname.
        public static let invalidName = Code(.invalidName)
        /// The name exists nowhere, or has no address of the families asked.
        public static let noAddress = Code(.noAddress)
        /// Every provider failed (and LocalDNS too, when it was allowed to answer instead); see `failures`.
        public static let allProvidersFailed = Code(.allProvidersFailed)
        /// The lookup's own deadline passed before an answer came.
        public static let timeout = Code(.timeout)
        /// The lookup was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The resolver, or the HTTP engine its providers use, was shut down.
        public static let shutdown = Code(.shutdown)
        /// A blocking lookup was called on a SwiftNIO event loop thread and refused (it could deadlock).
        public static let calledOnEventLoop = Code(.calledOnEventLoop)
        /// A blocking lookup on the main thread found nothing cached: it started the lookup and did not
        /// wait (the UI must not freeze). Call again later, or resolve asynchronously.
        public static let wouldBlockMainThread = Code(.wouldBlockMainThread)
        /// The URL cannot be rewritten to connect to an address (no host, or not an http URL).
        public static let notRewritable = Code(.notRewritable)

        /// The code's name, e.g. `allProvidersFailed`.
        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public let code: Code
    /// The name that was looked up (or the URL, for `.notRewritable`).
    public let name: String
    /// What happened, in words, with each provider that was asked.
    public let message: String
    /// Each provider that was asked and failed, with its own error, in the order they were asked
    /// (LocalDNS last when it was the fallback). Empty when no provider was asked.
    public var failures: [ProviderFailure]

    package init(_ code: Code, name: String, _ message: String, failures: [ProviderFailure] = []) {
        self.code = code
        self.name = name
        self.message = message
        self.failures = failures
    }

    /// Errors are equal when their codes and names are.
    public static func == (l: ResolverError, r: ResolverError) -> Bool { l.code == r.code && l.name == r.name }
    /// Hashes the code and the name, consistent with `==`.

    /// The message.
    public var description: String { message }
}

extension ResolverError: ProviderFailures {
    package var providerErrors: [any Error] { failures.map(\.error) }
}

/// One provider that could not answer a lookup, and why.
public struct ProviderFailure: Sendable, CustomStringConvertible {
    /// The provider as named in output, e.g. `doh:https://127.0.0.1:8473/dns-query` (its resolver spec
    /// without the query string, which may carry an account token).
    public var provider: String
    /// The provider's own error: an `HTTPEngineError` when the HTTP exchange with it failed (untrusted
    /// certificate, timeout, refused connection…), otherwise an error describing its answer.
    public var error: any Error

    /// Keeps the provider's own error: the one a `ProviderError` carries (the engine's, when the
    /// exchange failed), else `error` itself.
    init(provider: String, error: any Error) {
        self.provider = provider
        self.error = (error as? ProviderError)?.underlying ?? error
    }

    /// `provider: error`.
    public var description: String { "\(provider): \(error)" }
}

/// LocalDNS and HTTPDNS answers for one name side by side, and the verdict on LocalDNS.
public struct HijackReport: Sendable {
    /// The name compared, as given.
    public var name: String
    /// What HTTPDNS answered.
    public var httpdns: Result<Resolution, ResolverError>
    /// What the network's own resolver answered.
    public var localDNS: Result<Resolution, ResolverError>

    /// `consistent`, `hijacked`, `blocked` (LocalDNS gave no address while HTTPDNS did) or `unverified`
    /// (HTTPDNS gave no answer); see `HijackVerdict`.
    public var verdict: HijackVerdict {
        HijackVerdict.judge(httpdns: Self.answer(httpdns), localDNS: Self.answer(localDNS))
    }

    /// True when the verdict is `hijacked` or `blocked`.
    public var hijacked: Bool { verdict.isHijack }

    /// A lookup's result as the verdict reads it: "no address" is an answer, other errors are none.
    static func answer(_ result: Result<Resolution, ResolverError>) -> HijackVerdict.Answer {
        switch result {
        case .success(let resolution): return .addresses(resolution.addresses)
        case .failure(let error): return error.code == .noAddress ? .none : .failed
        }
    }
}
