// IPv6-only networks behind NAT64/DNS64, and a network change under a running proxy, in real network
// namespaces that scripts/peers.sh builds (tayga as the translator, kresd's dns64 module as the
// network's resolver, an IPv4-only origin with nginx and an `httpdns serve` reachable only by an IPv4
// literal). See scripts/peers.sh `start_nat64` for the addresses.

import Foundation
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

/// The NAT64 namespaces of scripts/peers.sh.
struct NAT64Peers {
    var client: String
    var dual: String
    var origin: String
    var originIP: String
    var tlsPort: Int
    var ca: String

    static func require() throws -> NAT64Peers {
        let env = ProcessInfo.processInfo.environment
        return NAT64Peers(
            client: try #require(env["HTTPDNS_NAT64_CLIENT_NS"], "scripts/peers.sh builds the NAT64 namespaces"),
            dual: try #require(env["HTTPDNS_NAT64_DUAL_NS"]),
            origin: try #require(env["HTTPDNS_NAT64_ORIGIN_NS"]),
            originIP: try #require(env["HTTPDNS_NAT64_ORIGIN_IP"]),
            tlsPort: try #require(env["HTTPDNS_NAT64_TLS_PORT"].flatMap(Int.init)),
            ca: try #require(env["HTTPDNS_CA"])
        )
    }

    static let binary = httpdnsBinary

    /// `httpdns serve` in the origin namespace, on its IPv4 address only, answering a.test with that
    /// address (A only: the origin has no IPv6). Returns the process, its DNSPod URL and its log file;
    /// `stop` ends the process and removes its folder.
    func startHTTPDNSServer() async throws -> (ChildProcess, String, String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-nat64-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let hosts = dir.appendingPathComponent("hosts").path
        try "\(originIP) a.test\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let log = dir.appendingPathComponent("serve.log").path
        let (process, line) = try await startInBackground(
            "/usr/sbin/ip",
            ["netns", "exec", origin, Self.binary, "serve", "--listen", "\(originIP):0", "--hosts", hosts, "--debug"],
            stderr: log
        )
        let start = try #require(line.range(of: "http://\(originIP):"), "\(line)")
        let port = try #require(Int(line[start.upperBound...].prefix { $0.isNumber }), "\(line)")
        return (process, "dnspod:http://\(originIP):\(port)/d", log)
    }

    /// Ends a server `startHTTPDNSServer` started and removes its folder (hosts file and log).
    static func stop(_ server: ChildProcess, _ log: String) {
        server.terminate()
        try? FileManager.default.removeItem(at: URL(fileURLWithPath: log).deletingLastPathComponent())
    }

    /// The resolver options every run here shares: the IPv4-literal DNSPod endpoint, a.test allowed its
    /// benchmarking-range address, and no LocalDNS fallback (success must come from HTTPDNS).
    func options(_ resolver: String) -> [String] {
        ["--resolver", resolver, "--only", "a.test", "--allow-private", "a.test", "--no-fallback", "--cacert", ca]
    }
}

@Suite(.serialized, .enabled(if: Peers.shouldRun))
struct MobileNetworkTests {
    @Test func anIPv6OnlyNetworkReachesAnIPv4OnlyResolverAndOriginThroughNAT64() async throws {
        let peers = try NAT64Peers.require()
        let (server, resolver, serveLog) = try await peers.startHTTPDNSServer()
        defer { NAT64Peers.stop(server, serveLog) }

        // resolve -v: the stack, the discovered (network-specific) prefix, and the answer from HTTPDNS.
        let resolved = try await runCLI(["resolve", "a.test", "-v"] + peers.options(resolver), namespace: peers.client)
        #expect(resolved.status == 0, "\(resolved.stderr)")
        #expect(
            resolved.stdout.contains("IPv6 only, NAT64 fd00:64:64::/96; asking for A and AAAA"),
            "\(resolved.stdout)"
        )
        #expect(resolved.stdout.contains("source=\(resolver)"), "\(resolved.stdout)")
        #expect(resolved.stdout.contains("198.18.0.2 ;; via NAT64 fd00:64:64::c612:2"), "\(resolved.stdout)")

        // fetch: TLS to a.test with a verified certificate, over the synthesized address.
        let url = "https://a.test:\(peers.tlsPort)/"
        let fetched = try await runCLI(
            ["fetch", url, "--trace-json", "-o", "/dev/null"] + peers.options(resolver),
            namespace: peers.client
        )
        #expect(fetched.status == 0, "\(fetched.stderr)")
        let trace = fetched.stderr + fetched.stdout
        #expect(trace.contains("\"ip\":\"fd00:64:64::c612:2\""), "\(trace)")
        #expect(trace.contains("\"synthesizedFrom\":\"198.18.0.2\""), "\(trace)")
        #expect(trace.contains("\"status\":200"), "\(trace)")
        #expect(trace.contains("\"dnsSource\":\"\(resolver)\""), "\(trace)")

        // The same without synthesis cannot even reach the resolver: the test tests something.
        let off = try await runCLI(
            ["fetch", url, "--nat64", "off", "-o", "/dev/null"] + peers.options(resolver),
            namespace: peers.client
        )
        #expect(off.status != 0)
        #expect(off.stderr.contains("network is unreachable"), "\(off.stderr)")

        // An https URL with an IPv4 literal: connected through NAT64, and the certificate check is not
        // switched off. NIOSSL checks an IP-literal certificate against the address connected to (the
        // synthesized one), which the origin's certificate (naming 198.18.0.2) does not name: it fails
        // closed, saying why.
        let literal = try await runCLI(
            ["fetch", "https://198.18.0.2:\(peers.tlsPort)/", "-o", "/dev/null"] + peers.options(resolver),
            namespace: peers.client
        )
        #expect(literal.status != 0)
        #expect(literal.stderr.contains("[fd00:64:64::c612:2]:\(peers.tlsPort)"), "\(literal.stderr)")
        #expect(literal.stderr.contains("reached through NAT64"), "\(literal.stderr)")
    }

    @Test func aRunningProxyFollowsTheLossOfIPv4WithoutRestarting() async throws {
        let peers = try NAT64Peers.require()
        let (server, resolver, serveLog) = try await peers.startHTTPDNSServer()
        defer { NAT64Peers.stop(server, serveLog) }
        let proxyLog = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-proxy-\(UUID()).log").path
        defer { try? FileManager.default.removeItem(atPath: proxyLog) }
        let (proxy, line) = try await startInBackground(
            "/usr/sbin/ip",
            [
                "netns", "exec", peers.dual, NAT64Peers.binary, "proxy", "--listen", "127.0.0.1:0", "--allow-port",
                "\(peers.tlsPort)", "--debug",
            ] + peers.options(resolver),
            stderr: proxyLog
        )
        defer { proxy.terminate() }
        let start = try #require(line.range(of: "127.0.0.1:"), "\(line)")
        let port = try #require(Int(line[start.upperBound...].prefix { $0.isNumber }), "\(line)")
        func log(_ file: String) -> String { (try? String(contentsOfFile: file, encoding: .utf8)) ?? "" }
        func connect() async throws -> CLIResult {
            try await runProcess(
                "/usr/sbin/ip",
                [
                    "netns", "exec", peers.dual, "curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w",
                    "%{http_code}",
                    "-x", "http://127.0.0.1:\(port)", "--cacert", peers.ca, "https://a.test:\(peers.tlsPort)/",
                ]
            )
        }

        // Dual stack: the IPv4-only origin is reached over IPv4.
        let before = try await connect()
        #expect(before.stdout == "200", "\(before.stderr)")
        try await eventually("the tunnel went over IPv4") {
            log(proxyLog).contains("address=198.18.0.2:\(peers.tlsPort)")
        }
        let queriesBefore = log(serveLog).components(separatedBy: "dn=a.test").count

        // The IPv4 default route goes away under the running proxy.
        let removed = try await runProcess("/usr/sbin/ip", ["-n", peers.dual, "-4", "route", "del", "default"])
        #expect(removed.status == 0, "\(removed.stderr)")
        defer {
            _ = try? runProcessBlocking(
                "/usr/sbin/ip",
                ["-n", peers.dual, "-4", "route", "add", "default", "via", "198.18.1.1"]
            )
        }
        // Noticed by itself within 2 s (the bound), the prefix found, and the name in use asked
        // again on the new network before anyone connects.
        try await eventually("the proxy noticed the change", within: .seconds(2)) {
            log(proxyLog).contains("network changed")
        }
        try await eventually("NAT64 found") { log(proxyLog).contains("IPv6 only, NAT64 fd00:64:64::/96") }
        try await eventually("a.test re-resolved in the background") {
            log(serveLog).components(separatedBy: "dn=a.test").count > queriesBefore
        }

        // The next CONNECT goes over IPv6, through the translator, and the proxy never restarted.
        let after = try await connect()
        #expect(after.stdout == "200", "\(after.stderr)")
        try await eventually("the tunnel went over IPv6") {
            log(proxyLog).contains("address=[fd00:64:64::c612:2]:\(peers.tlsPort)")
        }
        #expect(proxy.isRunning)
    }
}
