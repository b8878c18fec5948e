import HTTPDNSCore
import NIOCore

/// One upstream that answers "what are the addresses of this name": an HTTPDNS service, a DoH server,
/// a classic DNS server, or the system resolver.
///
/// A provider throws `ProviderError` when it could not get an answer (the resolver then tries the next
/// one) and returns an empty `FamilyAnswer` for "no such address" (NXDOMAIN or NODATA).
/// Implementations must be thread-safe.
package protocol DNSProvider: Sendable {
    /// How the provider is named in output and logs (never carries secrets).
    var name: String { get }
    /// How many names one request may carry (1: no batching).
    var maximumBatch: Int { get }
    /// Resolves one family of one name before `deadline`.
    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer
    /// The device moved to another network: forget what was learnt about the service on the old one
    /// (its clock's offset). The default does nothing.
    func networkChanged()
    /// Resolves several names at once, for the families `query` asks: a provider whose API takes both
    /// in one request (DNSPod's `type=addrs`, Alibaba's `4,6`) asks once. Answers are keyed by the
    /// normalized name; a name left out got no answer. The default asks for each name and family
    /// concurrently.
    func resolveBatch(_ names: [String], query: AddressQuery, deadline: NIODeadline) async throws -> [String:
        HostAnswer]
    /// Whether the provider answers HTTPS records (DoH, JSON DoH, classic DNS; not the vendors' APIs).
    var answersServiceBindings: Bool { get }
    /// The HTTPS records (RFC 9460) of `name`, before `deadline`. The default throws: the provider's API
    /// has no such query.
    func serviceBindings(_ name: String, deadline: NIODeadline) async throws -> ServiceBindingAnswer
    /// Opens the connection the first query will use, ahead of it. The default does nothing (a
    /// provider with no connection to keep: UDP, the system resolver). Throws the connect's error.
    func warmUp() async throws
}

extension DNSProvider {
    var maximumBatch: Int { 1 }

    var answersServiceBindings: Bool { false }

    func warmUp() async throws {}

    func serviceBindings(_ name: String, deadline: NIODeadline) async throws -> ServiceBindingAnswer {
        throw ProviderError("\(self.name) has no query for HTTPS records")
    }

    func networkChanged() {}

    func resolveBatch(_ names: [String], query: AddressQuery, deadline: NIODeadline) async throws -> [String:
        HostAnswer]
    {
        let families = AddressFamily.allCases.filter { $0 == .ipv4 ? query.wantsIPv4 : query.wantsIPv6 }
        return await withTaskGroup(of: (String, AddressFamily, FamilyAnswer?).self) { group in
            for name in names {
                for family in families {
                    group.addTask { (name, family, try? await self.resolve(name, family: family, deadline: deadline)) }
                }
            }
            var out: [String: HostAnswer] = [:]
            for await (name, family, answer) in group {
                guard let answer else { continue }
                if family == .ipv4 {
                    out[normalizeHostname(name), default: HostAnswer()].ipv4 = answer
                } else {
                    out[normalizeHostname(name), default: HostAnswer()].ipv6 = answer
                }
            }
            return out
        }
    }
}

/// A provider could not answer. The message says what went wrong with which server; `underlying`
/// keeps the lower-level error as a value (the engine's `HTTPEngineError`, a socket error), if any.
/// Equal when the messages are.
package struct ProviderError: Error, Hashable, Sendable, CustomStringConvertible {
    var message: String
    var underlying: (any Error)?
    /// The DNS response code, when the server did answer, with an error (REFUSED, SERVFAIL…): it is
    /// reachable and speaks DNS (the server's readiness counts that as an answer).
    package var rcode: DNSResponseCode?
    /// A vendor's refusal code (Alibaba's `{"code":"SignatureExpired"}`), when it sent one.
    var vendorCode: String?

    init(
        _ message: String,
        underlying: (any Error)? = nil,
        rcode: DNSResponseCode? = nil,
        vendorCode: String? = nil
    ) {
        self.message = message
        self.underlying = underlying
        self.rcode = rcode
        self.vendorCode = vendorCode
    }

    package static func == (l: ProviderError, r: ProviderError) -> Bool { l.message == r.message }
    package func hash(into hasher: inout Hasher) { hasher.combine(message) }
    package var description: String { message }
}

extension AddressFamily {
    var recordType: DNSRecordType { self == .ipv4 ? .a : .aaaa }
}
