// The trace waterfall's rules, without a network: how a request's timings become bars, the shared time
// axis, escaping, and that the SVG is well-formed XML with one row per request.

import Foundation
import Testing

@testable import HTTPDNSCommandLine

#if canImport(FoundationXML)
    import FoundationXML
#endif

@Suite struct TraceWaterfallTests {
    let fresh = TraceTiming(
        url: "https://a.test:8443/",
        startMs: 0,
        dnsMs: 2,
        connectMs: 1,
        tlsMs: 3,
        ttfbMs: 10,
        totalMs: 15,
        ip: "127.0.0.1",
        protocolName: "h2",
        dnsSource: "doh:https://127.0.0.1:8473/dns-query",
        status: 200
    )

    func phases(_ t: TraceTiming) -> [String] {
        t.segments.map { "\($0.phase.rawValue) \($0.offsetMs)+\($0.durationMs)" }
    }

    @Test func aNewConnectionIsCutIntoEveryPhaseInOrder() {
        #expect(
            phases(fresh) == ["dns 0.0+2.0", "connect 2.0+1.0", "tls 3.0+3.0", "waiting 6.0+4.0", "download 10.0+5.0"]
        )
        #expect(fresh.endMs == 15)
    }

    @Test func aFailoversReAsksAreTakenOutOfStalledAndDrawnBeforeTheConnect() {
        // A remembered address that stayed silent: 250 ms of attempt delay and a 100 ms lookup past the
        // cache, all before the new address's connect; 350 ms stalled in all, 100 of them the re-ask.
        var moved = fresh
        moved.stalledMs = 350
        moved.reaskMs = 100
        moved.ttfbMs = 360
        moved.totalMs = 365
        #expect(
            phases(moved) == [
                "stalled 0.0+250.0", "dns 250.0+2.0", "reask 252.0+100.0", "connect 352.0+1.0", "tls 353.0+3.0",
                "waiting 356.0+4.0", "download 360.0+5.0",
            ]
        )
    }

    @Test func theWaitsBeforeTheConnectHaveBarsOfTheirOwn() {
        // A relaunch on port 443 whose HTTPS records came late: the 50 ms the connect waited for them
        // is its own phase, not part of the server's wait (issue 63: a 619 ms TTFB with nothing in it).
        var t = fresh
        t.stalledMs = 1
        t.recordsWaitMs = 50
        t.ttfbMs = 70
        t.totalMs = 75
        #expect(
            phases(t) == [
                "stalled 0.0+1.0", "dns 1.0+2.0", "records 3.0+50.0", "connect 53.0+1.0", "tls 54.0+3.0",
                "waiting 57.0+13.0", "download 70.0+5.0",
            ]
        )
        let html = TraceWaterfall(panels: [TracePanel(title: "HTTPDNS", rows: [t])])
            .html(title: "trace", subtitle: "", comparisons: [])
        #expect(html.contains("HTTPS records wait"))
        #expect(html.contains(TracePhase.records.colour))
    }

    @Test func aReusedConnectionHasOnlyWaitingAndDownload() {
        let t = TraceTiming(url: "https://a.test/", startMs: 20, ttfbMs: 4, totalMs: 5, reused: true, status: 200)
        #expect(phases(t) == ["waiting 0.0+4.0", "download 4.0+1.0"])
        #expect(t.endMs == 25)
    }

    @Test func aFailureWithoutAResponseIsOneGreyBarUntilTheError() {
        let t = TraceTiming(url: "https://a.test/", startMs: 0, totalMs: 7, error: "certificate for a.test")
        #expect(phases(t) == ["failed 0.0+7.0"])
        let svg = TraceWaterfall(panels: [TracePanel(title: "p", rows: [t])]).svg()
        #expect(svg.contains("failed: certificate for a.test"))
        #expect(svg.contains(TracePhase.failed.colour))
    }

    @Test func phasesLongerThanTheTotalNeverGoNegative() {
        // Clocks read in different places can disagree by a little: no negative or zero-width phase.
        let t = TraceTiming(url: "u", startMs: 0, dnsMs: 5, connectMs: 5, ttfbMs: 8, totalMs: 8)
        #expect(phases(t) == ["dns 0.0+5.0", "connect 5.0+5.0"])
        #expect(t.endMs == 10)
    }

    @Test func theAxisEndsOnAOneTwoFiveStepAtOrPastTheLongestBar() {
        let scale = TraceWaterfall.scale(
            TracePanel(title: "p", rows: [fresh, .init(url: "u", startMs: 100, totalMs: 37)])
        )
        #expect(scale.stepMs == 50)
        #expect(scale.endMs == 150)
        #expect(
            TraceWaterfall.scale(TracePanel(title: "p", rows: [.init(url: "u", startMs: 0, totalMs: 0.27)])).stepMs
                == 0.05
        )
        #expect(TraceWaterfall.scale(TracePanel(title: "p", rows: [])).endMs > 0)
    }

    @Test func stackedPanelsHaveTheirOwnAxesAndSayHowLongEachTookInAll() {
        // A hijacked LocalDNS ending in a 900 ms failure next to a 15 ms HTTPDNS request: on one axis
        // the second bar would be a pixel wide.
        let slow = TraceTiming(url: "https://a.test/", startMs: 0, totalMs: 900, error: "timed out")
        let chart = TraceWaterfall(panels: [
            TracePanel(title: "LocalDNS", rows: [slow]), TracePanel(title: "HTTPDNS", rows: [fresh]),
        ])
        let svg = chart.svg()
        #expect(svg.components(separatedBy: "class=\"panel\"").count - 1 == 2)
        #expect(svg.contains(">1000</text>"), "the LocalDNS axis runs to 1000 ms")
        #expect(svg.contains(">15.0</text>") || svg.contains(">16.0</text>"), "the HTTPDNS axis runs to about 15 ms")
        #expect(svg.contains(" — 900 ms in all"))
        #expect(svg.contains(" — 15.0 ms in all"))
        // Stacked, not side by side: as wide as one panel (it fits a 1280 px window), twice as tall.
        let one = TraceWaterfall(panels: [TracePanel(title: "HTTPDNS", rows: [fresh])])
        #expect(chart.width == one.width && chart.width + 32 <= 1280)
        #expect(chart.height > one.height * 1.5)
    }

    @Test func textFromTheNetworkIsEscaped() {
        let hostile = TraceTiming(
            url: "https://a.test/<script>alert(1)</script>?a=1&b=\"2\"",
            startMs: 0,
            totalMs: 1,
            error: "bad <b>\u{1}"
        )
        let page = TraceWaterfall(panels: [TracePanel(title: "p", rows: [hostile])]).html(
            title: "t",
            subtitle: "s",
            comparisons: []
        )
        #expect(!page.contains("<script>"))
        #expect(page.contains("&lt;script&gt;"))
        #expect(page.contains("a=1&amp;b=&quot;2&quot;"))
        #expect(!page.contains("\u{1}"))
    }

    @Test func theSVGIsWellFormedXMLWithOneRowPerRequest() throws {
        let rows = [
            fresh,
            TraceTiming(
                url: "https://b.test/&x",
                startMs: 16,
                ttfbMs: 2,
                totalMs: 3,
                reused: true,
                status: 302,
                redirectHop: 1
            ),
        ]
        let svg = TraceWaterfall(panels: [TracePanel(title: "through HTTPDNS", rows: rows)]).svg()
        let counter = ElementCounter()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = counter
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        #expect(counter.requests == 2)
        #expect(counter.root == "svg")
    }

    @Test func thePageSaysWhetherLocalDNSWasHijackedAndHasNoScript() {
        let comparisons = [
            TraceComparison(
                host: "a.test",
                localDNS: .success(["127.0.0.66"]),
                httpdns: .success(["127.0.0.1"]),
                verdict: "hijacked",
                explanation: "hijacked: LocalDNS answered other or private addresses",
                alarming: true
            ),
            TraceComparison(
                host: "b.test",
                localDNS: .failure(TraceError("timed out")),
                httpdns: .success(["127.0.0.1"]),
                verdict: "blocked",
                explanation: "blocked: LocalDNS gave no address, HTTPDNS did",
                alarming: true
            ),
            TraceComparison(
                host: "c.test",
                localDNS: .success(["127.0.0.1"]),
                httpdns: .success(["127.0.0.1"]),
                verdict: "consistent",
                explanation: "consistent",
                alarming: false
            ),
        ]
        let page = TraceWaterfall(panels: [TracePanel(title: "p", rows: [fresh])]).html(
            title: "t",
            subtitle: "s",
            comparisons: comparisons
        )
        #expect(page.contains("<td>127.0.0.66</td>"))
        #expect(page.contains("<td class=\"hijacked\">hijacked: LocalDNS answered other or private addresses</td>"))
        #expect(page.contains("<td class=\"hijacked\">blocked: LocalDNS gave no address, HTTPDNS did</td>"))
        #expect(page.contains("<td class=\"clean\">consistent</td>"))
        #expect(page.contains("no answer: timed out"))
        #expect(!page.lowercased().contains("<script"))
    }
}

/// Counts `<g class="request">` elements and notes the root element.
final class ElementCounter: NSObject, XMLParserDelegate {
    var requests = 0
    var root: String?

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if root == nil { root = elementName }
        if elementName == "g", attributes["class"] == "request" { requests += 1 }
    }
}
