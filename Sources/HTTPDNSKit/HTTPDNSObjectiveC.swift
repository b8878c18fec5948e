// The Objective-C API: a small facade over the front door for apps that call networking from
// Objective-C, as both vendors' SDKs are Objective-C first. Each method is one call of the Swift API the
// Linux tests run. Apple platforms only (the Objective-C runtime). COMPILED FOR iOS 16 BY THE APPLE
// CHECK, NEVER RUN HERE. The DocC article "Objective-C" shows it in use.

#if canImport(ObjectiveC)
    import Foundation
    import HTTPDNSCore
    import HTTPDNSLookup

    /// HTTPDNS for Objective-C (`HDNSService`): make one per app and keep it.
    ///
    /// ```objc
    /// NSError *error = nil;
    /// HDNSService *httpdns = [[HDNSService alloc] initWithResolvers:@[@"doh:https://223.5.5.5/dns-query"]
    ///                                                          only:@[@"*.example.com"] error:&error];
    /// ```
    @objc(HDNSService)
    public final class HTTPDNSObjectiveC: NSObject, Sendable {
        /// The Swift front door this facade calls, for mixed code.
        public let httpdns: HTTPDNS

        /// Makes the front door from resolver specs and the names to resolve through them, as
        /// `HTTPDNS(resolvers:only:)`. Objective-C: `initWithResolvers:only:error:`.
        ///
        /// - Parameters:
        ///   - resolvers: The resolvers, in the CLI's forms (`doh:URL`, `dns:IP[:PORT]`, `system`, …).
        ///   - only: The names to resolve through them (`example.com`, `*.example.com`, `*`).
        /// - Throws: `HTTPDNSConfigurationError` naming a bad entry, as `HTTPDNS(resolvers:only:)` does.
        @objc public init(resolvers: [String], only: [String]) throws {
            self.httpdns = try HTTPDNS(resolvers: resolvers, only: only)
        }

        /// Wraps a front door made in Swift.
        ///
        /// - Parameter httpdns: The front door this facade calls.
        public init(_ httpdns: HTTPDNS) {
            self.httpdns = httpdns
        }

        /// Resolves `host` and calls `completion` with its addresses (IPv4 first) or the error, on no
        /// particular thread. Objective-C: `resolveHost:completion:`.
        ///
        /// - Parameters:
        ///   - host: The name to resolve.
        ///   - completion: Called once, with the addresses as text and nil, or nil and the `ResolverError`.
        @objc(resolveHost:completion:)
        public func resolve(_ host: String, completion: @escaping @Sendable ([String]?, (any Error)?) -> Void) {
            let resolver = httpdns.resolver
            Task {
                do {
                    let resolution = try await resolver.resolve(host)
                    completion((resolution.ipv4 + resolution.ipv6).map(\.description), nil)
                } catch {
                    completion(nil, error)
                }
            }
        }

        /// `host`'s addresses from the cache at once, or nil while a lookup starts in the background
        /// (call again later), as `resolveCachedOrStart(_:)`. Objective-C: `cachedAddressesForHost:`.
        ///
        /// - Parameter host: The name to look up.
        /// - Returns: The cached addresses as text (IPv4 first), or nil when none are cached.
        @objc(cachedAddressesForHost:)
        public func cachedAddresses(forHost host: String) -> [String]? {
            httpdns.resolver.resolveCachedOrStart(host).map { ($0.ipv4 + $0.ipv6).map(\.description) }
        }

        /// Sends the requests the policy selects of sessions made from `configuration` through HTTPDNS
        /// (the URLProtocol route). Objective-C: `enableOnConfiguration:`.
        ///
        /// - Parameter configuration: The configuration to enable HTTPDNS on, changed in place.
        @objc(enableOnConfiguration:)
        public func enable(on configuration: URLSessionConfiguration) {
            httpdns.enable(on: configuration)
        }

        /// Resolves `host` through HTTPDNS and through LocalDNS, compares them and calls `completion`
        /// with the verdict (`clean`, `hijacked`, `blocked`, …, as `HijackVerdict`'s raw values) and both
        /// answers. Objective-C: `hijackReportForHost:completion:`.
        ///
        /// - Parameters:
        ///   - host: The name to check.
        ///   - completion: Called once, with the report.
        @objc(hijackReportForHost:completion:)
        public func hijackReport(
            forHost host: String,
            completion: @escaping @Sendable (HTTPDNSHijackReportObjectiveC) -> Void
        ) {
            let resolver = httpdns.resolver
            Task { completion(HTTPDNSHijackReportObjectiveC(await resolver.compare(host))) }
        }

        /// Points the system's resolution for the whole process at `url`, a DoH server reached at
        /// `serverAddresses`, health-checked (`HTTPDNS.enableSystemEncryptedDNS(_:)`). Objective-C:
        /// `enableSystemEncryptedDNSWithURL:serverAddresses:error:`.
        ///
        /// - Parameters:
        ///   - url: The DoH server (`https://…/dns-query`).
        ///   - serverAddresses: The server's addresses, as IP literals; empty for the configuration's bootstrap
        ///     entry for its host, or the host itself when it is an address.
        /// - Throws: `HTTPDNSConfigurationError`: `.invalidResolverSpec` when the URL is not https or there is no
        ///   address to reach the server by.
        @objc(enableSystemEncryptedDNSWithURL:serverAddresses:error:)
        public func enableSystemEncryptedDNS(url: URL, serverAddresses: [String]) throws {
            try httpdns.enableSystemEncryptedDNS(EncryptedDNSSettings(url: url, serverAddresses: serverAddresses))
        }

        /// Saves the cache, closes connections, stops the proxy, then calls `completion`.
        /// Objective-C: `shutdownWithCompletion:`.
        ///
        /// - Parameter completion: Called once, when the shutdown is done.
        @objc(shutdownWithCompletion:)
        public func shutdown(completion: @escaping @Sendable () -> Void) {
            let httpdns = httpdns
            Task {
                await httpdns.shutdown()
                completion()
            }
        }
    }

    /// A hijack check's result for Objective-C (`HDNSHijackReport`).
    @objc(HDNSHijackReport)
    public final class HTTPDNSHijackReportObjectiveC: NSObject, Sendable {
        /// The name checked.
        @objc public let host: String
        /// The verdict, as `HijackVerdict`'s raw value (`clean`, `hijacked`, `blocked`, …).
        @objc public let verdict: String
        /// Whether the verdict is a hijack (`hijacked` or `blocked`).
        @objc public let hijacked: Bool
        /// HTTPDNS's addresses (empty when it failed).
        @objc public let httpdnsAddresses: [String]
        /// LocalDNS's addresses (empty when it failed).
        @objc public let localDNSAddresses: [String]

        init(_ report: HijackReport) {
            func addresses(_ result: Result<Resolution, ResolverError>) -> [String] {
                guard case .success(let resolution) = result else { return [] }
                return (resolution.ipv4 + resolution.ipv6).map(\.description)
            }
            host = report.name
            verdict = report.verdict.rawValue
            hijacked = report.hijacked
            httpdnsAddresses = addresses(report.httpdns)
            localDNSAddresses = addresses(report.localDNS)
        }
    }
#endif
