// A resolver the app brings itself, next to the built-in ones (`ResolverSpec`). The app implements one
// call; everything around it is the resolver's, as for a built-in provider: answer validation, the
// cache and its persistence, coalescing, failover in health order, the fallback to LocalDNS, hijack
// reports, spans and metrics.

import HTTPDNSCore
import NIOCore
import NIOPosix

/// A resolver of the app's own: a company's name service, an SDK the app already ships, a test double.
///
/// Give it to `HTTPDNS.Configuration.providers`. It is asked like the built-in resolvers, after them in
/// order of preference, and its answers are checked like theirs (unspecified, private or loopback
/// addresses are dropped unless the policy allows them).
public protocol HTTPDNSProvider: Sendable {
    /// How the provider is named in `Resolution.source`, metrics and logs. Never put a secret in it.
    var name: String { get }

    /// The addresses of `name` in `family` (A records for `.ipv4`, AAAA for `.ipv6`), before
    /// `deadline`.
    ///
    /// `name` is in normal form: lower case, no trailing dot. Return an empty answer when the name has
    /// no address of that family; throw when the provider could not answer (the next provider is asked,
    /// and the error is kept in the resolver's error). A provider that is not done by `deadline` is no
    /// longer waited for.
    ///
    /// - Parameters:
    ///   - name: The name to resolve, in normal form.
    ///   - family: The address family asked: A records for `.ipv4`, AAAA for `.ipv6`.
    ///   - deadline: When the resolver stops waiting for the answer.
    /// - Returns: The addresses found, empty when the name has none of that family, and how long to keep them.
    /// - Throws: Any error, when the provider could not answer: the next provider is asked, and the error is
    ///   kept in the `ResolverError`'s `failures`.
    func resolve(_ name: String, family: AddressFamily, deadline: ContinuousClock.Instant) async throws
        -> HTTPDNSProviderAnswer
}

/// What an ``HTTPDNSProvider`` found for one name and family.
public struct HTTPDNSProviderAnswer: Sendable, Hashable {
    /// The addresses, in the provider's order of preference.
    public var addresses: [IPAddress]
    /// How long the answer may be kept; nil: the cache's `minTTL`. Clamped to the cache's bounds.
    public var ttl: Duration?

    /// An answer of `addresses`, to keep for `ttl`.
    ///
    /// - Parameters:
    ///   - addresses: The addresses, in the provider's order of preference.
    ///   - ttl: How long the answer may be kept; nil for the cache's `minTTL`.
    public init(addresses: [IPAddress], ttl: Duration? = nil) {
        self.addresses = addresses
        self.ttl = ttl
    }
}

/// An app's provider as the resolver asks every provider. The resolver relies on every provider ending
/// by its deadline (that is how a whole lookup stays within the resolver's timeout), and an app's may
/// not: its call runs in a Task of its own, which is cancelled and no longer waited for at the deadline.
struct AppProvider: DNSProvider {
    let provider: any HTTPDNSProvider

    var name: String { provider.name }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = eventLoop.makePromise(of: FamilyAnswer.self)
        let until = ContinuousClock.now + max(Duration(deadline - .now()), .zero)
        let provider = self.provider
        let call = Task {
            do {
                let answer = try await provider.resolve(name, family: family, deadline: until)
                promise.succeed(Self.familyAnswer(answer))
            } catch {
                promise.fail(error)
            }
        }
        // A late answer finds the promise completed and is dropped.
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            promise.fail(ProviderError("no answer before the timeout"))
            call.cancel()
        }
        defer { timeout.cancel() }
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            call.cancel()
        }
    }

    static func familyAnswer(_ answer: HTTPDNSProviderAnswer) -> FamilyAnswer {
        let seconds = answer.ttl.map { ttl -> UInt32 in
            let whole = ttl.components.seconds
            return whole <= 0 ? 0 : UInt32(clamping: whole)
        }
        return FamilyAnswer(addresses: answer.addresses, ttl: seconds)
    }
}
