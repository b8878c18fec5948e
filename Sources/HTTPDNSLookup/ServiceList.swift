// The vendors' service-IP lists. Their SDKs start from a few bootstrap IPs, ask the
// vendor's scheduling endpoint for the account's current service addresses, send queries to those in
// order, move on when one fails, refresh the list now and then, keep it on disk, and fall back to the
// bootstrap IPs when nothing else answers. This file holds the two wire formats and the rules, as a
// value type the resolver feeds events to (ServiceAddresses, beside it, carries them out).
//
// Alibaba Cloud EMAS  `GET /ACCOUNT/ss?region=global&platform=…&sdk_version=…` on a bootstrap IP, always
//                     HTTPS in the iOS SDK (aliyun/alibabacloud-httpdns-ios-sdk
//                     `Scheduler/HttpdnsScheduleExecutor.m`: "https://203.107.1.1/100000/ss?region=global&
//                     platform=ios…"; since 2024-06 the service schedules by proximity and every SDK sends
//                     region=global). Answer (Android SDK `serverip/UpdateRegionServerResponse.java`):
//                     `{"service_ip":[…],"service_ipv6":[…],"service_ip_port":[…],"service_status":…}`,
//                     `"service_status":"disable"` switching the SDK off. Refreshed after 24 h (iOS
//                     `HttpdnsScheduleCenter.m` `asyncUpdateRegionConfigAfterAtLeast:(24 * 60 * 60)`,
//                     Android `config/ServerConfig.java`), at most every 30 s once every service IP has
//                     failed (iOS), 5 min after a failed fetch (C SDK `src/hdns_scheduler.c`).
// Tencent DNSPod      `GET /conf?id=ID&alg=aes|des` (or `?id=ID&token=TOKEN` over HTTPS) on a start IP;
//                     the body is encrypted like a `/d` answer, its text `log:1|domain:0|ip:A;B|ttl:60`:
//                     the service IPs `;`-separated, the minutes until the next fetch (1…1440, 60 when
//                     missing) (DNSPod/httpdns-sdk-android `core/ConfigFromServer.java`, -ios
//                     `MSDKDnsManager.m`). A failed fetch is tried again after 5 min; when every service
//                     IP has failed the SDK fetches again (iOS `switchDnsServer`).
// What we take from both: IPv4 and IPv6 lists, used in the order given, starting from the one that last
// answered; the bootstrap addresses after them as the last resort. Alibaba's per-address ports
// (`service_ip_port`, `service_ipv6_port`) are read as its Android SDK reads them, the only SDK that does
// (`config/ServerConfig.java` `getPort()`: port i goes with address i; `utils/CommonUtil.java`
// `getPort`: a missing or non-positive one means the scheme's default): port i belongs to address i, and
// an address without a valid port (1…65535) is reached on the endpoint's own port, which is the scheme's
// default for the vendor's endpoints. The iOS, C, Go and Node SDKs read only the addresses. The
// Tencent list has no ports.

import Foundation
import HTTPDNSCore

/// A service's current addresses as its scheduling endpoint gave them, with when to ask again.
package struct ServiceList: Hashable, Sendable, Codable {
    var ipv4: [IPAddress]
    var ipv6: [IPAddress]
    /// The scheduler switched the service off for this client (Alibaba's `"service_status":"disable"`):
    /// queries are not sent until a later list says otherwise.
    var disabled = false
    /// When it was fetched (wall clock, so a list loaded from disk ages across restarts).
    var fetched: Timestamp
    /// How long it is good for before the next fetch.
    var lifetime: Duration
    /// The port of each address that has its own (Alibaba's `service_ip_port`), by the address's text;
    /// the others are reached on the endpoint's port. Optional so lists saved before it still load.
    var ports: [String: Int]?

    /// Each address is kept once, at its first place (with the port it had there).
    package init(
        ipv4: [IPAddress],
        ipv6: [IPAddress],
        ports: [IPAddress: Int] = [:],
        disabled: Bool = false,
        fetched: Timestamp,
        lifetime: Duration
    ) {
        func unique(_ list: [IPAddress]) -> [IPAddress] {
            var seen: Set<IPAddress> = []
            return list.filter { seen.insert($0).inserted }
        }
        self.ipv4 = unique(ipv4)
        self.ipv6 = unique(ipv6)
        let valid = ports.filter { (1...65535).contains($0.value) }
        self.ports =
            valid.isEmpty ? nil : Dictionary(uniqueKeysWithValues: valid.map { ($0.key.description, $0.value) })
        self.disabled = disabled
        self.fetched = fetched
        self.lifetime = lifetime
    }

    var all: [IPAddress] { ipv4 + ipv6 }

    /// The port `address` is reached on, when the list gave it one.
    func port(of address: IPAddress) -> Int? { ports?[address.description] }

    /// At most this many addresses per family are kept from an answer (the vendors list a handful).
    static let maximumPerFamily = 16
}

/// The two vendors' scheduling formats.
package enum ServiceListFormat {
    /// Alibaba's lists live a day (the iOS and Android SDKs refresh after 24 h).
    static let alibabaLifetime: Duration = .seconds(24 * 3600)
    /// A list that switches the service off is asked again after 5 minutes: the iOS SDK's rule while it
    /// still read `service_status` (aliyun/alibabacloud-httpdns-ios-sdk before d832843, April 2024,
    /// `HttpdnsScheduleCenter.m`: off until the next list, fetched at most every
    /// `ABLE_TO_CONNECT_SCHEDULE_CENTER_INTERVAL`, 5 min), and the C SDK's cadence until a list is had
    /// (`hdns_scheduler.c`). Not Android's: it stays off for good once told (`HttpDnsConfig.java`, "永久禁用").
    static let alibabaDisabledLifetime: Duration = .seconds(300)
    /// Tencent's `ttl` is in minutes, 1…1440; 60 when absent or out of range.
    static let tencentDefaultMinutes = 60

    /// The Alibaba `/ACCOUNT/ss` path.
    static func alibabaPath(account: String) -> String { "/\(account)/ss" }

    /// The account of an `/ACCOUNT/ss` path.
    package static func alibabaAccount(path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].isEmpty, !parts[1].isEmpty, parts[2] == "ss" else { return nil }
        return String(parts[1])
    }
    /// The Tencent `/conf` path.
    package static let tencentPath = "/conf"

    /// Reads an Alibaba `ss` answer. Entries that are not IP literals of the right family are dropped;
    /// an answer with no address at all (and not switching the service off) is an error.
    static func parseAlibaba(_ bytes: [UInt8], now: Timestamp) throws -> ServiceList {
        struct Body: Decodable {
            var service_ip: [String]?
            var service_ipv6: [String]?
            var service_ip_port: [Int]?
            var service_ipv6_port: [Int]?
            var service_status: String?
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(bytes))
        } catch {
            throw AnswerFormatError("scheduling answer is not the expected {\"service_ip\",\"service_ipv6\"} object")
        }
        let ipv4 = addresses(body.service_ip, ports: body.service_ip_port, ipv6: false)
        let ipv6 = addresses(body.service_ipv6, ports: body.service_ipv6_port, ipv6: true)
        // The first port an address had, if it is listed twice (the list keeps its first place).
        var ports: [IPAddress: Int] = [:]
        for (address, port) in ipv4 + ipv6 where ports[address] == nil { ports[address] = port }
        let list = ServiceList(
            ipv4: ipv4.map(\.address),
            ipv6: ipv6.map(\.address),
            ports: ports,
            disabled: body.service_status == "disable",
            fetched: now,
            lifetime: body.service_status == "disable" ? alibabaDisabledLifetime : alibabaLifetime
        )
        guard list.disabled || !list.all.isEmpty else {
            throw AnswerFormatError("scheduling answer lists no service IP")
        }
        return list
    }

    /// An Alibaba `ss` answer for `list` (the server's side); `ports`, when given, as
    /// `service_ip_port` / `service_ipv6_port` in the addresses' order (0 for an address without one).
    package static func formatAlibaba(ipv4: [IPAddress], ipv6: [IPAddress], ports: [IPAddress: Int] = [:]) -> [UInt8] {
        let v4 = ipv4.map { "\"\($0)\"" }.joined(separator: ",")
        let v6 = ipv6.map { "\"\($0)\"" }.joined(separator: ",")
        var text = "{\"service_ip\":[\(v4)],\"service_ipv6\":[\(v6)]"
        if !ports.isEmpty {
            let v4Ports = ipv4.map { "\(ports[$0] ?? 0)" }.joined(separator: ",")
            let v6Ports = ipv6.map { "\(ports[$0] ?? 0)" }.joined(separator: ",")
            text += ",\"service_ip_port\":[\(v4Ports)],\"service_ipv6_port\":[\(v6Ports)]"
        }
        return Array((text + ",\"service_status\":\"enable\"}").utf8)
    }

    /// Reads a Tencent `/conf` text (already decrypted): `log:1|domain:0|ip:A;B|ttl:60`. Fields other
    /// than `ip` and `ttl` are ignored; an `ip` with no usable address is an error.
    static func parseTencent(_ text: String, now: Timestamp) throws -> ServiceList {
        var ips: [IPAddress] = []
        var minutes = tencentDefaultMinutes
        for field in text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|") {
            let kv = field.split(separator: ":", maxSplits: 1)
            guard kv.count == 2 else { continue }
            switch kv[0] {
            case "ip":
                ips = kv[1].split(separator: ";").prefix(2 * ServiceList.maximumPerFamily).compactMap {
                    IPAddress(String($0))
                }
            case "ttl":
                if let m = Int(kv[1]), (1...1440).contains(m) { minutes = m }
            default:
                continue
            }
        }
        let list = ServiceList(
            ipv4: Array(ips.filter { !$0.isIPv6 }.prefix(ServiceList.maximumPerFamily)),
            ipv6: Array(ips.filter(\.isIPv6).prefix(ServiceList.maximumPerFamily)),
            fetched: now,
            lifetime: .seconds(minutes * 60)
        )
        guard !list.all.isEmpty else { throw AnswerFormatError("configuration answer lists no service IP") }
        return list
    }

    /// A Tencent `/conf` text for `ips` (the server's side, before encryption).
    package static func formatTencent(_ ips: [IPAddress], minutes: Int) -> String {
        "log:0|domain:0|ip:\(ips.map(\.description).joined(separator: ";"))|ttl:\(minutes)"
    }

    /// The addresses of one family with their ports: the port at an address's index in the raw lists
    /// (paired before bad entries are dropped, as the Android SDK indexes them).
    private static func addresses(_ texts: [String]?, ports: [Int]?, ipv6: Bool) -> [(address: IPAddress, port: Int)] {
        let ports = ports ?? []
        let paired = (texts ?? []).enumerated().compactMap { i, text -> (address: IPAddress, port: Int)? in
            guard let address = IPAddress(text), address.isIPv6 == ipv6 else { return nil }
            return (address, i < ports.count ? ports[i] : 0)
        }
        return Array(paired.prefix(ServiceList.maximumPerFamily))
    }
}

/// The rules for one service's addresses: which to use in what order, and when to fetch the list.
///
/// Events: a fetch started, succeeded or failed; a query was answered from some address; a query got
/// no answer from any. The order is the list's, rotated to start at the address that answered last,
/// then the bootstrap addresses not in it. The list is fetched when there is none (at once, then every
/// `retryAfterFailure`), when it has outlived its lifetime, and when every address failed or only a
/// bootstrap address still answered (at most every `wrapInterval`). One fetch at a time.
struct ServiceAddressState: Hashable, Sendable {
    /// After a failed fetch, the next waits this long (the C and Tencent SDKs' 5 minutes).
    static let retryAfterFailure: Duration = .seconds(300)
    /// Once the whole list has failed, fetch again at most this often (the iOS SDK's 30 s).
    static let wrapInterval: Duration = .seconds(30)

    let bootstrap: [IPAddress]
    private(set) var list: ServiceList?
    /// The address that answered last (nil: the list's first).
    private(set) var preferred: IPAddress?
    private(set) var fetching = false
    /// No fetch before this (set after a failed one).
    private var notBefore: Timestamp?
    /// Every list address failed (or only bootstrap answered): fetch again, rate-limited.
    private var exhausted = false
    private var lastFetchStarted: Timestamp?

    init(bootstrap: [IPAddress], saved: ServiceList? = nil) {
        self.bootstrap = bootstrap
        self.list = saved
    }

    /// Where to send the next query, in order.
    var addresses: [IPAddress] {
        var order: [IPAddress] = []
        if let list, !list.disabled {
            for family in [list.ipv4, list.ipv6] {
                let start = preferred.flatMap { family.firstIndex(of: $0) } ?? 0
                order += family[start...] + family[..<start]
            }
        }
        // Once each (a list read from disk was never checked for repeats), the bootstrap ones last.
        var seen: Set<IPAddress> = []
        return (order + bootstrap).filter { seen.insert($0).inserted }
    }

    /// The port the list gives `address` (nil: the endpoint's own; always for bootstrap addresses).
    func port(of address: IPAddress) -> Int? {
        guard let list, !list.disabled, list.all.contains(address) else { return nil }
        return list.port(of: address)
    }

    /// True when the scheduler switched the service off.
    var disabled: Bool { list?.disabled == true }

    /// Whether a fetch should start now.
    func fetchDue(now: Timestamp) -> Bool {
        guard !fetching else { return false }
        if let notBefore, now < notBefore { return false }
        guard let list else { return true }
        if now >= list.fetched + list.lifetime || now < list.fetched { return true }
        if exhausted {
            return lastFetchStarted.map { now - $0 >= Self.wrapInterval || now < $0 } ?? true
        }
        return false
    }

    mutating func fetchStarted(now: Timestamp) {
        fetching = true
        lastFetchStarted = now
    }

    /// A new list: used from its first address.
    mutating func fetched(_ new: ServiceList) {
        fetching = false
        notBefore = nil
        exhausted = false
        if new.all != list?.all { preferred = nil }
        list = new
    }

    mutating func fetchFailed(now: Timestamp) {
        fetching = false
        notBefore = now + Self.retryAfterFailure
    }

    /// A query was answered from `address`: start there next time. An answer from a bootstrap address
    /// outside the list means every listed one failed.
    mutating func answered(from address: IPAddress) {
        guard let list, !list.disabled else { return }
        if list.all.contains(address) {
            preferred = address
            exhausted = false
        } else if bootstrap.contains(address) {
            exhausted = true
        }
    }

    /// A query reached no address at all.
    mutating func unreachable() {
        exhausted = true
    }
}

/// Turns on the vendors' service-IP lists for the resolvers that have one: Alibaba Cloud EMAS account
/// endpoints (`/ACCOUNT/d`, `/v2/d?id=`) and Tencent DNSPod endpoints with credentials. The endpoint's
/// own address (or its bootstrap addresses) is where the list is asked for and the last resort; queries
/// go to the listed addresses, on the port the list gives an address (Alibaba's `service_ip_port`) or
/// else the endpoint's, with the endpoint's name for TLS and Host.
/// Off by default: a self-hosted endpoint may have no scheduling API, and asking it costs a request.
public struct ServiceListSettings: Hashable, Sendable {
    /// Sent as Alibaba's `region=`. `global` (the default) lets the service choose by proximity, which is
    /// what the vendor's SDKs send since 2024; `cn`, `hk`, `sg`, `de`, `us` name a region.
    public var region: String

    /// Lists with Alibaba's `region` set to `region`.
    ///
    /// - Parameter region: Sent as Alibaba's `region=`: `global` (the default) or a region such as `cn`.
    public init(region: String = "global") {
        self.region = region
    }
}
