// `httpdns demo`: the whole story in-process on loopback, no network, nothing installed.
//
//   LocalDNS     a hijacking classic DNS server: every *.test name -> 127.0.0.66 (nothing listens there)
//   HTTPDNS      our server (DoH wire format) giving the right address, 127.0.0.1
//   origins      a.test and b.test on ONE IP and port, each with its own certificate chosen by SNI,
//                h2 and HTTP/1.1, plus a default certificate for clients that send no SNI
// Then five steps, each checked; the exit status is 0 only when every step came out as expected.

import ArgumentParser
import Crypto
import Foundation
import HTTPDNSCommandLine
import HTTPDNSCore
import HTTPDNSDemoPKI
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSServer
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show HTTPDNS beating a hijacking LocalDNS, end to end, in-process on loopback."
    )

    @Option(help: "Size of the upload in step 4, MiB.")
    var uploadMiB = 20

    func run() async throws {
        var quiet = Logger(label: "demo")
        quiet.logLevel = .critical
        let right = IPAddress("127.0.0.1")!
        let wrong = IPAddress("127.0.0.66")!

        // --- the cast -------------------------------------------------------------------------
        let pki = try DemoPKI()
        let origin = try await DemoOrigin.start(pki: pki, names: ["a.test", "b.test"], logger: quiet)
        let port = origin.port
        let hijacker = try await DNSServer.start { name, _ in
            name.hasSuffix(".test") ? .init(addresses: [wrong], ttl: 60) : .nxdomain
        }
        var serverConfig = HTTPDNSService.Configuration()
        serverConfig.staticHosts = ["a.test": [right], "b.test": [right]]
        serverConfig.ttl = 120
        let httpdns = try await HTTPDNSService.start(serverConfig, logger: quiet)
        let dohURL = "http://127.0.0.1:\(httpdns.ports[0])/dns-query"

        print(
            """
            swift-httpdns demo: everything below runs in this process, on loopback.
              LocalDNS (hijacking)  udp 127.0.0.1:\(hijacker.port)   answers 127.0.0.66 for every *.test name
              HTTPDNS server        \(dohURL)   answers 127.0.0.1
              HTTPS origins         a.test and b.test on 127.0.0.1:\(port), one certificate each, chosen by SNI
              trust                 a throw-away CA made at start (swift-certificates)

            """
        )

        // The app's side: a resolver asking our HTTPDNS server, with the hijacker as LocalDNS.
        var rc = ResolverConfiguration(providers: [try ResolverSpec(parsing: "doh:" + dohURL)])
        rc.policy = .all
        rc.fallbackToLocalDNS = false
        rc.localDNS = .dns(right, port: hijacker.port)
        rc.timeout = .seconds(3)
        let resolverEngine = try HTTPEngine(logger: quiet)
        let resolver = try HTTPDNSResolver(configuration: rc, engine: resolverEngine, logger: quiet)
        var local = rc
        local.policy = .none  // everything through LocalDNS
        let localResolver = try HTTPDNSResolver(configuration: local, engine: resolverEngine, logger: quiet)

        var ec = HTTPEngine.Configuration()
        ec.tls = HTTPEngineTLS(additionalTrustRoots: [TrustAnchor(der: try pki.caCertificate.toDERBytes())])
        ec.timeouts.connect = .seconds(3)
        ec.timeouts.request = .seconds(20)
        let viaLocalDNS = try HTTPEngine(
            configuration: ec,
            addressSource: localResolver,
            path: localResolver.path,
            logger: quiet
        )
        let direct = try HTTPEngine(configuration: ec, addressSource: resolver, path: resolver.path, logger: quiet)
        let naive = try HTTPEngine(configuration: ec, logger: quiet)

        var ok = true
        var timings: [(String, RequestMetrics)] = []
        func step(_ title: String, _ explanation: String) {
            print("\n\(title)")
            if !explanation.isEmpty { print("   \(explanation)") }
        }
        func outcome(_ good: Bool, _ text: String) {
            ok = ok && good
            print("   \(good ? "ok  " : "FAIL") \(text)")
        }

        // 1 ---------------------------------------------------------------------------------------
        step(
            "1. The plain path: ask LocalDNS, connect.",
            "The network's resolver is hijacked, so the app connects to the wrong place."
        )
        do {
            let r = try await viaLocalDNS.execute(try HTTPEngineRequest(url: "https://a.test:\(port)/"))
            outcome(false, "unexpectedly reached \(r.metrics.ip ?? "?") with HTTP \(r.status.code)")
        } catch {
            let resolved = try? await localResolver.resolve("a.test", .ipv4)
            outcome(
                true,
                "LocalDNS said a.test is \(resolved?.ipv4.map(\.description).joined(separator: " ") ?? "?"); the request failed: \(error)"
            )
        }

        // 2 ---------------------------------------------------------------------------------------
        step(
            "2. The usual quick fix: put the right IP in the URL (https://127.0.0.1/) and send Host: a.test.",
            "TLS then sends no name (SNI) and checks the certificate against the IP, so it is refused."
        )
        do {
            let r = try await naive.execute(
                try HTTPEngineRequest(url: "https://127.0.0.1:\(port)/", headers: ["host": "a.test"])
            )
            outcome(false, "unexpectedly accepted: HTTP \(r.status.code)")
        } catch {
            outcome(true, "refused, as it must be: \(error)")
        }

        // 3 ---------------------------------------------------------------------------------------
        step(
            "3. HTTPDNS, direct: the URL keeps its name, only the socket address comes from HTTPDNS.",
            "SNI, certificate check and Host stay on the real name, over HTTP/2."
        )
        for name in ["a.test", "b.test"] {
            do {
                let r = try await direct.execute(try HTTPEngineRequest(url: "https://\(name):\(port)/"))
                let body = String(buffer: try await r.body.collect(upTo: 1 << 16)).trimmingCharacters(
                    in: .whitespacesAndNewlines
                )
                let good =
                    r.status == .ok && r.version == .http2 && body.contains("vhost=\(name)")
                    && r.metrics.ip == "127.0.0.1"
                outcome(
                    good,
                    "\(name): HTTP \(r.status.code) over \(r.version.rawValue) from \(r.metrics.ip ?? "?"), certificate for \(name) verified; server says \"\(body)\""
                )
                timings.append(("GET \(name)/", r.metrics))
            } catch {
                outcome(false, "\(name): \(error)")
            }
        }

        // 4 ---------------------------------------------------------------------------------------
        step(
            "4. A \(uploadMiB) MB POST, and a redirect to the other name.",
            "The body streams from memory in 64 KiB chunks; the redirect's new host is resolved through HTTPDNS again."
        )
        let payload = [UInt8](unsafeUninitializedCapacity: uploadMiB << 20) { buffer, count in
            var rng = SystemRandomNumberGenerator()
            let words = UnsafeMutableRawBufferPointer(buffer).bindMemory(to: UInt64.self)
            for i in words.indices { words[i] = rng.next() }
            count = uploadMiB << 20
        }
        let digest = SHA256.hash(data: payload).map { String(format: "%02x", $0) }.joined()
        do {
            let r = try await direct.execute(
                try HTTPEngineRequest(method: .POST, url: "https://a.test:\(port)/echo", body: .bytes(payload))
            )
            let body = String(buffer: try await r.body.collect(upTo: 1 << 16))
            let good = body.contains("length=\(payload.count)") && body.contains("sha256=\(digest)")
            outcome(
                good,
                "sent \(payload.count) bytes; the server counted \(body.split(separator: " ").first ?? "") and its SHA-256 \(good ? "matches" : "DIFFERS")"
            )
            timings.append(("POST a.test/echo", r.metrics))
        } catch {
            outcome(false, "upload: \(error)")
        }
        do {
            // A fresh engine (no pooled connection to b.test), so the hop to b.test is resolved again.
            let fresh = try HTTPEngine(configuration: ec, addressSource: resolver, path: resolver.path, logger: quiet)
            defer { fresh.shutdown() }
            let r = try await fresh.send(try HTTPEngineRequest(url: "https://a.test:\(port)/to-b"), followRedirects: 3)
            let body = String(buffer: try await r.body.collect(upTo: 1 << 16)).trimmingCharacters(
                in: .whitespacesAndNewlines
            )
            let good =
                r.url.host == "b.test" && body.contains("vhost=b.test") && r.metrics.redirects == 1
                && r.metrics.dnsSource?.description.contains(dohURL) == true
            outcome(good, "a.test/to-b -> \(r.url): \"\(body)\", resolved via \(r.metrics.sourceText)")
            timings.append(("GET a.test/to-b -> b.test", r.metrics))
        } catch {
            outcome(false, "redirect: \(error)")
        }

        // 5 ---------------------------------------------------------------------------------------
        step("5. Where the time went (milliseconds; a reused connection has no connect or TLS).", "")
        func ms(_ v: Duration?) -> String { v.map { String(format: "%8.2f", $0.milliseconds) } ?? "       -" }
        print("   request                         dns  connect      tls  1st byte    total  proto  reused")
        for (label, m) in timings {
            let padded = label.padding(toLength: 26, withPad: " ", startingAt: 0)
            print(
                "   \(padded) \(ms(m.dns)) \(ms(m.connect)) \(ms(m.tls)) \(ms(m.timeToFirstByte)) \(ms(m.total))  \(m.protocolText)    \(m.reused)"
            )
        }
        ok = ok && timings.count == 4

        direct.shutdown()
        naive.shutdown()
        viaLocalDNS.shutdown()
        resolverEngine.shutdown()
        await httpdns.stop()
        await hijacker.stop()
        await origin.stop()
        print(ok ? "\nEvery step came out as expected." : "\nSome step did NOT come out as expected.")
        if !ok { throw ExitCode(1) }
    }
}

/// The demo's HTTPS origins: several names on one IP and port, the certificate chosen by SNI (a default
/// one when there is none), the virtual host chosen by Host, as nginx does.
struct DemoOrigin {
    let listener: HTTPListener
    var port: Int { listener.port }

    static func start(pki: DemoPKI, names: [String], logger: Logger) async throws -> DemoOrigin {
        var identities: [String: (NIOSSLCertificate, NIOSSLPrivateKey)] = [:]
        for name in names { identities[name] = try pki.leaf(name) }
        let fallback = try pki.leaf("default.test")
        let byName = identities
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(fallback.0)],
            privateKey: .privateKey(fallback.1)
        )
        tls.applicationProtocols = ["h2", "http/1.1"]
        tls.sslContextCallback = { values, promise in
            var override = NIOSSLContextConfigurationOverride()
            if let sni = values.serverHostname, let (cert, key) = byName[normalizeHostname(sni)] {
                override.certificateChain = [.certificate(cert)]
                override.privateKey = .privateKey(key)
            }
            promise.succeed(override)
        }
        var limits = HTTPListener.Limits()
        limits.maxRequestBytes = 64 << 20
        let listener = try await HTTPListener.start(
            host: "127.0.0.1",
            port: 0,
            tls: try NIOSSLContext(configuration: tls),
            limits: limits,
            logger: logger
        ) { request in
            let authority = splitHostPort((request.headers.first(name: "host") ?? "")[...])
            let host = authority.map { String($0.host) } ?? ""
            let vhost = names.contains(host) ? host : "default"
            switch request.uri {
            case "/":
                return ListenerResponse(status: .ok, text: "vhost=\(vhost) host=\(host) proto=\(request.version)")
            case "/echo":
                let digest = SHA256.hash(data: Data(request.body.readableBytesView)).map { String(format: "%02x", $0) }
                    .joined()
                return ListenerResponse(status: .ok, text: "length=\(request.body.readableBytes) sha256=\(digest)")
            case "/to-b":
                return ListenerResponse(
                    status: .found,
                    body: [UInt8](),
                    headers: [
                        "location":
                            "https://b.test:\(authority?.port ?? "443")/"
                    ]
                )
            default:
                return ListenerResponse(status: .notFound, text: "not found")
            }
        }
        return DemoOrigin(listener: listener)
    }

    func stop() async { await listener.stop() }
}
