/// A configuration value that cannot be used: a resolver spec (or its credentials), a host pattern, a
/// certificate file, a proxy setting, an address override or cache settings. Thrown when the configuration is built or
/// started, never during lookups.
///
/// Compare errors, or switch on `code`, to decide what to do; `message` says which value is wrong
/// and how. Two errors are equal when their codes are. New codes may be added in minor releases.
public struct HTTPDNSConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Which kind of value was refused. An open set of values, like an enum that may grow.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidResolverSpec
            case invalidHostPattern
            case invalidCertificate
            case invalidProxyConfiguration
            case invalidAddressOverride
            case invalidCacheConfiguration
            case invalidClientSubnet
            case unavailableOnPlatform
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A resolver spec or endpoint URL is malformed, or names a host it cannot reach without DNS.
        public static let invalidResolverSpec = Code(.invalidResolverSpec)
        /// A host pattern is not an exact name, `*.domain` or `*`.
        public static let invalidHostPattern = Code(.invalidHostPattern)
        /// A certificate file could not be read or holds no PEM certificate.
        public static let invalidCertificate = Code(.invalidCertificate)
        /// The local proxy's settings are unusable or unsafe (e.g. off loopback without credentials), or
        /// an upstream HTTP proxy cannot be used (not an http:// URL, no host, a bad port).
        public static let invalidProxyConfiguration = Code(.invalidProxyConfiguration)
        /// An address override names no hostname, or gives it no address.
        public static let invalidAddressOverride = Code(.invalidAddressOverride)
        /// Cache settings that cannot be used: a TTL floor above the ceiling, a serve-expired window
        /// outside 0 to 7 days, a TTL override with a bad pattern or a TTL of zero.
        public static let invalidCacheConfiguration = Code(.invalidCacheConfiguration)
        /// A client subnet that is not `ADDRESS[/PREFIX]`, or whose prefix is longer than the address.
        public static let invalidClientSubnet = Code(.invalidClientSubnet)
        /// The feature needs a newer or another operating system than the one running: system encrypted
        /// DNS needs Network.framework (Apple platforms), proxy configurations iOS 17 / macOS 14.
        public static let unavailableOnPlatform = Code(.unavailableOnPlatform)

        /// The code's name, e.g. `invalidHostPattern`.
        public var description: String { base.rawValue }
    }

    /// Which kind of value was refused.
    public let code: Code
    /// Which value is wrong and how, e.g. `"doh:ftp://x/" uses ftp:, only http: and https: …`.
    public let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Errors are equal when their codes are.
    public static func == (l: HTTPDNSConfigurationError, r: HTTPDNSConfigurationError) -> Bool { l.code == r.code }

    /// The message.
    public var description: String { message }
}
