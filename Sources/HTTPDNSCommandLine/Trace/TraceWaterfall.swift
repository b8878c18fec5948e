// The `httpdns trace` picture: where each request spent its time, drawn as a waterfall the
// way a browser's network panel draws it, as SVG, and the self-contained HTML page around it.
//
// Pure: timings in, text out. A row is one HTTP exchange (a redirect hop is a row of its own); its bar
// starts where the request started, on its panel's time axis, and is cut into the phases the engine
// measures: stalled (waiting for a connection), DNS, the wait for the origin's HTTPS records, the
// re-asks of a connect whose first addresses failed or stayed silent (taken out of stalled, which holds
// them), connect, TLS, waiting for the first byte, download. The engine's `ttfbMs` and
// `totalMs` count from the request's start, so waiting is what is left of the TTFB after the three
// set-up phases, and download is the rest. Two panels side by side compare the same URLs through
// LocalDNS and through HTTPDNS. Each panel has an axis of its own: on a shared one, a hijacked LocalDNS
// that ends in a 3 s connect timeout would leave the HTTPDNS bars a pixel wide. The title line says
// how long each panel took in all, so the comparison is in figures.
//
// Readability: the colours are the Okabe–Ito palette (told apart with the common colour-vision
// deficiencies), every bar also carries its phase and duration as a tooltip, a failed request says
// "failed:" in words, not only in colour, and text is at least 12 px.

import Foundation

/// One HTTP exchange on the waterfall.
struct TraceTiming: Sendable, Equatable {
    /// The URL asked for (the redirect's target for a hop).
    var url: String
    /// When the request started, in milliseconds since the trace's first request started.
    var startMs: Double
    /// Waiting before the connection was ready that no other phase accounts for (the pool's queue).
    var stalledMs: Double?
    var dnsMs: Double?
    /// The connect's wait for the origin's HTTPS records, after the addresses.
    var recordsWaitMs: Double?
    /// The time the connect spent asking for other addresses (past the cache, the fallback) when its
    /// first ones failed or stayed silent: part of `stalledMs`, drawn apart.
    var reaskMs: Double?
    var connectMs: Double?
    var tlsMs: Double?
    /// From the request's start to the response head; nil when no head came.
    var ttfbMs: Double?
    /// From the request's start to the last body byte, or to the failure.
    var totalMs: Double?
    var ip: String?
    /// "http/1.1" or "h2".
    var protocolName: String?
    /// Who answered the name (an HTTPDNS provider, cache, LocalDNS).
    var dnsSource: String?
    var reused: Bool
    var status: Int?
    /// 0 for the URL asked for, n for the n-th redirect followed from it.
    var redirectHop: Int
    /// Why the request failed, when it did.
    var error: String?

    init(
        url: String,
        startMs: Double,
        stalledMs: Double? = nil,
        dnsMs: Double? = nil,
        recordsWaitMs: Double? = nil,
        connectMs: Double? = nil,
        tlsMs: Double? = nil,
        ttfbMs: Double? = nil,
        totalMs: Double? = nil,
        ip: String? = nil,
        protocolName: String? = nil,
        dnsSource: String? = nil,
        reused: Bool = false,
        status: Int? = nil,
        redirectHop: Int = 0,
        error: String? = nil,
        reaskMs: Double? = nil
    ) {
        self.reaskMs = reaskMs
        self.url = url
        self.startMs = startMs
        self.stalledMs = stalledMs
        self.dnsMs = dnsMs
        self.recordsWaitMs = recordsWaitMs
        self.connectMs = connectMs
        self.tlsMs = tlsMs
        self.ttfbMs = ttfbMs
        self.totalMs = totalMs
        self.ip = ip
        self.protocolName = protocolName
        self.dnsSource = dnsSource
        self.reused = reused
        self.status = status
        self.redirectHop = redirectHop
        self.error = error
    }

    /// The bar's pieces, in order, each with its offset from the request's start (ms). Phases with no
    /// time are left out.
    var segments: [(phase: TracePhase, offsetMs: Double, durationMs: Double)] {
        var result: [(TracePhase, Double, Double)] = []
        var at = 0.0
        func add(_ phase: TracePhase, _ duration: Double?) {
            guard let duration, duration > 0 else { return }
            result.append((phase, at, duration))
            at += duration
        }
        let reask = reaskMs.map { min($0, stalledMs ?? 0) }
        add(.stalled, stalledMs.map { $0 - (reask ?? 0) })
        add(.dns, dnsMs)
        add(.records, recordsWaitMs)
        add(.reask, reask)
        add(.connect, connectMs)
        add(.tls, tlsMs)
        if let ttfbMs {
            add(.waiting, ttfbMs - at)
            if let totalMs { add(.download, totalMs - max(at, ttfbMs)) }
        } else if let totalMs {
            add(error == nil ? .waiting : .failed, totalMs - at)  // no head came
        }
        return result
    }

    /// "failed: WHY", or the response's status: what the row's request came to.
    var outcome: String { error.map { "failed: " + $0 } ?? status.map(String.init) ?? "" }

    /// Where the bar ends, in ms since the trace's start.
    var endMs: Double {
        startMs + max(totalMs ?? 0, segments.last.map { $0.offsetMs + $0.durationMs } ?? 0)
    }
}

/// A phase of a request, with its name and colour on the chart.
enum TracePhase: String, Sendable, CaseIterable {
    case stalled, dns, records, reask, connect, tls, waiting, download
    /// From the request's start (or its last phase measured) to the error, when no response came.
    case failed

    var name: String {
        switch self {
        case .stalled: "stalled"
        case .dns: "DNS"
        case .records: "HTTPS records wait"
        case .reask: "re-ask (address failover)"
        case .connect: "connect"
        case .tls: "TLS"
        case .waiting: "waiting (TTFB)"
        case .download: "download"
        case .failed: "until it failed"
        }
    }

    /// Okabe–Ito colours.
    var colour: String {
        switch self {
        case .stalled: "#F0E442"  // yellow
        case .dns: "#E69F00"  // orange
        case .records: "#D55E00"  // vermillion
        case .reask: "#000000"  // black
        case .connect: "#56B4E9"  // sky blue
        case .tls: "#009E73"  // bluish green
        case .waiting: "#CC79A7"  // reddish purple
        case .download: "#0072B2"  // blue
        case .failed: "#999999"  // grey; the row also says "failed:" in words
        }
    }
}

/// One column of the chart: a title and its rows.
struct TracePanel: Sendable, Equatable {
    var title: String
    var rows: [TraceTiming]

    init(title: String, rows: [TraceTiming]) {
        self.title = title
        self.rows = rows
    }
}

/// For `--compare-local`: what LocalDNS and HTTPDNS answered for one host.
struct TraceComparison: Sendable, Equatable {
    var host: String
    /// LocalDNS's addresses, or why it gave none.
    var localDNS: Result<[String], TraceError>
    var httpdns: Result<[String], TraceError>
    /// The verdict's word (`consistent`, `hijacked`, `blocked`, `unverified`), as `resolve --compare`
    /// gives it, and the line that says why.
    var verdict: String
    var explanation: String
    /// True for the verdicts that mean LocalDNS cannot be trusted (shown in red).
    var alarming: Bool

    init(
        host: String,
        localDNS: Result<[String], TraceError>,
        httpdns: Result<[String], TraceError>,
        verdict: String,
        explanation: String,
        alarming: Bool
    ) {
        self.host = host
        self.localDNS = localDNS
        self.httpdns = httpdns
        self.verdict = verdict
        self.explanation = explanation
        self.alarming = alarming
    }
}

/// An error as text, for a comparison that could not get an answer.
struct TraceError: Error, Sendable, Equatable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// The waterfall as SVG, and the page around it.
struct TraceWaterfall: Sendable {
    var panels: [TracePanel]

    init(panels: [TracePanel]) { self.panels = panels }

    // Layout, in px. Panels are stacked, one under the other, so the page fits a 1280 px window
    // whatever the number of panels (two side by side needed 1660 px).
    static let labelWidth = 330.0
    static let barsWidth: Double = 470
    static let panelWidth = labelWidth + barsWidth + 290
    static let panelGap = 24.0
    static let rowHeight = 40.0
    static let legendHeight = 30.0
    /// From a panel's top to its title's baseline, and to its first row.
    static let titleOffset = 26.0
    static let rowsOffset = 48.0
    static let axisHeight = 44.0
    static let margin = 12.0

    var panelWidth: Double { Self.panelWidth }
    var chartWidth: Double { panelWidth - Self.labelWidth - 64 }  // room for the duration after a bar
    func panelHeight(_ panel: TracePanel) -> Double {
        Self.rowsOffset + Double(max(panel.rows.count, 1)) * Self.rowHeight + Self.axisHeight
    }
    /// Where each panel starts, from the top.
    var panelTops: [Double] {
        var tops: [Double] = []
        var y = Self.legendHeight
        for panel in panels {
            tops.append(y)
            y += panelHeight(panel) + Self.panelGap
        }
        return tops
    }
    var width: Double { Self.margin * 2 + panelWidth }
    var height: Double {
        Self.legendHeight + panels.map { panelHeight($0) + Self.panelGap }.reduce(0, +) - Self.panelGap + Self.margin
    }

    /// A panel's axis end and tick step: the smallest 1-2-5 step (1 µs to 10,000 s) giving at most 6
    /// intervals.
    static func scale(_ panel: TracePanel) -> (endMs: Double, stepMs: Double) {
        let longest = max(panel.rows.map(\.endMs).filter(\.isFinite).max() ?? 0, 0.001)
        var step = 1e7
        search: for exponent in -3...7 {
            for mantissa in [1.0, 2, 5] where longest / (mantissa * pow(10, Double(exponent))) <= 6 {
                step = mantissa * pow(10, Double(exponent))
                break search
            }
        }
        return ((longest / step).rounded(.up) * step, step)
    }

    /// The chart as a standalone SVG document.
    func svg() -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svgElement()
    }

    /// The `<svg>` element (also inlined in the page).
    func svgElement() -> String {
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(fmt(width))" height="\(fmt(height))" \
            viewBox="0 0 \(fmt(width)) \(fmt(height))" role="img" font-family="DejaVu Sans, Arial, sans-serif" \
            font-size="13">
            <title>Where each request spent its time</title>
            <rect width="100%" height="100%" fill="#ffffff"/>

            """
        out += legend()
        for (panel, top) in zip(panels, panelTops) {
            let (endMs, stepMs) = Self.scale(panel)
            out += self.panel(panel, x: Self.margin, top: top, endMs: endMs, stepMs: stepMs)
        }
        return out + "</svg>\n"
    }

    func legend() -> String {
        var out = "<g class=\"legend\" transform=\"translate(\(fmt(Self.margin)),20)\">\n"
        var x = 0.0
        for phase in TracePhase.allCases {
            out += "<rect x=\"\(fmt(x))\" y=\"-11\" width=\"14\" height=\"14\" fill=\"\(phase.colour)\"/>"
            out += "<text x=\"\(fmt(x + 20))\" y=\"1\">\(xmlEscaped(phase.name))</text>\n"
            x += 36 + Double(phase.name.count) * 8.4
        }
        out +=
            "<text x=\"\(fmt(x + 8))\" y=\"1\" fill=\"#555555\">times in ms; bars start when the request did</text>\n"
        return out + "</g>\n"
    }

    func panel(_ panel: TracePanel, x: Double, top: Double, endMs: Double, stepMs: Double) -> String {
        let barsX = x + Self.labelWidth
        let rowsTop = top + Self.rowsOffset
        let rowsBottom = rowsTop + Double(max(panel.rows.count, 1)) * Self.rowHeight
        let px = chartWidth / endMs
        var out = "<g class=\"panel\" data-title=\"\(xmlEscaped(panel.title))\">\n"
        let inAll = panel.rows.map(\.endMs).max().map { " — \(number($0)) ms in all" } ?? ""
        out += "<text x=\"\(fmt(x))\" y=\"\(fmt(top + Self.titleOffset))\" font-size=\"15\" font-weight=\"bold\">"
        out += "\(xmlEscaped(shortened(panel.title, to: 60)))<tspan font-weight=\"normal\">\(inAll)</tspan>"
        out += "<title>\(xmlEscaped(panel.title))</title></text>\n"
        // Grid and axis.
        for i in 0...Int(min((endMs / stepMs).rounded(), 100)) {
            let tick = Double(i) * stepMs
            let tx = barsX + tick * px
            out += "<line x1=\"\(fmt(tx))\" y1=\"\(fmt(rowsTop - 6))\" x2=\"\(fmt(tx))\" y2=\"\(fmt(rowsBottom))\" "
            out += "stroke=\"#dddddd\" stroke-width=\"1\"/>"
            out += "<text x=\"\(fmt(tx))\" y=\"\(fmt(rowsBottom + 16))\" text-anchor=\"middle\" font-size=\"12\">"
            out += "\(number(tick))</text>\n"
        }
        out += "<line x1=\"\(fmt(barsX))\" y1=\"\(fmt(rowsBottom))\" x2=\"\(fmt(barsX + chartWidth))\" "
        out += "y2=\"\(fmt(rowsBottom))\" stroke=\"#333333\" stroke-width=\"1\"/>\n"
        out += "<text x=\"\(fmt(barsX + chartWidth / 2))\" y=\"\(fmt(rowsBottom + 34))\" text-anchor=\"middle\" "
        out += "font-size=\"12\">milliseconds since the first request started</text>\n"
        if panel.rows.isEmpty {
            out += "<text x=\"\(fmt(x))\" y=\"\(fmt(rowsTop + 24))\" fill=\"#555555\">no requests</text>\n"
        }
        for (index, row) in panel.rows.enumerated() {
            out += self.row(row, index: index, x: x, barsX: barsX, y: rowsTop + Double(index) * Self.rowHeight, px: px)
        }
        return out + "</g>\n"
    }

    func row(_ row: TraceTiming, index: Int, x: Double, barsX: Double, y: Double, px: Double) -> String {
        var out = "<g class=\"request\" data-url=\"\(xmlEscaped(row.url))\">\n"
        if index % 2 == 1 {
            out +=
                "<rect x=\"\(fmt(x))\" y=\"\(fmt(y))\" width=\"\(fmt(panelWidth))\" height=\"\(fmt(Self.rowHeight))\" "
            out += "fill=\"#f4f4f4\"/>\n"
        }
        let indent = row.redirectHop > 0 ? "↪ " : ""
        out += "<text x=\"\(fmt(x + 4))\" y=\"\(fmt(y + 16))\">\(xmlEscaped(indent + shortened(row.url, to: 40)))"
        out += "<title>\(xmlEscaped(row.url))</title></text>\n"
        let detail = row.error == nil ? summary(row) : row.outcome
        out += "<text x=\"\(fmt(x + 4))\" y=\"\(fmt(y + 33))\" font-size=\"12\" "
        out += "fill=\"\(row.error == nil ? "#444444" : "#a00000")\">\(xmlEscaped(shortened(detail, to: 44)))"
        out += "<title>\(xmlEscaped(detail))</title></text>\n"
        let barY = y + 12
        for segment in row.segments {
            let sx = barsX + (row.startMs + segment.offsetMs) * px
            let w = max(segment.durationMs * px, 1)
            out += "<rect class=\"phase \(segment.phase.rawValue)\" x=\"\(fmt(sx))\" y=\"\(fmt(barY))\" "
            out += "width=\"\(fmt(w))\" height=\"16\" fill=\"\(segment.phase.colour)\">"
            out += "<title>\(xmlEscaped(segment.phase.name)) \(number(segment.durationMs)) ms</title></rect>\n"
        }
        let end = barsX + row.endMs * px
        let total = row.totalMs.map { "\(number($0)) ms" } ?? ""
        out += "<text x=\"\(fmt(end + 5))\" y=\"\(fmt(barY + 13))\" font-size=\"12\">"
        out += "\(row.error == nil ? total : "✕ " + total)</text>\n"
        return out + "</g>\n"
    }

    /// "127.0.0.1 · h2 · 200 · reused · doh:…".
    func summary(_ row: TraceTiming) -> String {
        var parts: [String] = []
        if let ip = row.ip { parts.append(ip) }
        if let p = row.protocolName { parts.append(p) }
        if let status = row.status { parts.append(String(status)) }
        if row.reused { parts.append("reused") }
        if let source = row.dnsSource { parts.append(source) }
        return parts.joined(separator: " · ")
    }

    /// The page: title, what LocalDNS and HTTPDNS answered (when compared), the chart, and a table of
    /// every figure. Self-contained: no scripts, no links, nothing fetched.
    func html(title: String, subtitle: String, comparisons: [TraceComparison]) -> String {
        var out = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <title>\(xmlEscaped(title))</title>
            <style>
            body { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 14px; margin: 16px; color: #111; }
            h1 { font-size: 20px; margin: 0 0 4px 0; }
            p.sub { color: #444; margin: 0 0 12px 0; }
            figure { margin: 12px 0; }
            figure svg { max-width: 100%; height: auto; }
            table { border-collapse: collapse; margin: 12px 0; max-width: 100%; }
            th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 13px; }
            td { overflow-wrap: anywhere; }
            th { background: #f0f0f0; }
            td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; overflow-wrap: normal; }
            .hijacked { color: #a00000; font-weight: bold; }
            .clean { color: #005a32; }
            .unknown { color: #555; }
            </style>
            </head>
            <body>
            <h1>\(xmlEscaped(title))</h1>
            <p class="sub">\(xmlEscaped(subtitle))</p>

            """
        if !comparisons.isEmpty {
            out += "<table class=\"comparison\">\n<tr><th>host</th><th>LocalDNS answered</th>"
            out += "<th>HTTPDNS answered</th><th>verdict</th></tr>\n"
            for c in comparisons {
                out += "<tr><td>\(xmlEscaped(c.host))</td><td>\(xmlEscaped(answer(c.localDNS)))</td>"
                out += "<td>\(xmlEscaped(answer(c.httpdns)))</td>"
                let cell = c.alarming ? "hijacked" : c.verdict == "consistent" ? "clean" : "unknown"
                out += "<td class=\"\(cell)\">\(xmlEscaped(c.explanation))</td></tr>\n"
            }
            out += "</table>\n"
        }
        out += "<figure>\n" + svgElement() + "</figure>\n"
        out += "<table class=\"figures\">\n<tr><th>panel</th><th>URL</th><th>address</th><th>protocol</th>"
        out += "<th>status</th><th>stalled</th><th>DNS</th><th>HTTPS records wait</th><th>connect</th><th>TLS</th>"
        out += "<th>TTFB</th><th>total</th>"
        out += "<th>reused</th><th>DNS from</th></tr>\n"
        for panel in panels {
            for row in panel.rows {
                out += "<tr><td>\(xmlEscaped(panel.title))</td><td>\(xmlEscaped(row.url))</td>"
                out += "<td>\(xmlEscaped(row.ip ?? ""))</td><td>\(xmlEscaped(row.protocolName ?? ""))</td>"
                out += "<td>\(xmlEscaped(row.outcome))</td>"
                for value in [
                    row.stalledMs, row.dnsMs, row.recordsWaitMs, row.connectMs, row.tlsMs, row.ttfbMs, row.totalMs,
                ] {
                    out += "<td class=\"num\">\(value.map(number) ?? "")</td>"
                }
                out += "<td>\(row.reused ? "yes" : "no")</td><td>\(xmlEscaped(row.dnsSource ?? ""))</td></tr>\n"
            }
        }
        return out + "</table>\n</body>\n</html>\n"
    }

    func answer(_ result: Result<[String], TraceError>) -> String {
        switch result {
        case .success(let addresses): addresses.isEmpty ? "no address" : addresses.joined(separator: ", ")
        case .failure(let error): "no answer: " + error.message
        }
    }
}

/// `s` cut to `limit` characters with an ellipsis.
func shortened(_ s: String, to limit: Int) -> String {
    s.count <= limit ? s : s.prefix(limit - 1) + "…"
}

/// Text made safe for XML and HTML content and attribute values.
func xmlEscaped(_ s: String) -> String {
    var out = ""
    out.reserveCapacity(s.utf8.count)
    for c in s.unicodeScalars {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        // XML 1.0 forbids most control characters, even escaped: drop them.
        case "\t", "\n", "\r": out.unicodeScalars.append(c)
        case _ where c.value < 0x20 || (0xFFFE...0xFFFF).contains(c.value): continue
        default: out.unicodeScalars.append(c)
        }
    }
    return out
}

/// A coordinate with at most two decimals.
private func fmt(_ v: Double) -> String { String(format: "%.2f", v) }

/// A duration or tick for people: "0.4", "12.3", "1250".
private func number(_ ms: Double) -> String {
    ms == 0
        ? "0"
        : ms >= 100 ? String(format: "%.0f", ms) : ms >= 10 ? String(format: "%.1f", ms) : String(format: "%.2f", ms)
}
