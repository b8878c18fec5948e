// `httpdns trace URL...`: fetches each URL through the IP-direct engine, one after another, and writes a
// self-contained HTML page with a waterfall per request (DNS, connect, TLS, waiting, download; each
// redirect hop a row of its own), drawn by HTTPDNSCore's `TraceWaterfall`.
// `--compare-local` fetches every URL twice, through LocalDNS alone and through HTTPDNS, and draws the
// two side by side under a table of what each resolver answered and whether LocalDNS looked hijacked
// (the same comparison as `resolve --compare`).
// Exit status: 0 when every request through HTTPDNS got an HTTP response (the LocalDNS side of
// --compare-local may fail: that is what it shows), 1 otherwise, 23 when a file cannot be written, 64 for
// a usage error. The page is written either way.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ArgumentParser
import HTTPDNSCommandLine
import HTTPDNSOTLP
import HTTPDNSKit
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import NIOPosix

struct TraceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract: "Fetch URLs and draw where each request spent its time (DNS, connect, TLS, waiting, download).",
        discussion: """
            Example: httpdns trace https://a.test:8443/ https://b.test:8443/ --compare-local -o trace.html \
            --resolver doh:https://127.0.0.1:8473/dns-query --local-dns dns:127.0.0.2:5353 --cacert ca.pem
            """
    )

    @Argument(help: "http:// or https:// URLs, fetched one after another.")
    var urls: [String]

    @Option(name: .customShort("o"), help: ArgumentHelp("Write the HTML page to FILE.", valueName: "FILE"))
    var output = "trace.html"

    @Option(help: ArgumentHelp("Also write the chart alone as an SVG file.", valueName: "FILE"))
    var svg: String?

    @Option(
        help: ArgumentHelp(
            "Also render the page to a PNG with headless Chromium (must be installed).",
            valueName: "FILE"
        )
    )
    var screenshot: String?

    @Flag(
        name: .customLong("compare-local"),
        help: "Fetch each URL through LocalDNS alone too, and draw the two side by side with both answers."
    )
    var compareLocal = false

    @Option(name: .customLong("max-redirs"), help: "Redirects followed at most per URL (each one is a row).")
    var maxRedirects = 10

    @Option(
        name: .customLong("max-time"),
        parsing: .unconditional,
        help: ArgumentHelp("Bound on each URL, redirects included.", valueName: "SECONDS")
    )
    var maxTime: Double = 30

    @Flag(name: .customLong("http1.1"), help: "Use HTTP/1.1 only.")
    var http11 = false

    @Flag(name: .customLong("http2"), help: "Use HTTP/2 only.")
    var http2 = false

    @OptionGroup var resolver: ResolverOptions
    @OptionGroup var tracing: TracingOptions

    func validate() throws {
        guard !urls.isEmpty else { throw ValidationError("give at least one URL") }
        guard urls.count <= 100 else { throw ValidationError("at most 100 URLs a trace (got \(urls.count))") }
        for url in urls {
            do { _ = try HTTPURL(url) } catch { throw ValidationError("\(url): \(error)") }
        }
        guard !(http11 && http2) else { throw ValidationError("--http1.1 and --http2: give one of them") }
        try resolver.requireResolver(for: urls)
        guard (0...50).contains(maxRedirects) else { throw ValidationError("--max-redirs: give 0 to 50") }
        _ = try seconds(maxTime, flag: "--max-time", range: 0.001...3600)
        for (flag, path) in [("-o", output), ("--svg", svg), ("--screenshot", screenshot)] {
            guard let path else { continue }
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            guard FileManager.default.isWritableFile(atPath: folder) else {
                throw ValidationError("\(flag): cannot write in \(folder)")
            }
        }
        if screenshot != nil, Chromium.executable == nil {
            throw ValidationError("--screenshot: Chromium is not installed (apt-get install chromium)")
        }
    }

    func run() async throws {
        try await tracing.exporting(logger: resolver.tracingLogger) { try await traceAll() }
    }

    private func traceAll() async throws {
        let targets = try urls.map { try HTTPURL($0) }
        let versions: HTTPVersionPolicy = http11 ? .http1Only : http2 ? .http2Only : .automatic
        let httpdns = try resolver.makeHTTPDNS { $0.http.versions = versions }
        var panels: [TracePanel] = []
        var comparisons: [TraceComparison] = []
        if compareLocal {
            // LocalDNS alone: the same options with every name sent to --local-dns.
            var localOptions = resolver
            localOptions.only = []
            localOptions.except = ["*"]
            let local = try localOptions.makeHTTPDNS { $0.http.versions = versions }
            panels.append(
                TracePanel(title: "through LocalDNS (\(resolver.localDNS))", rows: try await fetchAll(targets, local))
            )
            await local.shutdown()
        }
        await resolver.fetchServiceLists(httpdns)
        let rows = try await fetchAll(targets, httpdns)
        let failed = rows.contains { $0.error != nil }
        if compareLocal {
            // After the fetches, so the HTTPDNS rows show a real lookup, not one this comparison cached.
            // Every host the requests reached, redirect targets included, in the order first reached.
            var hosts = targets.map(\.host)
            hosts += rows.compactMap { try? HTTPURL($0.url).host }
            var seen = Set<String>()
            for host in hosts where seen.insert(host).inserted {
                comparisons.append(Self.comparison(await httpdns.resolver.compare(host)))
            }
        }
        await httpdns.shutdown()
        panels.append(TracePanel(title: "through HTTPDNS (\(resolver.resolvers.joined(separator: ", ")))", rows: rows))

        let chart = TraceWaterfall(panels: panels)
        let page = chart.html(
            title: "httpdns trace",
            subtitle: "\(targets.count) URL(s), fetched one after another on \(Date().formatted(.iso8601)). "
                + "A bar starts when its request did; a redirect is a row of its own (↪).",
            comparisons: comparisons
        )
        try write(page, to: output, flag: "-o")
        if let svg { try write(chart.svg(), to: svg, flag: "--svg") }
        if let screenshot {
            // The page's height, generously: the chart, then the table, whose rows wrap long errors.
            let height = Int(chart.height) + 300 + 32 * comparisons.count + 72 * panels.map(\.rows.count).reduce(0, +)
            try await Chromium.screenshot(page: output, to: screenshot, width: Int(chart.width) + 48, height: height)
        }
        for panel in panels {
            for row in panel.rows {
                print(
                    String(
                        format: "%@  %@  %@  %.1f ms",
                        panel.title.hasPrefix("through LocalDNS") ? "local  " : "httpdns",
                        row.url,
                        row.outcome,
                        row.totalMs ?? 0
                    )
                )
            }
        }
        print("wrote \(output)\(svg.map { ", \($0)" } ?? "")\(screenshot.map { ", \($0)" } ?? "")")
        if failed { throw ExitCode(1) }
    }

    /// Every URL in turn through `httpdns`'s engine, which no request used before (so the first request
    /// to each host pays for its connection), redirects followed as rows of their own.
    func fetchAll(_ targets: [HTTPURL], _ httpdns: HTTPDNS) async throws -> [TraceTiming] {
        let engine = httpdns.engine
        let t0 = ContinuousClock.now
        var rows: [TraceTiming] = []
        for target in targets {
            var request = HTTPEngineRequest(url: target)
            let deadline = ContinuousClock.now + (try seconds(maxTime, flag: "--max-time", range: 0.001...3600))
            for hop in 0...maxRedirects {
                request.timeout = deadline - ContinuousClock.now
                let started = ContinuousClock.now
                let startMs = (started - t0).milliseconds
                do {
                    guard request.timeout! > .zero else {
                        throw HTTPEngineError(.totalTimeout, "no time left for redirect \(hop) (--max-time)")
                    }
                    let response = try await engine.execute(request)
                    for try await _ in response.body {}
                    rows.append(Self.row(response.metrics, startMs: startMs, hop: hop, url: request.url))
                    guard hop < maxRedirects, let next = try HTTPEngine.redirect(from: request, response: response)
                    else { break }
                    request = next
                } catch {
                    var row = TraceTiming(url: request.url.description, startMs: startMs, redirectHop: hop)
                    row.totalMs = (ContinuousClock.now - started).milliseconds
                    row.error = "\(error)"
                    rows.append(row)
                    break
                }
            }
        }
        return rows
    }

    static func row(_ m: RequestMetrics, startMs: Double, hop: Int, url: HTTPURL) -> TraceTiming {
        TraceTiming(
            url: url.description,
            startMs: startMs,
            stalledMs: m.stalled?.milliseconds,
            dnsMs: m.dns?.milliseconds,
            recordsWaitMs: m.recordsWait?.milliseconds,
            connectMs: m.connect?.milliseconds,
            tlsMs: m.tls?.milliseconds,
            ttfbMs: m.timeToFirstByte?.milliseconds,
            totalMs: m.total?.milliseconds,
            ip: m.ip,
            protocolName: m.httpVersion?.rawValue,
            dnsSource: m.reused && m.dnsSource == nil ? "reused connection" : m.dnsSource?.description,
            reused: m.reused,
            status: m.status,
            redirectHop: hop,
            reaskMs: m.reasks.isEmpty ? nil : m.reasks.reduce(Duration.zero) { $0 + $1.duration }.milliseconds
        )
    }

    static func comparison(_ report: HijackReport) -> TraceComparison {
        func answer(_ result: Result<Resolution, ResolverError>) -> Result<[String], TraceError> {
            result.map { $0.addresses.map(\.description) }.mapError { TraceError($0.description) }
        }
        return TraceComparison(
            host: report.name,
            localDNS: answer(report.localDNS),
            httpdns: answer(report.httpdns),
            verdict: report.verdict.rawValue,
            explanation: report.verdict.explanation,
            alarming: report.verdict.isHijack
        )
    }

    func write(_ text: String, to path: String, flag: String) throws {
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            FileHandle.standardError.write(Data("httpdns: \(flag): cannot write \(path): \(error)\n".utf8))
            throw ExitCode(23)
        }
    }
}

/// Headless Chromium, for `--screenshot`.
enum Chromium {
    static var executable: String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    /// Renders the page at `page` to a PNG of `width` x `height` CSS pixels. Chromium runs with a
    /// throw-away profile, no network of its own (the page needs none), and without its sandbox only
    /// when run as root (where it refuses to start with it).
    static func screenshot(page: String, to png: String, width: Int, height: Int) async throws {
        guard let browser = executable else { throw ValidationError("--screenshot: Chromium is not installed") }
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-trace-\(UUID())")
        defer { try? FileManager.default.removeItem(at: profile) }
        let absolutePNG = URL(fileURLWithPath: png).standardizedFileURL.path
        try? FileManager.default.removeItem(atPath: absolutePNG)
        let arguments =
            (geteuid() == 0 ? ["--no-sandbox"] : []) + [
                "--headless=new", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
                "--user-data-dir=" + profile.path, "--window-size=\(width),\(height)", "--screenshot=" + absolutePNG,
                URL(fileURLWithPath: page).standardizedFileURL.absoluteString,
            ]
        let (status, errors) = try await NIOThreadPool.singleton.runIfActive { () -> (Int32, String) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: browser)
            process.arguments = arguments
            let err = Pipe()
            process.standardError = err
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let data = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        guard status == 0, FileManager.default.fileExists(atPath: absolutePNG) else {
            FileHandle.standardError.write(
                Data("httpdns: --screenshot: Chromium exited \(status) without a PNG: \(errors.suffix(600))\n".utf8)
            )
            throw ExitCode(1)
        }
    }
}
