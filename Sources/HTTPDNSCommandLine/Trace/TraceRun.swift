// `httpdns trace`'s work once its flags are read (the command, in the executable, reads them and exports
// spans): each URL fetched through the IP-direct engine, one after another, redirects as rows of their own;
// with `compareLocal`, through LocalDNS alone too, and what each resolver answered for every host reached.
// The page is `TraceWaterfall`'s; the screenshot headless Chromium's.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ArgumentParser
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSKit
import HTTPDNSLookup
import NIOPosix

/// One `httpdns trace`, its flags read and checked.
package struct TraceRun {
    var targets: [HTTPURL]
    var versions: HTTPVersionPolicy
    var compareLocal: Bool
    /// Each URL's bound, its redirects included.
    var maxTime: Duration
    var maxRedirects: Int
    /// Where the page, the chart alone and the screenshot go (`-o`, `--svg`, `--screenshot`).
    var output: String
    var svg: String?
    var screenshot: String?

    package init(
        targets: [HTTPURL],
        versions: HTTPVersionPolicy,
        compareLocal: Bool,
        maxTime: Duration,
        maxRedirects: Int,
        output: String,
        svg: String?,
        screenshot: String?
    ) {
        self.targets = targets
        self.versions = versions
        self.compareLocal = compareLocal
        self.maxTime = maxTime
        self.maxRedirects = maxRedirects
        self.output = output
        self.svg = svg
        self.screenshot = screenshot
    }

    /// Fetches every URL (twice with `compareLocal`), writes the page (and the SVG and PNG asked for),
    /// prints a line per request; exit status 1 when a request through HTTPDNS failed.
    package func run(resolver: ResolverOptions) async throws {
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
            let deadline = ContinuousClock.now + maxTime
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
package enum Chromium {
    /// The browser, when one is installed.
    package static var executable: String? {
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
