// Routing a request: the path picks the endpoint, and `decide` says whether every name it needs is at
// hand (the hosts table, the resolver's cache) or which names need the upstream first. The listener
// answers at once on its event loop when it can (`answerAtHand`), else through `handle`.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The request handling, shared by every listener.
struct ServiceCore: Sendable {
    let hosts: NIOLockedValueBox<HTTPDNSService.Hosts>
    let resolver: HTTPDNSResolver?
    /// The upstream asked directly when a request has a client subnet (a `dns:` or `doh:` one).
    let subnetUpstream: (any SubnetQuerying)?
    let configuration: HTTPDNSService.Configuration
    let logger: Logger
    let readiness: ServiceReadiness
    /// The bound on names asked of the upstream at once.
    let upstreamLookups: UpstreamLookups<Question>

    /// Asks the upstream for the probe name once a second until it answers (any answer, NXDOMAIN
    /// included), which makes the server ready; a real lookup's answer does the same sooner.
    func probeUntilTheUpstreamAnswers(_ resolver: HTTPDNSResolver) async {
        while readiness.current == .waitingForUpstream, !Task.isCancelled {
            _ = await lookup(configuration.readinessProbeName)
            if readiness.current == .waitingForUpstream {
                logger.info("not ready: the upstream did not answer the readiness probe; asking again in 1 s")
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    struct BadRequest: Error {
        var reason: String
    }

    /// What we know about one name: NXDOMAIN, or per-family answers (an empty family is NODATA), or,
    /// asked for them, its HTTPS records (none is NODATA).
    enum Lookup {
        case nxdomain
        case failure
        case found(ipv4: FamilyAnswer, ipv6: FamilyAnswer)
        case records(ServiceBindingAnswer)
    }

    /// The hosts table's answer, if the name is in it.
    func hostsLookup(_ name: String) -> Lookup? {
        guard let ips = hosts.withLockedValue({ $0.table[name] }) else { return nil }
        return .found(
            ipv4: FamilyAnswer(addresses: ips.filter { !$0.isIPv6 }, ttl: configuration.ttl),
            ipv6: FamilyAnswer(addresses: ips.filter(\.isIPv6), ttl: configuration.ttl)
        )
    }

    /// The hosts data's HTTPS records for `name`, if the name is in it (with addresses or records).
    func hostsRecords(_ name: String) -> Lookup? {
        if let bindings = configuration.httpsRecords[name] {
            return .records(ServiceBindingAnswer(bindings: bindings, ttl: configuration.ttl))
        }
        guard hosts.withLockedValue({ $0.table[name] }) != nil else { return nil }
        return .records(ServiceBindingAnswer(bindings: [], ttl: nil))
    }

    /// One name asked for one client subnet, or for its HTTPS records (asked without a subnet): what
    /// `decide` collects and `handle` looks up.
    struct Question: Hashable {
        var name: String
        var subnet: ClientSubnet?
        var records = false
    }

    func lookup(_ question: Question) async -> Lookup {
        guard question.records else { return await lookup(question.name, subnet: question.subnet) }
        if let known = hostsRecords(question.name) { return known }
        guard let resolver else { return .nxdomain }
        do {
            let answer = try await resolver.serviceBindingAnswer(of: question.name)
            readiness.upstreamAnswered()
            return .records(answer)
        } catch {
            logger.debug(
                "upstream failed",
                metadata: ["name": "\(question.name)", "type": "HTTPS", "error": "\(error)"]
            )
            return .failure
        }
    }

    func lookup(_ name: String, subnet: ClientSubnet? = nil) async -> Lookup {
        if let known = hostsLookup(name) { return known }
        if let subnet, let upstream = subnetUpstream { return await lookup(name, subnet: subnet, at: upstream) }
        guard let resolver else { return .nxdomain }
        do {
            let r = try await resolver.resolve(name, .both)
            readiness.upstreamAnswered()
            return .found(
                ipv4: FamilyAnswer(addresses: r.ipv4, ttl: r.ttl),
                ipv6: FamilyAnswer(addresses: r.ipv6, ttl: r.ttl)
            )
        } catch let e as ResolverError where e.code == .noAddress {
            readiness.upstreamAnswered()
            return .nxdomain
        } catch {
            // An error code in a DNS answer (REFUSED, SERVFAIL) still shows the upstream is reachable.
            if let e = error as? ResolverError,
                e.failures.contains(where: { ($0.error as? ProviderError)?.rcode != nil })
            {
                readiness.upstreamAnswered()
            }
            // The client is told the upstream failed, not where it is or what it said: that goes to
            // the log, for the operator.
            logger.debug("upstream failed", metadata: ["name": "\(name)", "error": "\(error)"])
            return .failure
        }
    }

    /// Both families straight from the upstream with `subnet` as ECS, uncached (the answer is the
    /// subnet's). NXDOMAIN when neither family has an address and one said so.
    func lookup(_ name: String, subnet: ClientSubnet, at upstream: any SubnetQuerying) async -> Lookup {
        let deadline = NIODeadline.now() + .seconds(3)
        async let v4 = upstream.resolve(name, family: .ipv4, deadline: deadline, clientSubnet: subnet)
        async let v6 = upstream.resolve(name, family: .ipv6, deadline: deadline, clientSubnet: subnet)
        do {
            let (a, aaaa) = try await (v4, v6)
            readiness.upstreamAnswered()
            if a.addresses.isEmpty, aaaa.addresses.isEmpty { return .nxdomain }
            return .found(ipv4: a, ipv6: aaaa)
        } catch {
            logger.debug("upstream failed", metadata: ["name": "\(name)", "subnet": "\(subnet)", "error": "\(error)"])
            return .failure
        }
    }

    /// What is known without waiting for `question`: the hosts data, or the resolver's cache.
    func immediateLookup(_ question: Question) -> Lookup? {
        guard question.records else { return immediateLookup(question.name, subnet: question.subnet) }
        if let known = hostsRecords(question.name) { return known }
        guard let resolver else { return .nxdomain }
        return resolver.cachedServiceBindingAnswer(of: question.name).map(Lookup.records)
    }

    /// What is known without waiting: the hosts table, or the resolver's cache (positive answers). A
    /// question with a subnet for the upstream is never at hand.
    func immediateLookup(_ name: String, subnet: ClientSubnet? = nil) -> Lookup? {
        if let known = hostsLookup(name) { return known }
        if subnet != nil, subnetUpstream != nil { return nil }
        guard let resolver else { return .nxdomain }
        guard let r = resolver.cached(name, .both) else { return nil }
        return .found(
            ipv4: FamilyAnswer(addresses: r.ipv4, ttl: r.ttl),
            ipv6: FamilyAnswer(addresses: r.ipv6, ttl: r.ttl)
        )
    }

    /// What a request needs before it can be answered.
    enum Decision {
        /// The answer: every name it needed was at hand.
        case respond(ListenerResponse)
        /// These names need the upstream first, in the order the request named them.
        case lookUp([Question])
    }

    /// Routes `request` with the answers `known` has. A name it does not know is collected, not waited
    /// for, and the response built meanwhile (with a stand-in failure for that name) is dropped.
    func decide(_ request: ListenerRequest, known: (Question) -> Lookup?) -> Decision {
        var missing: [Question] = []
        let response: ListenerResponse
        do {
            func ask(_ question: Question) -> Lookup {
                if let answer = known(question) { return answer }
                if !missing.contains(question) { missing.append(question) }
                return .failure
            }
            response = try route(
                request,
                lookup: { name, subnet in ask(Question(name: name, subnet: subnet)) },
                records: { name in ask(Question(name: name, records: true)) }
            )
        } catch {
            response = ListenerResponse(status: .badRequest, text: "\(error)")
        }
        return missing.isEmpty ? .respond(response) : .lookUp(missing)
    }

    /// The answer when everything it needs is at hand (the hosts table, the resolver's cache), given on
    /// the connection's event loop without a task; nil when a name needs the upstream (`handle` then
    /// answers it).
    func answerAtHand(_ request: ListenerRequest) -> ListenerResponse? {
        guard case .respond(let response) = decide(request, known: immediateLookup)
        else { return nil }
        return response
    }

    /// Answers a request, asking the upstream for the names it needs (together), then deciding again
    /// with those answers at hand. Each round adds at least one name, so it ends within the number of
    /// names in the request.
    func handle(_ request: ListenerRequest) async -> ListenerResponse {
        var known: [Question: Lookup] = [:]
        while true {
            switch decide(request, known: { known[$0] ?? immediateLookup($0) }) {
            case .respond(let response):
                return response
            case .lookUp(let questions):
                let answers = await withTaskGroup(of: (Question, Lookup).self) { group in
                    for q in questions {
                        group.addTask {
                            (
                                q,
                                await upstreamLookups.run(q, orElse: .failure) {
                                    await lookup(q)
                                }
                            )
                        }
                    }
                    var answers: [(Question, Lookup)] = []
                    for await answer in group { answers.append(answer) }
                    return answers
                }
                for (name, answer) in answers { known[name] = answer }
            }
        }
    }

    /// `lookup` answers a name's addresses for a subnet; `records`, its HTTPS records (DoH only).
    func route(
        _ request: ListenerRequest,
        lookup: (String, ClientSubnet?) throws -> Lookup,
        records: (String) throws -> Lookup
    ) throws -> ListenerResponse {
        let (path, query) = split(request.uri)
        do {
            // The subnet the upstream is asked for: the request's plain `ip=`, else the configured one.
            // (DNSPod's AES and DES forms may carry `ip=` encrypted: `dnspodAuthenticated` reads it.)
            // (v2's `cip=` is read by `alibabaV2`: it may be inside `enc`.)
            let plainIP = path == AlibabaJSONFormat.v2Path || query["alg"] != nil ? nil : query["ip"]
            let subnet = try requestSubnet(request, ip: plainIP)
            func bound(_ name: String) throws -> Lookup { try lookup(name, subnet) }
            switch path {
            case "/healthz":
                return ListenerResponse(status: .ok, text: "ok")
            case "/readyz":
                return readiness.response
            case "/metrics" where configuration.metricsText != nil:
                try require(request, .GET)
                return ListenerResponse(
                    contentType: "text/plain; version=0.0.4; charset=utf-8",
                    body: Array(configuration.metricsText!().utf8)
                )
            case "/d":
                try require(request, .GET)
                if query["id"] != nil || query["token"] != nil || query["alg"] != nil {
                    return try dnspodAuthenticated(request, query, subnet: subnet, lookup)
                }
                if let refusal = refuseUnauthenticated("/d without id=") { return refusal }
                return try dnspod(query, names: query["dn"], clientAddress: request.remoteIP, bound)
            case "/resolve":
                try require(request, .GET)
                if let refusal = refuseUnauthenticated("/resolve") { return refusal }
                return try alibaba(query, bound, clientAddress: request.remoteIP)
            case "/dns-query":
                if let refusal = refuseUnauthenticated("/dns-query") { return refusal }
                return try doh(request, query, subnet: subnet, lookup, records: records)
            case AlibabaJSONFormat.v2Path:
                try require(request, .GET)
                return dated(try alibabaV2(request, query, subnet: subnet, lookup))
            case ServiceListFormat.tencentPath:
                try require(request, .GET)
                return dnspodServiceList(query)
            default:
                if let account = ServiceListFormat.alibabaAccount(path: path), account.utf8.count <= 64 {
                    try require(request, .GET)
                    return dated(alibabaServiceList(account: account, query))
                }
                if let (account, signed) = AlibabaJSONFormat.accountPath(path), account.utf8.count <= 64 {
                    try require(request, .GET)
                    return dated(try alibabaAccount(request, account: account, signed: signed, query, bound))
                }
                if let (account, signed) = AlibabaJSONFormat.accountBatchPath(path), account.utf8.count <= 64 {
                    try require(request, .GET)
                    return dated(
                        try alibabaAccount(request, account: account, signed: signed, batch: true, query, bound)
                    )
                }
                return ListenerResponse(
                    status: .notFound,
                    text:
                        "not found: use /d, /resolve, /ACCOUNT/d, /ACCOUNT/sign_d, /ACCOUNT/sign_resolve, /v2/d, /ACCOUNT/ss, /conf, /dns-query, /healthz or /readyz"
                )
            }
        } catch let e as BadRequest {
            return ListenerResponse(status: .badRequest, text: e.reason)
        } catch let e as MethodNotAllowed {
            return ListenerResponse(
                status: .methodNotAllowed,
                text: "\(e.method) is not allowed here",
                headers: ["allow": e.allowed]
            )
        }
    }

    /// `response` with the server's `Date`: the signed forms' clients correct their signing time from it
    /// (a device whose clock is off), as the vendor's SDKs do.
    func dated(_ response: ListenerResponse) -> ListenerResponse {
        var response = response
        response.headers.replaceOrAdd(name: "date", value: ServiceClock.httpDate(configuration.unixTime()))
        return response
    }

    /// The subnet for `ip` (an address, given the recommended /24 or /56), else the configured policy's.
    func requestSubnet(_ request: ListenerRequest, ip: String?) throws -> ClientSubnet? {
        if let ip, !ip.isEmpty {
            guard let address = IPAddress(ip), let subnet = try? ClientSubnet(address: address) else {
                throw BadRequest(reason: "ip=\(ip.prefix(64)) is not an IP address")
            }
            return subnet
        }
        switch configuration.clientSubnet {
        case .none: return nil
        case .fixed(let subnet): return subnet
        case .client: return request.remoteIP.flatMap { try? ClientSubnet(address: $0) }
        }
    }

    struct MethodNotAllowed: Error {
        var method: HTTPMethod
        var allowed: String
    }

    func require(_ request: ListenerRequest, _ method: HTTPMethod) throws {
        guard request.method == method || (method == .GET && request.method == .HEAD) else {
            throw MethodNotAllowed(method: request.method, allowed: "GET")
        }
    }

    /// The path and the query's parameters (decoded; the last of a repeated name wins). Works on the
    /// UTF-8 bytes: splitting by `Character` was an eighth of a DoH answer's instructions.
    func split(_ uri: String) -> (String, [String: String]) {
        let utf8 = uri.utf8
        guard let q = utf8.firstIndex(of: UInt8(ascii: "?")) else { return (uri, [:]) }
        var query: [String: String] = [:]
        var start = utf8.index(after: q)
        while start != utf8.endIndex {
            let end = utf8[start...].firstIndex(of: UInt8(ascii: "&")) ?? utf8.endIndex
            if start != end {
                let pair = utf8[start..<end]
                let key: Substring
                var value = ""
                if let equals = pair.firstIndex(of: UInt8(ascii: "=")) {
                    key = Substring(utf8[start..<equals])
                    let text = Substring(utf8[utf8.index(after: equals)..<end])
                    value = formDecoded(text, plusIsSpace: true) ?? String(text)
                } else {
                    key = Substring(pair)
                }
                query[formDecoded(key, plusIsSpace: false) ?? String(key)] = value
            }
            start = end == utf8.endIndex ? end : utf8.index(after: end)
        }
        return (String(Substring(utf8[..<q])), query)
    }

    func name(_ text: String?, parameter: String) throws -> String {
        guard let text, !text.isEmpty else { throw BadRequest(reason: "missing \(parameter)=NAME") }
        do {
            return try validatedHostname(text)
        } catch {
            throw BadRequest(reason: "\(parameter): \(error)")
        }
    }
}
