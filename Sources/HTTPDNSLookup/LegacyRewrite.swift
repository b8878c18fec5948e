// For code that cannot be intercepted: hand it addresses from HTTPDNS in the form it takes.
//
//   ipDirectURL        a URL with the IP in place of the host plus the Host header to send (the
//                      seeds' AVPlayer pattern). http only: an https URL with an IP would send the IP
//                      as SNI and fail the certificate check; use the loopback proxy for those.
//   curlResolveEntries `host:port:addr[,addr...]` for `curl --resolve` (SNI and Host stay the name).
//   dnsOverride        AsyncHTTPClient's `Configuration.dnsOverride` map, host to one address.
//   HTTPDNSNIOResolver (its own file) for any NIO ClientBootstrap.

import Foundation
import HTTPDNSCore

/// A URL rewritten to connect to an address while the server still sees the name.
public struct IPDirectRewrite: Sendable, Hashable {
    /// The URL with the address in place of the host.
    public var url: URL
    /// Headers to send with it (`Host` with the original name and port).
    public var headers: [String: String]
    public var address: IPAddress
}

package struct RewriteError: Error, CustomStringConvertible, Sendable {
    package var description: String
}

extension HTTPDNSResolver {
    /// `http://name:port/path` → `http://ADDRESS:port/path` plus `Host: name:port`. IPv4 is preferred
    /// (players take it everywhere). Throws for https (see the top of this file) and for names with no
    /// address.
    public func ipDirectURL(for url: URL) async throws -> IPDirectRewrite {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), let host = components.host,
            !host.isEmpty
        else {
            throw RewriteError(description: "\(url) has no host")
        }
        guard components.scheme?.lowercased() == "http" else {
            throw RewriteError(
                description:
                    "\(url): only http URLs can be rewritten to an IP (https would send the IP as SNI); use HTTPDNSProxy or HTTPDNSURLProtocol"
            )
        }
        let resolution = try await resolve(host)
        guard let address = resolution.ipv4.first ?? resolution.ipv6.first else {
            throw RewriteError(description: "\(host) has no address")
        }
        components.host = address.isIPv6 ? "[\(address)]" : "\(address)"
        guard let rewritten = components.url else { throw RewriteError(description: "cannot rewrite \(url)") }
        let authority = components.port.map { "\(host):\($0)" } ?? host
        return IPDirectRewrite(url: rewritten, headers: ["Host": authority], address: address)
    }

    /// One `--resolve` entry per target, every address of the name (curl 7.59+ takes a list; IPv6
    /// in brackets).
    public func curlResolveEntries(_ targets: [(host: String, port: Int)]) async throws -> [String] {
        var entries: [String] = []
        for target in targets {
            let resolution = try await resolve(target.host)
            let addresses = (resolution.ipv4 + resolution.ipv6).map { $0.isIPv6 ? "[\($0)]" : "\($0)" }
            guard !addresses.isEmpty else { throw RewriteError(description: "\(target.host) has no address") }
            entries.append("\(target.host):\(target.port):\(addresses.joined(separator: ","))")
        }
        return entries
    }

    /// AsyncHTTPClient's `dnsOverride`: each host to one address (IPv4 first). AsyncHTTPClient keeps
    /// the name for SNI and certificate checks while connecting there.
    public func dnsOverride(for hosts: [String]) async throws -> [String: String] {
        var map: [String: String] = [:]
        for host in hosts {
            let resolution = try await resolve(host)
            guard let address = resolution.ipv4.first ?? resolution.ipv6.first else {
                throw RewriteError(description: "\(host) has no address")
            }
            map[host] = "\(address)"
        }
        return map
    }
}
