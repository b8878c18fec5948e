// How a provider that speaks HTTP reaches its endpoint: through the one HTTP engine, to the endpoint's IP
// (or its bootstrap IP, or the service's published addresses), with the endpoint's hostname as SNI and
// Host; the errors that make the next route worth trying.

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
    /// The service's published addresses, used before `addresses` (see ServiceAddresses); nil when
    /// service lists are off.
    let routes: ServiceAddresses?
    /// Sent as Alibaba's `region=` when asking for the list.
    let region: String

    /// `bootstrap` gives the IPs of an endpoint named by hostname: a resolver must be reachable without
    /// DNS, so a hostname without a bootstrap entry is a configuration error. `serviceLists`: route
    /// queries through the service's published addresses, the endpoint's own as the last resort.
    init(
        engine: HTTPEngine,
        endpoint: ResolverEndpoint,
        bootstrap: [String: [IPAddress]],
        serviceLists: ServiceListSettings? = nil
    ) throws {
        self.engine = engine
        self.endpoint = endpoint
        self.region = serviceLists?.region ?? "global"
        let mapped = endpoint.bootstrapAddresses(in: bootstrap)
        if mapped == nil {
            addresses = nil
        } else if let mapped, !mapped.isEmpty {
            addresses = ResolvedAddresses(
                ipv4: mapped.filter { !$0.isIPv6 },
                ipv6: mapped.filter(\.isIPv6),
                source: .bootstrap
            )
        } else {
            throw HTTPDNSConfigurationError(
                .invalidResolverSpec,
                "resolver host \(endpoint.host) has no bootstrap address (a resolver must be reachable without DNS)"
            )
        }
        if serviceLists != nil {
            let own = addresses.map { $0.ipv4 + $0.ipv6 } ?? IPAddress(endpoint.host).map { [$0] } ?? []
            routes = ServiceAddresses(bootstrap: own)
        } else {
            routes = nil
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
        maxBytes: Int = 64 * 1024,
        path: String? = nil,
        refusalCode: (@Sendable ([UInt8]) -> String?)? = nil,
        redacting secret: ResolverSecret? = nil,
        clock: ServiceClock? = nil
    ) async throws -> [UInt8] {
        let scheduling = path == ServiceListFormat.tencentPath || path?.hasSuffix("/ss") == true
        if let routes, routes.disabled, !scheduling {
            throw ProviderError("is switched off by its scheduling endpoint (service_status disable)")
        }
        var headers = HTTPHeaders([("accept", accept)])
        if let contentType { headers.add(name: "content-type", value: contentType) }
        // A group none of whose addresses connects passes on to the next.
        let attempts = self.attempts
        for (index, attempt) in attempts.enumerated() {
            var request = HTTPEngineRequest(
                method: method,
                url: HTTPURL(
                    scheme: endpoint.scheme,
                    host: endpoint.host,
                    port: attempt.port,
                    target: endpoint.target(adding: parameters, path: path)
                ),
                headers: headers,
                body: body.map { .bytes($0) }
            )
            let remaining = deadline - .now()
            guard remaining > .zero else { throw ProviderError("no time left for the query") }
            request.timeout = Duration(remaining)
            do {
                return try await exchange(
                    request,
                    attempt.addresses,
                    refusalCode: refusalCode,
                    redacting: secret,
                    clock: clock,
                    maxBytes: maxBytes
                )
            } catch let error as ProviderError
                where index < attempts.count - 1 && (error.underlying as? HTTPEngineError).map(Self.unreachable) == true
            {
                continue
            }
        }
        throw ProviderError("has no address to send to")
    }

    /// Where a query goes, in order: the service list's addresses, grouped by port (usually one group
    /// on the endpoint's port), or the endpoint's own.
    private var attempts: [(port: Int, addresses: ResolvedAddresses?)] {
        routes?.attempts(defaultPort: endpoint.port).map { ($0.port, $0.addresses) } ?? [(endpoint.port, addresses)]
    }

    /// Opens the connection the first query would use (TCP and TLS), so that query is one round trip.
    /// Throws the connect's `HTTPEngineError`.
    func warmUp() async throws {
        guard let first = attempts.first else { return }
        let url = HTTPURL(scheme: endpoint.scheme, host: endpoint.host, port: first.port, target: "/")
        try await engine.preconnect(url, addresses: first.addresses)
    }

    /// An engine error that says no address of the attempt could be reached.
    static func unreachable(_ error: HTTPEngineError) -> Bool {
        [.connectFailed, .connectTimeout, .noAddresses].contains(error.code)
    }

    /// One request to `addresses`, its answer's body.
    private func exchange(
        _ request: HTTPEngineRequest,
        _ addresses: ResolvedAddresses?,
        refusalCode: (@Sendable ([UInt8]) -> String?)?,
        redacting secret: ResolverSecret?,
        clock: ServiceClock?,
        maxBytes: Int
    ) async throws -> [UInt8] {
        do {
            let response = try await engine.execute(request, addresses: addresses)
            routes?.answered(from: response.metrics.ip)
            if let clock, let date = response.headers.first(name: "date") { clock.learn(dateHeader: date) }
            let body = try await response.body.collect(upTo: maxBytes)
            guard response.status == .ok else {
                if let code = refusalCode?(Array(body.readableBytesView)) {
                    throw ProviderError("answered HTTP \(response.status.code) \(code)", vendorCode: code)
                }
                var snippet = String(String(buffer: body).prefix(120).split(separator: "\n").first ?? "")
                if let secret, !secret.isEmpty {
                    // A server that echoes the query must not put a token into our messages and logs.
                    snippet = snippet.replacingOccurrences(of: secret.text, with: "<redacted>")
                }
                throw ProviderError("answered HTTP \(response.status.code) \(snippet)")
            }
            return Array(body.readableBytesView)
        } catch let error as HTTPEngineError {
            if Self.unreachable(error) { routes?.unreachable() }
            throw ProviderError(error.description, underlying: error)
        }
    }
}
