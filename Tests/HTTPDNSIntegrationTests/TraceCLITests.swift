// `httpdns trace` as a user runs it against the real peers (nginx, kresd's DoH, dnsmasq hijacking
// LocalDNS), its page opened in a real browser: headless Chromium renders it to a PNG, and the DOM
// Chromium built must hold one row per request with nothing logged on the console; xmllint checks the
// SVG. Chromium is heavy for 2 cores, so scripts/test.sh runs this suite with the other Chromium one,
// after everything else.

import Foundation
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct ChromiumTraceTests {
    @Test func compareLocalDrawsBothPathsAndChromiumRendersOneRowPerRequest() async throws {
        let peers = try Peers.require()
        let browser = try #require(chromiumBinary, "chromium is not installed (scripts/test.sh installs it)")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-trace-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = dir.appendingPathComponent("trace.html").path
        let svg = dir.appendingPathComponent("trace.svg").path
        let png = dir.appendingPathComponent("trace.png").path

        // /r/to-b answers 302 to b.test: through HTTPDNS that is two rows (the hop re-resolved), and
        // through the hijacking LocalDNS (127.0.0.66, 100::66) each URL is one failed row.
        let r = try await runCLI([
            "trace", peers.url("a.test", "/whoami"), peers.url("a.test", "/r/to-b"), "--compare-local",
            "-o", page, "--svg", svg, "--screenshot", png,
            "--cacert", peers.ca, "--resolver", "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query",
            "--local-dns", "dns:127.0.0.2:\(peers.hijacker.1)", "--timeout", "3", "--max-time", "10",
        ])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        let httpdnsRows = lines.filter { $0.hasPrefix("httpdns") }
        let localRows = lines.filter { $0.hasPrefix("local") }
        #expect(httpdnsRows.count == 3, "\(r.stdout)")
        #expect(httpdnsRows.allSatisfy { $0.contains(" 200 ") || $0.contains(" 302 ") }, "\(r.stdout)")
        #expect(localRows.count == 2, "\(r.stdout)")
        #expect(localRows.allSatisfy { $0.contains("failed:") }, "\(r.stdout)")

        // The page says LocalDNS was hijacked and what it answered.
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("127.0.0.66"))
        #expect(html.contains("hijacked: LocalDNS answered other or private addresses"))
        #expect(!html.lowercased().contains("<script"))
        // The host table lists every host the requests reached: b.test is only a redirect's target.
        #expect(html.contains("<tr><td>a.test</td>") && html.contains("<tr><td>b.test</td>"), "\(html.prefix(1500))")

        // The SVG alone is well-formed XML (xmllint), with the same rows.
        let lint = try await runProcess("/usr/bin/xmllint", ["--noout", svg])
        #expect(lint.status == 0, "\(lint.stderr)")
        let svgText = try String(contentsOfFile: svg, encoding: .utf8)
        #expect(svgText.components(separatedBy: "class=\"request\"").count - 1 == 5)

        // Chromium's own rendering: a PNG of a real size, and the DOM it built holds one row per request.
        let pngData = try Data(contentsOf: URL(fileURLWithPath: png))
        #expect(pngData.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        let width = pngData[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let height = pngData[20..<24].reduce(0) { $0 << 8 | Int($1) }
        #expect(width >= 1000 && height >= 400, "\(width)x\(height)")

        let profile = dir.appendingPathComponent("profile").path
        let dom = try await runProcess(
            browser,
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile,
                "--enable-logging=stderr", "--v=0", "--dump-dom", URL(fileURLWithPath: page).absoluteString,
            ]
        )
        #expect(dom.status == 0, "\(dom.stderr.suffix(800))")
        #expect(dom.stdout.components(separatedBy: "class=\"request\"").count - 1 == 5, "\(dom.stdout.prefix(400))")
        #expect(dom.stdout.components(separatedBy: "class=\"panel\"").count - 1 == 2)
        // A page with no script has nothing to log; any console line is an error in the page
        // (a parse or resource problem).
        let console = dom.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE(") || $0.contains("CONSOLE:") }
        #expect(console.isEmpty, "\(console)")

        // It fits a 1280 px window: a copy of the page with a script that writes the document's scroll
        // width into the DOM, laid out by Chromium at 1280 x 900 (the page itself has no script).
        let measured = dir.appendingPathComponent("measured.html")
        let probe =
            "<script>document.body.setAttribute('data-scroll-width', "
            + "String(document.documentElement.scrollWidth));</script></body>"
        try Data(html.replacingOccurrences(of: "</body>", with: probe).utf8).write(to: measured)
        let layout = try await runProcess(
            browser,
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile + "-1280",
                "--window-size=1280,900", "--hide-scrollbars", "--dump-dom", measured.absoluteString,
            ]
        )
        let scrollWidth = layout.stdout.components(separatedBy: "data-scroll-width=\"").dropFirst().first
            .flatMap { Int($0.prefix { $0.isNumber }) }
        let pageWidth = try #require(scrollWidth, "\(layout.stdout.prefix(300)) \(layout.stderr.suffix(300))")
        #expect(pageWidth <= 1280, "the page is \(pageWidth) px wide at a 1280 px window")
    }

    @Test func aURLThatFailsThroughHTTPDNSStillWritesThePageAndExitsOne() async throws {
        let peers = try Peers.require()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-trace-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = dir.appendingPathComponent("trace.html").path
        // nothing.test has no address at kresd, and --no-fallback keeps LocalDNS out of it.
        let r = try await runCLI([
            "trace", peers.url("a.test", "/whoami"), peers.url("nothing.test", "/"), "-o", page, "--timeout", "2",
            "--cacert", peers.ca, "--resolver", "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query", "--no-fallback",
        ])
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.components(separatedBy: "class=\"request\"").count - 1 == 2)
        #expect(html.contains("failed: "))
        // The failure names the host once ("could not resolve nothing.test: nothing.test: …" said it twice).
        let failure = try #require(r.stdout.split(separator: "\n").first { $0.contains("failed:") })
        let failureText = failure[try #require(failure.range(of: "failed:")).upperBound...]
        #expect(failureText.components(separatedBy: "nothing.test").count - 1 == 1, "\(failure)")
        // A usage error names the flag and exits 64.
        let usage = try await runCLI(["trace", "ftp://a.test/"])
        #expect(usage.status == 64)
        #expect(usage.stderr.contains("ftp://a.test/"), "\(usage.stderr)")
    }
}
