// RFC 8484 DNS-over-HTTPS in wire format (GET or POST), with EDNS Client Subnet where asked, and HTTPS
// records (RFC 9460).

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOHTTP1

/// A provider that can put a client subnet into one query (ECS): the server passing its client's on.
package protocol SubnetQuerying: DNSProvider {
    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline, clientSubnet: ClientSubnet?)
        async throws -> FamilyAnswer
}

/// RFC 8484 DNS-over-HTTPS, wire format. GET `?dns=<base64url>` or POST `application/dns-message`.
/// The engine offers h2 and http/1.1 through ALPN, so h2-only servers (kresd doh2, bind9, unbound) and
/// HTTP/1.1 ones both work.
struct DoHProvider: SubnetQuerying {
    let client: EndpointClient
    let usePOST: Bool
    /// Sent as an EDNS Client Subnet option in every query (RFC 7871), when given.
    let clientSubnet: ClientSubnet?
    var name: String { client.name(usePOST ? "doh-post" : "doh") }

    init(client: EndpointClient, usePOST: Bool, clientSubnet: ClientSubnet? = nil) {
        self.client = client
        self.usePOST = usePOST
        self.clientSubnet = clientSubnet
    }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        try await resolve(name, family: family, deadline: deadline, clientSubnet: clientSubnet)
    }

    /// One query, with `clientSubnet` as its ECS option (the server passing its client's on).
    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline, clientSubnet: ClientSubnet?)
        async throws -> FamilyAnswer
    {
        let query = try DNSMessage.query(name: name, type: family.recordType, id: 0, clientSubnet: clientSubnet)
        return try interpretWireAnswer(try await exchange(query, deadline: deadline), name: name, family: family)
    }

    var answersServiceBindings: Bool { true }

    func serviceBindings(_ name: String, deadline: NIODeadline) async throws -> ServiceBindingAnswer {
        let query = try DNSMessage.query(name: name, type: .https, id: 0, clientSubnet: clientSubnet)
        return try interpretWireBindings(try await exchange(query, deadline: deadline), name: name)
    }

    /// Sends one wire-format query and returns the answer's bytes.
    private func exchange(_ query: [UInt8], deadline: NIODeadline) async throws -> [UInt8] {
        if usePOST {
            return try await client.send(
                method: .POST,
                [],
                accept: "application/dns-message",
                body: query,
                contentType: "application/dns-message",
                deadline: deadline
            )
        }
        return try await client.send([("dns", base64URL(query))], accept: "application/dns-message", deadline: deadline)
    }
}

/// Reads a wire-format answer to our query: NOERROR gives addresses (maybe none), NXDOMAIN none,
/// anything else is the server's failure.
func interpretWireAnswer(_ bytes: [UInt8], name: String, family: AddressFamily, expectedID: UInt16? = nil) throws
    -> FamilyAnswer
{
    let message = try checkedWireResponse(bytes, name: name, type: family.recordType, expectedID: expectedID)
    guard message.rcode == .noError else { return FamilyAnswer(addresses: [], ttl: message.negativeTTL) }
    let (addresses, ttl) = message.addresses(for: family.recordType)
    return FamilyAnswer(addresses: addresses, ttl: addresses.isEmpty ? message.negativeTTL : ttl)
}

/// Reads a wire-format answer to our query for `name`'s HTTPS records: NOERROR gives them (maybe
/// none), NXDOMAIN none, anything else is the server's failure.
func interpretWireBindings(_ bytes: [UInt8], name: String, expectedID: UInt16? = nil) throws -> ServiceBindingAnswer {
    let message = try checkedWireResponse(bytes, name: name, type: .https, expectedID: expectedID)
    var answer = message.rcode == .noError ? message.serviceBindings() : ServiceBindingAnswer(bindings: [], ttl: nil)
    if answer.bindings.isEmpty { answer.ttl = message.negativeTTL }
    return answer
}

/// The response to our query for `name` / `type`, checked: NOERROR or NXDOMAIN; throws `ProviderError`
/// for a malformed message, another question or id, or another rcode.
private func checkedWireResponse(_ bytes: [UInt8], name: String, type: DNSRecordType, expectedID: UInt16?) throws
    -> DNSMessage
{
    let message: DNSMessage
    do {
        message = try DNSMessage(parsing: bytes)
    } catch {
        throw ProviderError("\(error)")
    }
    guard message.isResponse else { throw ProviderError("sent a query, not a response") }
    if let expectedID, message.id != expectedID { throw ProviderError("answered with the wrong query id") }
    guard normalizeHostname(message.questionName) == normalizeHostname(name), message.questionType == type else {
        throw ProviderError("answered another question (\(message.questionName) \(message.questionType))")
    }
    switch message.rcode {
    case .noError, .nameError: return message
    default: throw ProviderError("answered \(message.rcode) for \(type)", rcode: message.rcode)
    }
}

func base64URL(_ bytes: [UInt8]) -> String {
    var s = Data(bytes).base64EncodedString()
    s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    while s.hasSuffix("=") { s.removeLast() }
    return s
}

extension DoHProvider {
    /// Opens the endpoint's connection ahead of the first query.
    func warmUp() async throws { try await client.warmUp() }
}
