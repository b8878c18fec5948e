// Traces the ecosystem can read: `--otlp-endpoint` sends spans over OTLP/HTTP, and a real
// decoder (OpenTelemetry's own proto classes, Tests/Fixtures/peers/otlp_receiver.py) reads them. One
// fetch is one trace holding its resolve span and its client span; `httpdns serve` gives a SERVER span
// per request, in the fetch's trace when the fetch carried its context.

import Foundation
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One span as the receiver decoded it.
struct ExportedSpan {
    var service: String
    var traceID: String
    var spanID: String
    var parentID: String
    var name: String
    var kind: String
    var attributes: [String: Any]
    var events: [String]

    /// Every span the receiver has decoded so far; fails on a body it could not decode.
    static func all(in file: String) throws -> [ExportedSpan] {
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { line in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            try #require(o["error"] == nil, "the OTLP receiver could not decode an export: \(o["error"]!)")
            return ExportedSpan(
                service: o["service"] as? String ?? "",
                traceID: o["trace_id"] as? String ?? "",
                spanID: o["span_id"] as? String ?? "",
                parentID: o["parent_span_id"] as? String ?? "",
                name: o["name"] as? String ?? "",
                kind: o["kind"] as? String ?? "",
                attributes: o["attributes"] as? [String: Any] ?? [:],
                events: (o["events"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            )
        }
    }

    subscript(_ key: String) -> String? {
        attributes[key].map { "\($0)" }
    }
}

@Suite(.serialized, .enabled(if: Peers.shouldRun, "real peers not running (scripts/test.sh starts them)"))
struct TracingCLITests {
    @Test func oneFetchIsOneTraceAndServeJoinsIt() async throws {
        let peers = try Peers.require()
        let dir = try temporaryDirectory()
        let hosts = dir.appendingPathComponent("hosts").path
        try "127.0.0.1 a.test\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let serve = try await ServeProcess.launch(
            ["--listen", "127.0.0.1:0", "--hosts", hosts, "--otlp-endpoint", peers.otlpEndpoint]
        )
        defer { serve.signal(SIGKILL) }
        // The fetch's spans are found by their service name, unique to this run.
        let service = "fetch-\(UUID())"
        let r = try await runCLI(
            [
                "fetch", "http://a.test:\(serve.port)/healthz", "--resolver", "dnspod:http://127.0.0.1:\(serve.port)/d",
                "--no-fallback", "--otlp-endpoint", peers.otlpEndpoint,
            ],
            environment: ["OTEL_SERVICE_NAME": service]
        )
        #expect(r.status == 0, "\(r.stderr)")
        // The fetch exports before it exits: its spans are there now.
        let mine = try ExportedSpan.all(in: peers.otlpSpans).filter { $0.service == service }
        let client = try #require(mine.first { $0.kind == "CLIENT" }, "no CLIENT span among \(mine.map(\.name))")
        let resolve = try #require(mine.first { $0.name == "resolve" }, "no resolve span among \(mine.map(\.name))")
        #expect(mine.count == 2 && Set(mine.map(\.traceID)).count == 1, "one trace: \(mine.map(\.name))")
        #expect(client.name == "GET" && client.parentID.isEmpty)
        #expect(client["http.request.method"] == "GET")
        #expect(client["server.address"] == "a.test")
        #expect(client["server.port"] == "\(serve.port)")
        #expect(client["network.peer.address"] == "127.0.0.1")
        #expect(client["http.response.status_code"] == "200")
        #expect(client["network.protocol.version"] == "1.1")
        #expect(client.events == ["connect", "first byte"], "\(client.events)")
        #expect(resolve.parentID == client.spanID && resolve.kind == "INTERNAL")
        #expect(resolve["dns.question.name"] == "a.test")
        #expect(resolve["httpdns.source"] == "dnspod:http://127.0.0.1:\(serve.port)/d")
        #expect(resolve["httpdns.cache"] == "miss")

        // serve exports as it drains: its SERVER spans, the fetch's request among them as a child of the
        // fetch's client span (the fetch sent `traceparent`), and the resolver's query in a trace of its own.
        serve.signal(SIGTERM)
        #expect(try await serve.exitStatus() == 0)
        let served = try ExportedSpan.all(in: peers.otlpSpans).filter { $0.kind == "SERVER" }
        let joined = try #require(
            served.first { $0.traceID == client.traceID },
            "no SERVER span in the fetch's trace among \(served.map(\.name))"
        )
        #expect(joined.name == "GET /healthz" && joined.parentID == client.spanID)
        #expect(joined["http.route"] == "/healthz" && joined["http.response.status_code"] == "200")
        #expect(joined["url.scheme"] == "http" && joined["network.protocol.version"] == "1.1")
        let query = try #require(served.first { $0.name == "GET /d" && $0.traceID != client.traceID })
        #expect(query["http.route"] == "/d" && query.parentID.isEmpty)
    }

    /// Over TLS and HTTP/2 to nginx through kresd's DoH: the handshake is an event, the version is 2, and
    /// `httpdns trace` exports the same spans as fetch.
    @Test func traceExportsTLSAndHTTP2Spans() async throws {
        let peers = try Peers.require()
        let service = "trace-\(UUID())"
        let dir = try temporaryDirectory()
        let r = try await runCLI(
            [
                "trace", peers.url("a.test", "/whoami"), "--http2", "-o", dir.appendingPathComponent("t.html").path,
                "--cacert", peers.ca, "--resolver", "doh:https://127.0.0.1:\(peers.doh2Port)/dns-query",
                "--no-fallback", "--otlp-endpoint", peers.otlpEndpoint,
            ],
            environment: ["OTEL_SERVICE_NAME": service]
        )
        #expect(r.status == 0, "\(r.stderr)")
        let mine = try ExportedSpan.all(in: peers.otlpSpans).filter { $0.service == service }
        let client = try #require(mine.first { $0.kind == "CLIENT" }, "no CLIENT span among \(mine.map(\.name))")
        #expect(client["network.protocol.version"] == "2")
        #expect(client.events == ["connect", "tls", "first byte"], "\(client.events)")
        let resolve = try #require(mine.first { $0.name == "resolve" })
        #expect(resolve.parentID == client.spanID && resolve["httpdns.cache"] == "miss")
        #expect(resolve["httpdns.source"]?.hasPrefix("doh:https://127.0.0.1:") == true)
    }

    @Test func aCollectorURLThatIsNotOneIsRefused() async throws {
        let r = try await runCLI(["fetch", "http://a.test/", "--otlp-endpoint", "localhost:4318"])
        #expect(r.status == 64, "\(r.status) \(r.stderr)")
        #expect(r.stderr.contains("--otlp-endpoint: give the collector's http:// or https:// URL"), "\(r.stderr)")
    }
}
