// The IP-direct engine against nginx (SNI certificates on one IP and port, h2 and HTTP/1.1), with
// names resolved by kresd DoH while the system resolver would give wrong answers.

@testable import HTTPDNSTestTools
import Crypto
import Foundation
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

/// Timeouts against in-process servers that misbehave on purpose.
@Suite struct EngineTimeoutTests {
    /// Accepts TCP connections and never sends a byte.
    func silentServer() async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    @Test func silentServerGivesAReadTimeout() async throws {
        let server = try await silentServer()
        defer { server.close(promise: nil) }
        var config = HTTPEngine.Configuration()
        config.timeouts.read = .milliseconds(300)
        let engine = try HTTPEngine(configuration: config)
        defer { engine.shutdown() }
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: "http://127.0.0.1:\(server.localAddress!.port!)/"))
            Issue.record("a silent server answered")
        } catch let e as HTTPEngineError {
            #expect(e.code == .readTimeout)
        }
    }

    @Test func silentTLSServerGivesAHandshakeTimeout() async throws {
        let server = try await silentServer()
        defer { server.close(promise: nil) }
        var config = HTTPEngine.Configuration()
        config.timeouts.tlsHandshake = .milliseconds(300)
        let engine = try HTTPEngine(configuration: config)
        defer { engine.shutdown() }
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: "https://127.0.0.1:\(server.localAddress!.port!)/"))
            Issue.record("a silent server finished a handshake")
        } catch let e as HTTPEngineError {
            #expect(e.code == .tlsHandshakeTimeout)
        }
    }

    @Test func totalTimeoutCoversTheWholeRequest() async throws {
        let server = try await silentServer()
        defer { server.close(promise: nil) }
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        var request = try HTTPEngineRequest(url: "http://127.0.0.1:\(server.localAddress!.port!)/")
        request.timeout = .milliseconds(300)
        do {
            _ = try await engine.execute(request)
            Issue.record("a silent server answered")
        } catch let e as HTTPEngineError {
            #expect(e.code == .totalTimeout)
        }
    }

    @Test func refusedPortListsTheAttempt() async throws {
        let engine = try HTTPEngine(addressSource: StaticAddressSource(["nowhere.test": [IPAddress("127.0.0.1")!]]))
        defer { engine.shutdown() }
        do {
            _ = try await engine.execute(try HTTPEngineRequest(url: "http://nowhere.test:1/"))
            Issue.record("connected to a closed port")
        } catch let e as HTTPEngineError {
            #expect(e.code == .connectFailed)
            #expect(e.description.contains("127.0.0.1:1"))
        }
    }
}
