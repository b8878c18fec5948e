// For code that cannot be intercepted: hand it addresses from HTTPDNS in the form it takes.
//
//   ipDirectURL        a URL with the IP in place of the host plus the Host header to send (what
//                      AVPlayer takes for http media). http only: an https URL with an IP would send
//                      the IP as SNI and fail the certificate check; use the loopback proxy for those.
//   curlResolveEntries `host:port:addr[,addr...]` for `curl --resolve` (SNI and Host stay the name).
//   dnsOverride        AsyncHTTPClient's `Configuration.dnsOverride` map, host to one address.
//   HTTPDNSNIOResolver (its own file) for any NIO ClientBootstrap.

import Foundation
import HTTPDNSCore

/// An http URL rewritten to connect to an address while the server still sees the name: for clients
/// that take a URL and headers but no resolver, such as AVPlayer (see the DocC article "Media players
/// and other clients outside URLSession").
public struct IPDirectRewrite: Sendable, Hashable {
    /// The URL with the address in place of the host (`http://203.0.113.7:8080/path`).
    public var url: URL
    /// Headers to send with it: `Host` with the original name (and port, when the URL has one).
    public var headers: [String: String]
    /// The address the URL now names.
    public var address: IPAddress
}

extension HTTPDNSResolver {
    /// `http://name:port/path` → `http://ADDRESS:port/path` plus `Host: name:port`, resolved through
    /// HTTPDNS as the policy says. IPv4 is preferred (players take it everywhere).
    ///
    /// - Parameter url: The http URL to rewrite.
    /// - Returns: The rewritten URL, the `Host` header to send with it, and the address it names.
    /// - Throws: `ResolverError`: `.notRewritable` for a URL without a host, or not http (an https URL with an
    ///   IP would send the IP as SNI and fail the certificate check: use `HTTPDNS.startProxy(_:)` or a
    ///   resource loader for those), and the lookup's own error for a name with no address.
    public func ipDirectURL(for url: URL) async throws -> IPDirectRewrite {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), let host = components.host,
            !host.isEmpty
        else {
            throw ResolverError(.notRewritable, name: url.absoluteString, "\(url) has no host")
        }
        guard components.scheme?.lowercased() == "http" else {
            throw ResolverError(
                .notRewritable,
                name: url.absoluteString,
                "\(url): only http URLs can be rewritten to an IP (https would send the IP as SNI); use HTTPDNSProxy or HTTPDNSURLProtocol"
            )
        }
        let resolution = try await resolve(host)
        guard let address = resolution.ipv4.first ?? resolution.ipv6.first else {
            throw ResolverError(.noAddress, name: host, "\(host) has no address")
        }
        components.host = formatAuthority(host: address.description, port: nil)
        guard let rewritten = components.url else {
            throw ResolverError(.notRewritable, name: url.absoluteString, "cannot rewrite \(url)")
        }
        let authority = components.port.map { "\(host):\($0)" } ?? host
        return IPDirectRewrite(url: rewritten, headers: ["Host": authority], address: address)
    }

    /// One `--resolve` entry per target, every address of the name (curl 7.59+ takes a list; IPv6
    /// in brackets).
    ///
    /// - Parameter targets: The names to resolve, each with the port curl connects to.
    /// - Returns: One `host:port:addr[,addr...]` entry per target, in order.
    /// - Throws: `ResolverError`, from the first target whose lookup failed or gave no address (`.noAddress`).
    public func curlResolveEntries(_ targets: [(host: String, port: Int)]) async throws -> [String] {
        var entries: [String] = []
        for target in targets {
            let resolution = try await resolve(target.host)
            let addresses = (resolution.ipv4 + resolution.ipv6).map { formatAuthority(host: $0.description, port: nil) }
            guard !addresses.isEmpty else {
                throw ResolverError(.noAddress, name: target.host, "\(target.host) has no address")
            }
            entries.append("\(target.host):\(target.port):\(addresses.joined(separator: ","))")
        }
        return entries
    }

    /// AsyncHTTPClient's `dnsOverride`: each host to one address (IPv4 first). AsyncHTTPClient keeps
    /// the name for SNI and certificate checks while connecting there.
    ///
    /// - Parameter hosts: The names to resolve.
    /// - Returns: Each name and its address, as text.
    /// - Throws: `ResolverError`, from the first name whose lookup failed or gave no address (`.noAddress`).
    public func dnsOverride(for hosts: [String]) async throws -> [String: String] {
        var map: [String: String] = [:]
        for host in hosts {
            let resolution = try await resolve(host)
            guard let address = resolution.ipv4.first ?? resolution.ipv6.first else {
                throw ResolverError(.noAddress, name: host, "\(host) has no address")
            }
            map[host] = "\(address)"
        }
        return map
    }
}
