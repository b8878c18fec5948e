// `httpdns trace URL...`: fetches each URL through the IP-direct engine, one after another, and writes a
// self-contained HTML page with a waterfall per request (DNS, connect, TLS, waiting, download; each
// redirect hop a row of its own), drawn by HTTPDNSCommandLine's `TraceWaterfall`
// (`TraceRun` does the fetching and the drawing; this file reads the flags).
// `--compare-local` fetches every URL twice, through LocalDNS alone and through HTTPDNS, and draws the
// two side by side under a table of what each resolver answered and whether LocalDNS looked hijacked
// (the same comparison as `resolve --compare`).
// Exit status: 0 when every request through HTTPDNS got an HTTP response (the LocalDNS side of
// --compare-local may fail: that is what it shows), 1 otherwise, 23 when a file cannot be written, 64 for
// a usage error. The page is written either way.

import ArgumentParser
import HTTPDNSCommandLine
import HTTPDNSOTLP
import HTTPDNSKit
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup

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
        let run = TraceRun(
            targets: try urls.map { try HTTPURL($0) },
            versions: http11 ? .http1Only : http2 ? .http2Only : .automatic,
            compareLocal: compareLocal,
            maxTime: try seconds(maxTime, flag: "--max-time", range: 0.001...3600),
            maxRedirects: maxRedirects,
            output: output,
            svg: svg,
            screenshot: screenshot
        )
        try await tracing.exporting(logger: resolver.tracingLogger) { try await run.run(resolver: resolver) }
    }
}
