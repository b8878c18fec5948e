// JSON DoH (the Google/Cloudflare `application/dns-json` API); answers parsed by JSONFormats (Core).

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOHTTP1

/// JSON DNS-over-HTTPS (`?name=&type=`, `application/dns-json`).
struct DoHJSONProvider: DNSProvider {
    let client: EndpointClient
    var name: String { client.name("doh-json") }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
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

    var answersServiceBindings: Bool { true }

    func serviceBindings(_ name: String, deadline: NIODeadline) async throws -> ServiceBindingAnswer {
        let body = try await client.send(
            [("name", name), ("type", "HTTPS")],
            accept: "application/dns-json",
            deadline: deadline
        )
        do {
            return try DoHJSONFormat.parseServiceBindings(body, name: name)
        } catch let error as AnswerFormatError {
            throw ProviderError("\(error)")
        }
    }
}

extension DoHJSONProvider {
    /// Opens the endpoint's connection ahead of the first query.
    func warmUp() async throws { try await client.warmUp() }
}
