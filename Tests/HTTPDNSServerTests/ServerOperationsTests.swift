// Running the server in production, in-process on loopback: readiness apart from liveness,
// the graceful drain (the request in progress is answered, then nothing new is taken), the JSON access
// log, /metrics. The metrics backend itself (Prometheus) is bootstrapped once per process, so it is
// tested through `httpdns serve --metrics` and a real Prometheus parser (HTTPDNSIntegrationTests).

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
@testable import HTTPDNSServer
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// A UDP "DNS server" that reads queries, counts them, and never answers: an upstream that hangs.
final class SilentUpstream: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let received = NIOLockedValueBox(0)
    var queries: Int { received.withLockedValue { $0 } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received.withLockedValue { $0 += 1 }
    }

    static func start() async throws -> (SilentUpstream, any Channel) {
        let handler = SilentUpstream()
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { $0.pipeline.addHandler(handler) }
            .bind(host: "127.0.0.1", port: 0).get()
        return (handler, channel)
    }
}

@Suite(.serialized) struct ServerOperationsTests {
    func engine(h2: Bool = false) throws -> HTTPEngine {
        var config = HTTPEngine.Configuration()
        config.http.versions = h2 ? .http2Only : .http1Only
        config.http.http2PriorKnowledge = h2
        return try HTTPEngine(configuration: config)
    }

    @Test func readyzWaitsForTheUpstreamWhileHealthzAnswersAtOnce() async throws {
        let (upstream, channel) = try await SilentUpstream.start()
        defer { channel.close(promise: nil) }
        let service = try await startService {
            $0.upstream = .dns(IPAddress("127.0.0.1")!, port: channel.localAddress!.port!)
        }
        defer { Task { await service.stop() } }
        let engine = try engine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        // The start-up probe is out and unanswered.
        try await eventually("the readiness probe reached the upstream") { upstream.queries > 0 }
        #expect(try await rawGet(engine, base + "/readyz") == (503, "not ready: the upstream has not answered yet\n"))
        #expect(try await rawGet(engine, base + "/healthz") == (200, "ok\n"))
        #expect(service.readiness.current == .waitingForUpstream)
    }

    @Test func readyzTurnsReadyWhenTheUpstreamAnswersNXDOMAINIncluded() async throws {
        let dns = try await startDNS(["192.0.2.1"])
        defer { Task { await dns.stop() } }
        let service = try await startService {
            $0.upstream = .dns(IPAddress("127.0.0.1")!, port: dns.port)
            $0.readinessProbeName = "nx.probe.test"  // startDNS answers NXDOMAIN for nx.*
        }
        defer { Task { await service.stop() } }
        let engine = try engine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        try await eventually("ready", pollEvery: .milliseconds(50)) {
            try await rawGet(engine, base + "/readyz").0 == 200
        }
        #expect(try await rawGet(engine, base + "/readyz").1 == "ready\n")
    }

    @Test func aServerWithoutUpstreamIsReadyAtOnceAndMetricsAreOffUnlessAsked() async throws {
        let service = try await startService()
        defer { Task { await service.stop() } }
        let engine = try engine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        #expect(try await rawGet(engine, base + "/readyz") == (200, "ready\n"))
        #expect(try await rawGet(engine, base + "/metrics").0 == 404)
    }

    @Test func metricsAnswerTheBackendsTextAsPrometheusExpects() async throws {
        let service = try await startService { $0.metricsText = { "httpdns_lookups_total 3\n" } }
        defer { Task { await service.stop() } }
        let engine = try engine()
        defer { engine.shutdown() }
        let response = try await engine.execute(
            try HTTPEngineRequest(url: "http://127.0.0.1:\(service.ports[0])/metrics")
        )
        #expect(response.headers.first(name: "content-type") == "text/plain; version=0.0.4; charset=utf-8")
        #expect(String(buffer: try await response.body.collect(upTo: 1 << 16)) == "httpdns_lookups_total 3\n")
    }

    @Test(arguments: [false, true])
    func drainAnswersTheRequestInProgressThenTakesNothingNew(h2: Bool) async throws {
        let (upstream, channel) = try await SilentUpstream.start()
        defer { channel.close(promise: nil) }
        let service = try await startService {
            $0.upstream = .dns(IPAddress("127.0.0.1")!, port: channel.localAddress!.port!)
            $0.readinessProbeName = "probe.example"
        }
        let engine = try engine(h2: h2)
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        try await eventually("the readiness probe reached the upstream") { upstream.queries > 0 }
        // A lookup the upstream never answers: in progress until the server's upstream timeout (3 s).
        let inProgress = Task { try await rawGet(engine, base + "/resolve?host=slow.example") }
        try await eventually("the lookup reached the upstream") { upstream.queries > 1 }

        let drained = Task { await service.drain(delay: .seconds(2), within: .seconds(20)) }
        try await eventually("readiness turned") { service.readiness.current == .draining }
        // During the delay new connections are still taken, and told not to come back.
        let other = try self.engine()
        defer { other.shutdown() }
        #expect(try await rawGet(other, base + "/readyz") == (503, "not ready: shutting down\n"))

        // The request in progress gets its answer (the upstream's failure: 502), not a broken connection.
        let (status, _) = try await inProgress.value
        #expect(status == 502)
        await drained.value
        #expect(service.listeners[0].openConnections == 0)
        let late = try self.engine()
        defer { late.shutdown() }
        await #expect(throws: HTTPEngineError.self) { _ = try await rawGet(late, base + "/healthz") }
    }

    @Test func accessLogWritesOneJSONLinePerAnswerWithoutTheQueryString() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("access-\(UUID()).log").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let log = try AccessLog(path: file)
        let service = try await startService { $0.accessLog = log }
        let engine = try engine()
        defer { engine.shutdown() }
        let base = "http://127.0.0.1:\(service.ports[0])"
        _ = try await rawGet(engine, base + "/d?dn=a.example.com&id=12&token=SECRET-TOKEN")
        _ = try await rawGet(engine, base + "/nowhere")
        await service.stop()  // flushes the log
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        try #require(lines.count == 2, "\(lines)")
        let first = try JSONDecoder().decode(Line.self, from: Data(lines[0].utf8))
        #expect(first.path == "/d")
        #expect(first.status == 200 || first.status == 403)
        #expect(first.method == "GET")
        #expect(first.protocol == "http/1.1")
        #expect(first.client == "127.0.0.1")
        #expect(!lines[0].contains("SECRET") && !lines[0].contains("a.example.com"))
        let second = try JSONDecoder().decode(Line.self, from: Data(lines[1].utf8))
        #expect(second.status == 404)
        #expect(second.path == "/nowhere")
    }

    @Test func endpointsAreAFixedSetOfLabels() {
        #expect(RequestObserver.endpoint("/dns-query") == "/dns-query")
        #expect(RequestObserver.endpoint("/123456/sign_d") == "/ACCOUNT/sign_d")
        #expect(RequestObserver.endpoint("/123456/d") == "/ACCOUNT/d")
        #expect(RequestObserver.endpoint("/../../etc/passwd") == "other")
    }

    struct Line: Decodable {
        var time: String
        var client: String
        var method: String
        var path: String
        var `protocol`: String
        var status: Int
        var bytes: Int
        var ms: Double
    }
}
