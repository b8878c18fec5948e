// The providers that speak HTTP: RFC 8484 DoH (wire format, GET or POST), JSON DoH, the DNSPod text API
// and the Alibaba-style JSON API. All go through the project's one HTTP engine, to the endpoint's IP (or
// its bootstrap IP), with the endpoint's hostname as SNI and Host.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOHTTP1

/// Where and how to reach one HTTP resolver endpoint.
struct EndpointClient: Sendable {
    let engine: HTTPEngine
    let endpoint: ResolverEndpoint
    /// Nil for an IP-literal endpoint (the engine connects to the literal).
    let addresses: ResolvedAddresses?

    /// `bootstrap` gives the IPs of an endpoint named by hostname: a resolver must be reachable without
    /// DNS, so a hostname without a bootstrap entry is a configuration error.
    init(engine: HTTPEngine, endpoint: ResolverEndpoint, bootstrap: [String: [IPAddress]]) throws {
        self.engine = engine
        self.endpoint = endpoint
        if IPAddress(endpoint.host) != nil {
            addresses = nil
        } else if let mapped = bootstrap[normalizeHostname(endpoint.host)], !mapped.isEmpty {
            addresses = ResolvedAddresses(
                ipv4: mapped.filter { !$0.isIPv6 },
                ipv6: mapped.filter(\.isIPv6),
                source: "bootstrap"
            )
        } else {
            throw HTTPDNSConfigurationError(
                .invalidResolverSpec,
                "resolver host \(endpoint.host) has no bootstrap address (a resolver must be reachable without DNS)"
            )
        }
    }

    /// `KIND:scheme://host:port/path`: the query string is left out, it may carry an account token.
    func name(_ kind: String) -> String {
        "\(kind):\(endpoint.scheme)://\(endpoint.host):\(endpoint.port)\(endpoint.path)"
    }

    func send(
        method: HTTPMethod = .GET,
        _ parameters: [(String, String)],
        accept: String,
        body: [UInt8]? = nil,
        contentType: String? = nil,
        deadline: NIODeadline,
        maxBytes: Int = 64 * 1024
    ) async throws -> [UInt8] {
        var headers = HTTPHeaders([("accept", accept)])
        if let contentType { headers.add(name: "content-type", value: contentType) }
        var request = HTTPRequest(
            method: method,
            url: HTTPURL(
                scheme: endpoint.scheme,
                host: endpoint.host,
                port: endpoint.port,
                target: endpoint.target(adding: parameters)
            ),
            headers: headers,
            body: body.map { .bytes($0) }
        )
        let remaining = deadline - .now()
        guard remaining > .zero else { throw ProviderError("no time left for the query") }
        request.timeout = .nanoseconds(remaining.nanoseconds)
        do {
            let response = try await engine.execute(request, addresses: addresses)
            let body = try await response.body.collect(upTo: maxBytes)
            guard response.status == .ok else {
                let snippet = String(buffer: body).prefix(120).split(separator: "\n").first ?? ""
                throw ProviderError("answered HTTP \(response.status.code) \(snippet)")
            }
            return Array(body.readableBytesView)
        } catch let error as HTTPEngineError {
            throw ProviderError(error.description, underlying: error)
        }
    }
}

/// RFC 8484 DNS-over-HTTPS, wire format. GET `?dns=<base64url>` or POST `application/dns-message`.
/// The engine offers h2 and http/1.1 through ALPN, so h2-only servers (kresd doh2, bind9, unbound) and
/// HTTP/1.1 ones both work.
package struct DoHProvider: DNSProvider {
    let client: EndpointClient
    let usePOST: Bool
    package var name: String { client.name(usePOST ? "doh-post" : "doh") }

    init(client: EndpointClient, usePOST: Bool) {
        self.client = client
        self.usePOST = usePOST
    }

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let query = try DNSMessage.query(name: name, type: family.recordType, id: 0)
        let body: [UInt8]
        if usePOST {
            body = try await client.send(
                method: .POST,
                [],
                accept: "application/dns-message",
                body: query,
                contentType: "application/dns-message",
                deadline: deadline
            )
        } else {
            body = try await client.send(
                [("dns", base64URL(query))],
                accept: "application/dns-message",
                deadline: deadline
            )
        }
        return try interpretWireAnswer(body, name: name, family: family)
    }
}

/// Reads a wire-format answer to our query: NOERROR gives addresses (maybe none), NXDOMAIN none,
/// anything else is the server's failure.
func interpretWireAnswer(_ bytes: [UInt8], name: String, family: AddressFamily, expectedID: UInt16? = nil) throws
    -> FamilyAnswer
{
    let message: DNSMessage
    do {
        message = try DNSMessage(parsing: bytes)
    } catch {
        throw ProviderError("\(error)")
    }
    guard message.isResponse else { throw ProviderError("sent a query, not a response") }
    if let expectedID, message.id != expectedID { throw ProviderError("answered with the wrong query id") }
    guard normalizeHostname(message.questionName) == normalizeHostname(name), message.questionType == family.recordType
    else {
        throw ProviderError("answered another question (\(message.questionName) \(message.questionType))")
    }
    switch message.rcode {
    case .noError:
        let (addresses, ttl) = message.addresses(for: family.recordType)
        return FamilyAnswer(addresses: addresses, ttl: addresses.isEmpty ? message.negativeTTL : ttl)
    case .nameError:
        return FamilyAnswer(addresses: [], ttl: message.negativeTTL)
    default:
        throw ProviderError("answered \(message.rcode) for \(name) \(family.recordType)")
    }
}

func base64URL(_ bytes: [UInt8]) -> String {
    var s = Data(bytes).base64EncodedString()
    s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    while s.hasSuffix("=") { s.removeLast() }
    return s
}

/// JSON DNS-over-HTTPS (`?name=&type=`, `application/dns-json`).
package struct DoHJSONProvider: DNSProvider {
    let client: EndpointClient
    package var name: String { client.name("doh-json") }

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let body = try await client.send(
            [("name", name), ("type", family.recordType.description)],
            accept: "application/dns-json",
            deadline: deadline
        )
        do {
            return try DoHJSONFormat.parse(body, name: name, type: family.recordType)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }
}

/// The DNSPod / Tencent D+ text API: `/d?dn=NAME[,NAME…]&ttl=1[&type=aaaa]`. Batches up to 20 names.
package struct DNSPodProvider: DNSProvider {
    let client: EndpointClient
    package var name: String { client.name("dnspod") }
    package var maximumBatch: Int { 20 }

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let answers = try await resolveBatch([name], family: family, deadline: deadline)
        guard let answer = answers[normalizeHostname(name)] else {
            throw ProviderError("gave no line for \(name)")
        }
        return answer
    }

    package func resolveBatch(_ names: [String], family: AddressFamily, deadline: NIODeadline) async throws -> [String:
        FamilyAnswer]
    {
        let query: AddressQuery = family == .ipv4 ? .ipv4 : .ipv6
        var parameters = [("dn", names.joined(separator: ",")), ("ttl", "1")]
        if let type = DNSPodFormat.typeParameter(for: query) { parameters.append(("type", type)) }
        let body = try await client.send(parameters, accept: "text/plain", deadline: deadline, maxBytes: 256 * 1024)
        let parsed: [String: HostAnswer]
        do {
            parsed = try DNSPodFormat.parse(String(decoding: body, as: UTF8.self), names: names, query: query)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
        return parsed.compactMapValues { family == .ipv4 ? $0.ipv4 : $0.ipv6 }
    }
}

/// The Alibaba-style JSON API: `/resolve?host=NAME&query=4|6`.
package struct AlibabaJSONProvider: DNSProvider {
    let client: EndpointClient
    package var name: String { client.name("json") }

    package func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        let query: AddressQuery = family == .ipv4 ? .ipv4 : .ipv6
        let body = try await client.send(
            [("host", name), ("query", AlibabaJSONFormat.queryParameter(for: query))],
            accept: "application/json",
            deadline: deadline
        )
        do {
            let answer = try AlibabaJSONFormat.parse(body, query: query, host: name)
            return (family == .ipv4 ? answer.ipv4 : answer.ipv6) ?? .empty
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }
}
