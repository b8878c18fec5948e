// httpdns-conformance: does a URLSession with HTTPDNS enabled behave exactly like the same session
// without it? The system's own URL loading is the oracle: swift-corelibs-foundation on Linux, Apple's
// URL loading system on macOS. Every case runs twice against the same in-process origin (plain
// HTTP/1.1 on loopback, named `localhost`): once through a plain session, resolved by the system, and
// once with HTTPDNS enabled, resolved by an in-process HTTPDNS server. It prints
//   SAME case
//   DIFF case: plain=... httpdns=...
// and last `conformance: N/M same`; the exit status is 0 only when N = M.
//
// Each side of each case runs in a process of its own (this executable again, with `--child`), so
// process-wide state (the shared cookie storage, URLCache, credential storage) starts the same for
// both sides, and a crash of the system stack is seen as a result, not as the end of the run.
//
//   swift run httpdns-conformance [CASE ...]           run every case, or the ones named
//   swift run httpdns-conformance --report [CASE ...]  the same, but exits 0 on a DIFF: only a crash or
//                                                      a hang of the HTTPDNS side fails it (what the
//                                                      test command runs until every case is SAME)
//   swift run httpdns-conformance --verbose ...        also prints what each SAME case saw
//   swift run httpdns-conformance --list               the case names

import Foundation
import HTTPDNSCore
import HTTPDNSServer
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

var arguments = Array(CommandLine.arguments.dropFirst())
let reportOnly = arguments.contains("--report")
let verbose = arguments.contains("--verbose")
arguments.removeAll { $0 == "--report" || $0 == "--verbose" }

if arguments.first == "--list" {
    for c in allCases { print(c.name) }
    exit(0)
}

if arguments.first == "--child" {
    // --child CASE plain|httpdns PORT TLS-PORT DOH-URL: run one side of one case, print `RESULT <text>`.
    guard arguments.count == 6, let c = allCases.first(where: { $0.name == arguments[1] }),
        let port = Int(arguments[3]), let tlsPort = Int(arguments[4])
    else {
        FileHandle.standardError.write(Data("usage: --child CASE plain|httpdns PORT TLS-PORT DOH-URL\n".utf8))
        exit(2)
    }
    let harness = try Harness(viaHTTPDNS: arguments[2] == "httpdns", port: port, tlsPort: tlsPort, doh: arguments[5])
    let result = try await c.run(harness)
    if harness.viaHTTPDNS, c.intercepted { await harness.waitUntilServed() }
    let served = harness.intercepted.withLockedValue { $0.count }
    FileHandle.standardOutput.write(Data("RESULT \(result)\nSERVED \(served)\n".utf8))
    exit(0)
}

var quiet = Logger(label: "conformance")
quiet.logLevel = .critical
let origin = try await ConformanceOrigin.start()
// The https origin of the server trust cases: a certificate for localhost from a CA made now, which
// neither the system nor HTTPDNS trusts.
let secureOrigin = try await ConformanceOrigin.startTLS()
var serverConfiguration = HTTPDNSService.Configuration()
serverConfiguration.staticHosts = ["localhost": [IPAddress("127.0.0.1")!]]
let server = try await HTTPDNSService.start(serverConfiguration, logger: quiet)
let doh = "http://127.0.0.1:\(server.ports[0])/dns-query"

let unknown = arguments.filter { name in !allCases.contains { $0.name == name } }
guard unknown.isEmpty else {
    print("unknown case(s): \(unknown.joined(separator: ", ")); `--list` names them")
    exit(2)
}
let selected = arguments.isEmpty ? allCases : allCases.filter { arguments.contains($0.name) }
let oracle: String
#if canImport(Darwin)
    oracle = "Apple's URL loading system"
#else
    oracle = "swift-corelibs-foundation"
#endif
print("conformance: \(selected.count) cases, the oracle is \(oracle); origin http://localhost:\(origin.port)")

var same = 0
var judged = 0
var skipped: [String] = []
var broken: [String] = []
#if canImport(Darwin)
    let defects: [String: CorelibsDefect] = [:]
#else
    let defects = corelibsDefects
#endif
for c in selected {
    #if !canImport(Darwin)
        if let why = c.unavailableOnCorelibs {
            skipped.append(c.name)
            print("SKIP \(c.name): \(why)")
            continue
        }
    #endif
    let ports = (origin.port, secureOrigin.port)
    let plain = runSide(c.name, "plain", ports: ports, doh: doh, behindSystemProxy: c.behindSystemProxy)
    let httpdns = runSide(c.name, "httpdns", ports: ports, doh: doh, behindSystemProxy: c.behindSystemProxy)
    var httpdnsText = httpdns.result
    if c.intercepted, httpdns.served == 0, httpdns.exit == 0 {
        httpdnsText += " (never reached HTTPDNS)"
    }
    if httpdns.exit != 0 { broken.append(c.name) }
    if plain.result == httpdnsText {
        same += 1
        print(
            "SAME \(c.name)"
                + (defects[c.name] == nil
                    ? "" : " (corelibs is no longer wrong here: drop it from CorelibsDefects.swift)")
                + (verbose ? ": \(plain.result)" : "")
        )
    } else if let defect = defects[c.name], httpdns.exit == 0, defect.expected(httpdnsText) {
        same += 1
        judged += 1
        print("SAME \(c.name) (as Apple documents it; corelibs \(defect.why): plain=\(plain.result))")
    } else {
        print("DIFF \(c.name): plain=\(plain.result) httpdns=\(httpdnsText)")
    }
}
await origin.stop()
await secureOrigin.stop()
await server.stop()
let counted = selected.count - skipped.count
print(
    "conformance: \(same)/\(counted) same"
        + (skipped.isEmpty ? "" : " (\(skipped.count) not available on this platform)")
        + (judged == 0 ? "" : " (\(judged) where corelibs is wrong, judged against Apple's documented behaviour)")
)
if !broken.isEmpty { print("conformance: the HTTPDNS side crashed or hung in \(broken.joined(separator: ", "))") }
exit(broken.isEmpty && (reportOnly || same == counted) ? 0 : 1)
