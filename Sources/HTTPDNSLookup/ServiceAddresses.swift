// One endpoint's service addresses: ServiceAddressState's rules under a lock, for the
// EndpointClient that sends to them and the resolver that fetches the list. The formats and the
// vendor sources are in ServiceList.swift, beside this file.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The addresses an endpoint's queries go to, and whether its list is due for a fetch.
final class ServiceAddresses: Sendable {
    private let state: NIOLockedValueBox<ServiceAddressState>

    /// `bootstrap`: the endpoint's own addresses (its IP literal, or its bootstrap IPs).
    init(bootstrap: [IPAddress]) {
        state = NIOLockedValueBox(ServiceAddressState(bootstrap: bootstrap))
    }

    /// The rules' state now (tests and diagnostics).
    var snapshot: ServiceAddressState { state.withLockedValue { $0 } }

    /// A list loaded from disk, used until a fetch gives a newer one.
    func restore(_ list: ServiceList) {
        state.withLockedValue { $0.fetched(list) }
    }

    /// Where to send the next request, in order: runs of addresses on one port, each tried as one
    /// connect race (`defaultPort`, the endpoint's, for an address the list gives no port). Without
    /// per-address ports that is one run.
    func attempts(defaultPort: Int) -> [(port: Int, addresses: ResolvedAddresses)] {
        let ordered = state.withLockedValue { state in state.addresses.map { ($0, state.port(of: $0) ?? defaultPort) } }
        var runs: [(port: Int, addresses: [IPAddress])] = []
        for (address, port) in ordered {
            if runs.last?.port == port {
                runs[runs.count - 1].addresses.append(address)
            } else {
                runs.append((port, [address]))
            }
        }
        return runs.map { run in
            var addresses = ResolvedAddresses(
                ipv4: run.addresses.filter { !$0.isIPv6 },
                ipv6: run.addresses.filter(\.isIPv6),
                source: .serviceList
            )
            addresses.ordered = true
            return (run.port, addresses)
        }
    }

    var disabled: Bool { state.withLockedValue { $0.disabled } }

    func answered(from ip: String?) {
        guard let ip = ip.flatMap(IPAddress.init) else { return }
        state.withLockedValue { $0.answered(from: ip) }
    }

    func unreachable() { state.withLockedValue { $0.unreachable() } }

    /// True when a fetch should start now; it is then counted as started, and the caller must report
    /// its end with `finished(_:now:)`.
    func beginFetchIfDue(now: Timestamp, force: Bool = false) -> Bool {
        state.withLockedValue { state in
            guard !state.fetching, force || state.fetchDue(now: now) else { return false }
            state.fetchStarted(now: now)
            return true
        }
    }

    func finished(_ result: Result<ServiceList, any Error>, now: Timestamp) {
        state.withLockedValue { state in
            switch result {
            case .success(let list): state.fetched(list)
            case .failure: state.fetchFailed(now: now)
            }
        }
    }
}

/// A provider whose service publishes its addresses (Alibaba's `ss`, Tencent's `/conf`).
protocol ServiceListProvider: DNSProvider {
    /// The endpoint's routes; nil when this provider has no list (no account, or lists are off).
    var routes: ServiceAddresses? { get }
    /// Asks the scheduling endpoint for the current list.
    func fetchServiceList(deadline: NIODeadline, now: Timestamp) async throws -> ServiceList
}

extension DNSPodProvider: ServiceListProvider {
    var routes: ServiceAddresses? { auth == nil ? nil : client.routes }

    /// `GET /conf?id=ID&alg=aes|des` (the answer encrypted like `/d`'s) or `?id=ID&token=TOKEN`.
    func fetchServiceList(deadline: NIODeadline, now: Timestamp) async throws -> ServiceList {
        guard let auth else { throw ProviderError("has no account to ask for its service list") }
        var parameters = [("id", auth.id)]
        switch auth {
        case .aes: parameters.append(("alg", "aes"))
        case .des: parameters.append(("alg", "des"))
        case .token(_, let token): parameters.append(("token", token.text))
        }
        let body = try await client.send(
            parameters,
            accept: "text/plain",
            deadline: deadline,
            path: ServiceListFormat.tencentPath,
            redacting: auth.token
        )
        do {
            return try ServiceListFormat.parseTencent(try text(of: body), now: now)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }
}

extension AlibabaJSONProvider: ServiceListProvider {
    var routes: ServiceAddresses? { account == nil ? nil : client.routes }

    /// The account, for `/ACCOUNT/d`, `/ACCOUNT/sign_d` and `/v2/d?id=ACCOUNT` endpoints.
    var account: String? {
        if case .v2(let account, _, _) = form { return account.isEmpty ? nil : account }
        return AlibabaJSONFormat.accountPath(client.endpoint.path)?.account
    }

    /// `GET /ACCOUNT/ss?region=R&platform=P&sdk_version=V`, as the vendor's SDKs ask.
    func fetchServiceList(deadline: NIODeadline, now: Timestamp) async throws -> ServiceList {
        guard let account else { throw ProviderError("has no account to ask for its service list") }
        let body = try await client.send(
            [("region", client.region), ("platform", Self.platform), ("sdk_version", Self.sdkVersion)],
            accept: "application/json",
            deadline: deadline,
            path: ServiceListFormat.alibabaPath(account: account),
            refusalCode: { AlibabaJSONFormat.errorCode($0) }
        )
        do {
            return try ServiceListFormat.parseAlibaba(body, now: now)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }

    static let sdkVersion = "swift-httpdns-0.1"
    #if os(iOS)
        static let platform = "ios"
    #elseif os(macOS)
        static let platform = "macos"
    #else
        static let platform = "linux"
    #endif
}

/// The lists saved beside the cache file (`PATH.servers`), by provider name: the same atomic write as
/// the cache, and the same bounded, validated read (a bad file is ignored with a warning).
package enum ServiceListPersistence {
    struct File: Codable {
        var version = 1
        var lists: [String: ServiceList]
    }

    static let maxFileBytes = 256 * 1024

    package static func path(besideCache cache: String) -> String { cache + ".servers" }

    static func load(path: String, logger: Logger) -> [String: ServiceList] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [:] }
        defer { try? handle.close() }
        do {
            let bytes = try handle.read(upToCount: maxFileBytes + 1) ?? Data()
            guard bytes.count <= maxFileBytes else { throw AnswerFormatError("larger than \(maxFileBytes) bytes") }
            let file = try JSONDecoder().decode(File.self, from: bytes)
            guard file.version == 1 else { throw AnswerFormatError("version \(file.version), not 1") }
            return file.lists.filter { !$0.value.all.isEmpty || $0.value.disabled }
        } catch {
            logger.warning("ignoring service list file", metadata: ["path": "\(path)", "reason": "\(error)"])
            return [:]
        }
    }

    package static func save(_ lists: [String: ServiceList], path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try CachePersistence.writeAtomically(Array(try encoder.encode(File(lists: lists))), to: path)
    }
}
