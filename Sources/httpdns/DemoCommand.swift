// `httpdns demo`: everything in-process on loopback, no network, nothing installed.
//
// Today it shows the resolver half of the story: a hijacking LocalDNS gives wrong answers, the trusted
// resolver gives right ones, and hijack detection tells them apart. The full demo (HTTPS origins with
// SNI, the naive IP-in-URL fix failing, uploads, redirects, timings) arrives with the server issue.

import ArgumentParser
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSResolver
import HTTPDNSServer

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show HTTPDNS beating a hijacking LocalDNS, all in-process on loopback."
    )

    func run() async throws {
        let right = IPAddress("127.0.0.1")!
        let wrong = IPAddress("127.0.0.66")!
        let hijacker = try await DNSServer.start { name, _ in
            name.hasSuffix(".test") ? .init(addresses: [wrong], ttl: 60) : .nxdomain
        }
        let trusted = try await DNSServer.start { name, _ in
            name.hasSuffix(".test") ? .init(addresses: [right], ttl: 60) : .nxdomain
        }
        defer {
            Task {
                await hijacker.stop(); await trusted.stop()
            }
        }
        print(
            """
            swift-httpdns demo (resolver part; the HTTPS part arrives with the server issue)
              hijacking LocalDNS   127.0.0.1:\(hijacker.port)  answers 127.0.0.66 for *.test
              trusted resolver     127.0.0.1:\(trusted.port)  answers 127.0.0.1  for *.test

            """
        )
        var config = ResolverConfiguration(providers: [.dns(IPAddress("127.0.0.1")!, port: trusted.port)])
        config.localDNS = .dns(IPAddress("127.0.0.1")!, port: hijacker.port)
        config.policy = .all
        config.timeout = .seconds(3)
        let resolver = try HTTPDNSResolver(configuration: config, engine: try HTTPEngine())
        var ok = true
        for name in ["a.test", "b.test"] {
            let report = await resolver.compare(name, .ipv4)
            let local = (try? report.localDNS.get())?.ipv4.map(\.description).joined(separator: " ") ?? "error"
            let good = (try? report.httpdns.get())?.ipv4.map(\.description).joined(separator: " ") ?? "error"
            let expected = report.hijacked && (try? report.httpdns.get())?.ipv4 == [right]
            ok = ok && expected
            print(
                "\(expected ? "ok  " : "FAIL") \(name): LocalDNS says \(local), HTTPDNS says \(good) -> \(report.hijacked ? "hijack detected" : "no hijack")"
            )
        }
        print(ok ? "\nevery step came out as expected" : "\nsome step did not come out as expected")
        if !ok { throw ExitCode(1) }
    }
}
