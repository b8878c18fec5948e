// A configured proxy is never bypassed, against tinyproxy, which logs every request it gets:
// `httpdns fetch` tunnels through it to the address HTTPDNS gave (never the name, which the proxy would
// resolve itself), `no_proxy` and `--proxy ""` go direct, and the URLSession engine leaves a proxied
// request to the system (corelibs' libcurl then sends it to the proxy, by name).

import Foundation
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

@Suite(.serialized, .enabled(if: Peers.shouldRun))
struct UpstreamProxyCLITests {
    struct Proxy {
        let port: Int
        let log: String

        static func require() throws -> Proxy {
            let env = ProcessInfo.processInfo.environment
            let port = try #require(env["HTTPDNS_TINYPROXY_PORT"].flatMap(Int.init), "tinyproxy is not running")
            return Proxy(port: port, log: try #require(env["HTTPDNS_TINYPROXY_LOG"]))
        }

        var url: String { "http://127.0.0.1:\(port)" }

        /// The log lines a run of `body` added.
        func linesDuring(_ body: () async throws -> CLIResult) async throws -> (CLIResult, [String]) {
            let before = (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
            let result = try await body()
            let data = try Data(contentsOf: URL(fileURLWithPath: log))
            let added = String(decoding: data.dropFirst(before), as: UTF8.self)
            return (result, added.split(separator: "\n").map(String.init))
        }
    }

    func fetch(_ peers: Peers, _ extra: [String] = []) -> [String] {
        [
            "fetch", peers.url("a.test", "/whoami"), "--resolver", "dns:127.0.0.1:\(peers.kresdDNS.1)", "--cacert",
            peers.ca,
            "-o", "/dev/null", "--no-fallback",
        ] + extra
    }

    @Test func fetchTunnelsThroughTheProxyToTheAddressHTTPDNSGave() async throws {
        let peers = try Peers.require()
        let proxy = try Proxy.require()
        let (r, lines) = try await proxy.linesDuring {
            try await runCLI(fetch(peers), environment: ["https_proxy": proxy.url])
        }
        #expect(r.status == 0, "\(r.stderr)")
        let connects = lines.filter { $0.contains("): CONNECT ") }
        #expect(connects.count == 1, "\(lines)")
        // a.test is 127.0.0.1 and ::1 at kresd: the tunnel names one of them, never the name.
        #expect(
            connects.contains {
                $0.contains("CONNECT [::1]:\(peers.nginxTLS)") || $0.contains("CONNECT 127.0.0.1:\(peers.nginxTLS)")
            },
            "\(connects)"
        )
        #expect(!lines.contains { $0.contains("a.test") }, "\(lines)")
    }

    @Test func aProxyThatResolvesGetsTheNameAndItsOwnAnswerDecides() async throws {
        let peers = try Peers.require()
        let proxy = try Proxy.require()
        // tinyproxy resolves through the machine's resolver, which knows no a.test: it refuses (500).
        let (r, lines) = try await proxy.linesDuring {
            try await runCLI(fetch(peers, ["--proxy", proxy.url, "--proxy-resolves"]))
        }
        #expect(r.status != 0)
        #expect(lines.contains { $0.contains("CONNECT a.test:\(peers.nginxTLS)") }, "\(lines)")
        #expect(r.stderr.contains("refused the tunnel to a.test:\(peers.nginxTLS)"), "\(r.stderr)")
    }

    @Test func noProxyAndAnEmptyProxyGoDirect() async throws {
        let peers = try Peers.require()
        let proxy = try Proxy.require()
        for (extra, environment) in [
            ([String](), ["https_proxy": proxy.url, "no_proxy": "example.org,.test"]),
            (["--proxy", ""], ["https_proxy": proxy.url]),
            (["--noproxy", "a.test"], ["https_proxy": proxy.url]),
        ] {
            let (r, lines) = try await proxy.linesDuring {
                try await runCLI(fetch(peers, extra), environment: environment)
            }
            #expect(r.status == 0, "\(extra) \(environment): \(r.stderr)")
            #expect(!lines.contains { $0.contains("): CONNECT ") }, "\(extra) \(environment): \(lines)")
        }
    }

    @Test func aPasswordInTheProxyFlagIsRefused() async throws {
        let peers = try Peers.require()
        let r = try await runCLI(fetch(peers, ["--proxy", "http://u:s3cr3t@127.0.0.1:1"]))
        #expect(r.status == 64)
        #expect(r.stderr.contains("--proxy") && r.stderr.contains("https_proxy="), "\(r.stderr)")
        #expect(!r.stderr.contains("s3cr3t"))
    }

    @Test func theURLSessionEngineUsesTheProxyOrLeavesTheRequestToTheSystem() async throws {
        let peers = try Peers.require()
        let proxy = try Proxy.require()
        // HTTPDNS has the proxy (from https_proxy): the protocol intercepts, and the engine tunnels to
        // the address HTTPDNS gave.
        let (through, lines) = try await proxy.linesDuring {
            try await runCLI(fetch(peers, ["--engine", "urlsession"]), environment: ["https_proxy": proxy.url])
        }
        #expect(through.status == 0, "\(through.stderr)")
        #expect(
            lines.contains {
                $0.contains("): CONNECT [::1]:\(peers.nginxTLS)")
                    || $0.contains("): CONNECT 127.0.0.1:\(peers.nginxTLS)")
            },
            "\(lines)"
        )
        // HTTPDNS has none (--proxy ""), the system has one: the request is left to the system, and
        // libcurl (corelibs' URLSession) sends it to the proxy by name.
        let (_, left) = try await proxy.linesDuring {
            try await runCLI(
                fetch(peers, ["--engine", "urlsession", "--proxy", ""]),
                environment: ["https_proxy": proxy.url]
            )
        }
        #expect(left.contains { $0.contains("): CONNECT a.test:\(peers.nginxTLS)") }, "\(left)")
    }
}
