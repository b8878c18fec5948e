// Spans through swift-distributed-tracing, hermetic: an in-process DNS server and origin, and
// swift-distributed-tracing's InMemoryTracer standing in for a backend. The OTLP export and a real
// decoder are HTTPDNSIntegrationTests/TracingCLITests.

import Foundation
import HTTPDNSKit
import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import InMemoryTracing
import NIOCore
import Testing
import Tracing

@Suite struct TracingTests {
    /// An `HTTPDNS` over an in-process DNS server (127.0.0.1 for every `.test` name) that traces into
    /// `tracer`, and an origin that answers with the trace context it received.
    func withTracedHTTPDNS(
        _ tracer: (any Tracer)?,
        propagates: Bool = false,
        _ body: (HTTPDNS, _ origin: Int) async throws -> Void
    ) async throws {
        let dns = try await startDNS(["127.0.0.1"])
        let origin = try await HTTPFixtureServer.start { path, _, headers in
            let status: HTTPResponseStatus = path == "/missing" ? .notFound : .ok
            return (status, "text/plain", Array((headers.first(name: InMemoryTracer.traceIDKey) ?? "none").utf8))
        }
        var configuration = HTTPDNS.Configuration(
            resolvers: [try ResolverSpec(parsing: "dns:127.0.0.1:\(dns.port)")],
            policy: try HostPolicy(only: ["*.test"])
        )
        // Not a test of timeouts: a bound a starved 2-core machine cannot miss.
        configuration.timeouts.lookup = .seconds(60)
        configuration.tracing.tracer = tracer
        configuration.tracing.propagatesContext = propagates
        let httpdns = try HTTPDNS(configuration)
        do {
            try await body(httpdns, origin.port)
        } catch {
            await httpdns.shutdown()
            await origin.stop()
            await dns.stop()
            throw error
        }
        await httpdns.shutdown()
        await origin.stop()
        await dns.stop()
    }

    @Test func aRequestIsAClientSpanHoldingItsLookupInTheCallersTrace() async throws {
        let tracer = InMemoryTracer()
        var port = 0
        try await withTracedHTTPDNS(tracer) { httpdns, origin in
            port = origin
            try await tracer.withSpan("app") { _ in
                let response = try await httpdns.engine.send(
                    try HTTPEngineRequest(url: "http://app.test:\(port)/a?token=x")
                )
                _ = try await response.body.collect(upTo: 1 << 16)
            }
        }
        let spans = tracer.finishedSpans
        let app = try #require(spans.first { $0.operationName == "app" })
        let client = try #require(spans.first { $0.kind == .client }, "\(spans.map(\.operationName))")
        let resolve = try #require(spans.first { $0.operationName == "resolve" })
        #expect(client.operationName == "GET" && client.parentSpanID == app.spanID && client.traceID == app.traceID)
        #expect(client.attributes.get("http.request.method") == .string("GET"))
        #expect(client.attributes.get("server.address") == .string("app.test"))
        #expect(client.attributes.get("server.port") == .int64(Int64(port)))
        #expect(client.attributes.get("url.full") == .string("http://app.test:\(port)/a"), "the query is left out")
        #expect(client.attributes.get("network.peer.address") == .string("127.0.0.1"))
        #expect(client.attributes.get("network.protocol.version") == .string("1.1"))
        #expect(client.attributes.get("http.response.status_code") == .int64(200))
        #expect(client.events.map(\.name) == ["connect", "first byte"])
        #expect(client.status == nil)
        #expect(resolve.parentSpanID == client.spanID)
        #expect(resolve.attributes.get("dns.question.name") == .string("app.test"))
        #expect(resolve.attributes.get("httpdns.cache") == .string("miss"))
        // The phases are in order, inside the client span.
        let (start, end) = (client.startInstant.nanosecondsSinceEpoch, client.endInstant.nanosecondsSinceEpoch)
        let resolved = resolve.endInstant.nanosecondsSinceEpoch
        let connected = try #require(client.events.first?.nanosecondsSinceEpoch)
        #expect(start <= resolve.startInstant.nanosecondsSinceEpoch && resolved <= connected && connected <= end)
    }

    @Test func theClientSpanEndsWithTheBodyAndAReusedConnectionHasNoLookup() async throws {
        let tracer = InMemoryTracer()
        // Our server as the origin: it keeps connections alive (the fixture closes each one).
        let origin = try await startService()
        try await withTracedHTTPDNS(tracer) { httpdns, _ in
            let port = origin.ports[0]
            let first = try await httpdns.engine.send(try HTTPEngineRequest(url: "http://app.test:\(port)/healthz"))
            #expect(tracer.finishedSpans.allSatisfy { $0.kind != .client }, "ended before its body was read")
            _ = try await first.body.collect(upTo: 1 << 16)
            #expect(tracer.finishedSpans.filter { $0.kind == .client }.count == 1)
            let second = try await httpdns.engine.send(try HTTPEngineRequest(url: "http://app.test:\(port)/nowhere"))
            _ = try await second.body.collect(upTo: 1 << 16)
        }
        await origin.stop()
        let clients = tracer.finishedSpans.filter { $0.kind == .client }
        #expect(clients.count == 2 && tracer.finishedSpans.filter { $0.operationName == "resolve" }.count == 1)
        let reused = try #require(clients.last)
        #expect(reused.attributes.get("httpdns.connection.reused") == .bool(true))
        #expect(reused.events.map(\.name) == ["first byte"])
        // A 404 is an error for a client, as OpenTelemetry's HTTP conventions say.
        #expect(reused.attributes.get("http.response.status_code") == .int64(404))
        #expect(reused.attributes.get("error.type") == .string("404") && reused.status?.code == .error)
    }

    @Test func aBodyDroppedBeforeItsEndEndsTheSpanAsCancelled() async throws {
        let tracer = InMemoryTracer()
        let origin = try await HTTPFixtureServer.start { _, _, _ in
            (.ok, "application/octet-stream", [UInt8](repeating: 7, count: 4 << 20))
        }
        try await withTracedHTTPDNS(tracer) { httpdns, _ in
            do {
                let response = try await httpdns.engine.send(
                    try HTTPEngineRequest(url: "http://app.test:\(origin.port)/")
                )
                for try await _ in response.body { break }  // one chunk of 4 MiB, then the body is dropped
            }
            // Whether the exchange was still running when the body went or had already finished.
            try await eventually("the span ended") { tracer.finishedSpans.contains { $0.kind == .client } }
        }
        await origin.stop()
        let client = try #require(tracer.finishedSpans.first { $0.kind == .client })
        #expect(client.attributes.get("error.type") == .string("cancelled") && client.status?.code == .error)
        #expect(client.attributes.get("http.response.status_code") == .int64(200))
    }

    @Test func aFailedConnectIsAnErrorSpanWithOurCode() async throws {
        let tracer = InMemoryTracer()
        try await withTracedHTTPDNS(tracer) { httpdns, _ in
            // A port nothing listens on: a server's, once it has stopped.
            let gone = try await HTTPFixtureServer.start { _, _, _ in (.ok, "text/plain", []) }
            let closed = gone.port
            await gone.stop()
            await #expect(throws: HTTPEngineError.self) {
                _ = try await httpdns.engine.send(try HTTPEngineRequest(url: "http://app.test:\(closed)/"))
            }
        }
        let client = try #require(tracer.finishedSpans.first { $0.kind == .client })
        #expect(client.attributes.get("error.type") == .string("connectFailed"))
        #expect(client.status?.code == .error && client.errors.count == 1)
    }

    @Test func traceContextGoesOutOnlyWhenTheAppAsks() async throws {
        for propagates in [false, true] {
            let tracer = InMemoryTracer()
            var received = ""
            try await withTracedHTTPDNS(tracer, propagates: propagates) { httpdns, port in
                let response = try await httpdns.engine.send(try HTTPEngineRequest(url: "http://app.test:\(port)/"))
                received = String(buffer: try await response.body.collect(upTo: 1 << 16))
            }
            let client = try #require(tracer.finishedSpans.first { $0.kind == .client })
            #expect(received == (propagates ? client.traceID : "none"), "propagates: \(propagates)")
        }
    }

    @Test func lookupsTheAppAsksForAreSpansThatSayWhetherTheCacheAnswered() async throws {
        let tracer = InMemoryTracer()
        try await withTracedHTTPDNS(tracer) { httpdns, _ in
            _ = try await httpdns.resolver.resolve("a.test")
            _ = try await httpdns.resolver.resolve("a.test")
            await #expect(throws: ResolverError.self) { _ = try await httpdns.resolver.resolve("bad name") }
            _ = await httpdns.resolver.compare("a.test")
        }
        let resolves = tracer.finishedSpans.filter { $0.operationName == "resolve" }
        #expect(resolves.map { $0.attributes.get("httpdns.cache") } == [.string("miss"), .string("hit"), nil])
        #expect(resolves[0].attributes.get("httpdns.addresses") == .stringArray(["127.0.0.1"]))
        #expect(resolves[2].status?.code == .error)
        #expect(resolves[2].attributes.get("error.type") == .string("invalidName"))
        let compare = try #require(tracer.finishedSpans.first { $0.operationName == "compare" })
        #expect(compare.attributes.get("httpdns.verdict") != nil)
        #expect(compare.attributes.get("dns.question.name") == .string("a.test"))
    }

    @Test func withoutATracerNothingIsTraced() async throws {
        // Nothing is bootstrapped in this process: the engine and resolver carry no tracer at all.
        try await withTracedHTTPDNS(nil) { httpdns, port in
            #expect(httpdns.engine.configuration.tracing == nil)
            let response = try await httpdns.engine.send(try HTTPEngineRequest(url: "http://app.test:\(port)/"))
            #expect(String(buffer: try await response.body.collect(upTo: 1 << 16)) == "none")
        }
        try await withTracedHTTPDNS(NoOpTracer()) { httpdns, _ in
            #expect(httpdns.engine.configuration.tracing == nil)
        }
    }

    @Test func theServerGivesASpanPerRequestJoinedToTheClientsTrace() async throws {
        let tracer = InMemoryTracer()
        let service = try await startService { $0.tracer = tracer }
        let engine = try HTTPEngine()
        let port = service.ports[0]
        var headers = HTTPHeaders()
        headers.add(name: InMemoryTracer.traceIDKey, value: "trace-1")
        headers.add(name: InMemoryTracer.spanIDKey, value: "span-1")
        let url = "http://127.0.0.1:\(port)/dns-query?name=a.example.com&type=A"
        let (status, _) = try await rawGet(engine, url, headers: headers)
        #expect(status == 200)
        _ = try await rawGet(engine, "http://127.0.0.1:\(port)/nowhere")
        engine.shutdown()
        await service.stop()
        let spans = tracer.finishedSpans
        let query = try #require(spans.first { $0.operationName == "GET /dns-query" }, "\(spans.map(\.operationName))")
        #expect(query.kind == .server && query.traceID == "trace-1" && query.parentSpanID == "span-1")
        #expect(query.attributes.get("http.route") == .string("/dns-query"))
        #expect(query.attributes.get("url.path") == .string("/dns-query"))
        #expect(query.attributes.get("http.response.status_code") == .int64(200))
        let other = try #require(spans.first { $0.operationName == "GET" })
        #expect(other.attributes.get("http.route") == nil)
        #expect(other.attributes.get("http.response.status_code") == .int64(404))
        #expect(other.parentSpanID == nil)
    }
}
