// The front door, hermetic: a classic DNS server and an HTTP origin in-process on loopback stand in
// for the HTTPDNS service and the app's server. Covers the three-line path, the non-async resolve
// calls and configuration errors.

import Foundation
@testable import HTTPDNSKit
@testable import HTTPDNSURLSession
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
@testable import HTTPDNSTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct FrontDoorTests {
    @Test func engineConnectsToTheResolvedAddressKeepingTheName() async throws {
        let origin = try await HTTPFixtureServer.start { _, _, headers in
            (.ok, "text/plain", Array("host=\(headers.first(name: "host") ?? "")".utf8))
        }
        defer { Task { await origin.stop() } }
        try await withHTTPDNS { httpdns in
            let response = try await httpdns.engine.send(
                try HTTPEngineRequest(url: "http://app.test:\(origin.port)/hello")
            )
            #expect(response.status == .ok)
            let body = try await response.body.collect(upTo: 1 << 16)
            #expect(String(buffer: body) == "host=app.test:\(origin.port)")
            #expect(response.metrics.ip == "127.0.0.1")
            #expect(response.metrics.dnsSource?.description.hasPrefix("dns:") == true)
        }
    }

    /// A direct request's own options, set by an app without URLSession: upload progress for a file
    /// body, and an idle timeout of its own, shorter than the engine's read timeout.
    @Test func aDirectRequestReportsItsUploadAndKeepsItsOwnIdleTimeout() async throws {
        let origin = try await HTTPFixtureServer.start { _, _, _ in (.ok, "text/plain", Array("ok".utf8)) }
        defer { Task { await origin.stop() } }
        let (silent, silentPort) = try await startSilentTCP()
        defer { silent.close(promise: nil) }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-upload-\(UUID()).bin")
        try Data(repeating: 7, count: 300_000).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        try await withHTTPDNS { httpdns in
            let sent = NIOLockedValueBox<[Int]>([])
            var upload = try HTTPEngineRequest(
                method: .POST,
                url: "http://app.test:\(origin.port)/upload",
                body: try .file(file.path)
            )
            #expect(upload.body?.length == 300_000)
            upload.onBodySent = { count in sent.withLockedValue { $0.append(count) } }
            let response = try await httpdns.engine.send(upload)
            _ = try await response.body.collect(upTo: 1 << 16)
            #expect(response.status == .ok)
            let counts = sent.withLockedValue { $0 }
            #expect(counts.last == 300_000)
            #expect(counts == counts.sorted())

            var quiet = try HTTPEngineRequest(url: "http://app.test:\(silentPort)/")
            quiet.idleTimeout = .milliseconds(300)
            do {
                _ = try await httpdns.engine.send(quiet)
                Issue.record("a silent origin answered")
            } catch let error as HTTPEngineError {
                // The request's 300 ms, not the configuration's read timeout, is the one that ran out.
                #expect(error.code == .readTimeout)
                #expect("\(error)".contains("300 ms"))
            }
        }
    }

    /// A connection opened under narrower network rules (a URLSession request that forbids cellular)
    /// never serves a request made under others, nor the other way round (the pool key carries them).
    @Test func connectionsMadeUnderOtherNetworkRulesAreKeptApart() async throws {
        // Our server as the origin: it keeps connections alive (the fixture closes each one).
        let origin = try await startService()
        try await withHTTPDNS { httpdns in
            let url = "http://app.test:\(origin.ports[0])/healthz"
            func send(_ access: NetworkAccess?) async throws -> RequestMetrics {
                var terms = ConnectionProfile.Terms()
                terms.networkAccess = access
                let response = try await httpdns.engine.execute(try HTTPEngineRequest(url: url), terms: terms)
                _ = try await response.body.collect(upTo: 1 << 16)
                return response.metrics
            }
            let noCellular = NetworkAccess(allowsCellular: false)
            var reused: [Bool] = []
            // Unrestricted, last, is what the engine's own rules are: the first connection again.
            for access in [nil, nil, noCellular, noCellular, .unrestricted] {
                reused.append(try await send(access).reused)
            }
            #expect(reused == [false, true, false, true, true])
        }
        await origin.stop()
    }

    @Test func completionHandlerResolve() async throws {
        try await withHTTPDNS { httpdns in
            let result = await withCheckedContinuation { continuation in
                httpdns.resolver.resolve("a.test") { continuation.resume(returning: $0) }
            }
            let resolution = try result.get()
            #expect(resolution.ipv4 == [IPAddress("127.0.0.1")!])
            let failure = await withCheckedContinuation { continuation in
                httpdns.resolver.resolve("nx.test") { continuation.resume(returning: $0) }
            }
            #expect(throws: ResolverError.self) { try failure.get() }
        }
    }

    @Test func blockingResolveOnAPlainThread() async throws {
        try await withHTTPDNS { httpdns in
            let resolver = httpdns.resolver
            let result = await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    continuation.resume(
                        returning: Result { try resolver.resolveBlocking("b.test", timeout: .seconds(60)) }
                    )
                }
            }
            let resolution = try result.get()
            #expect(resolution.ipv4 == [IPAddress("127.0.0.1")!])
        }
    }

    /// On the main thread a blocking resolve never waits: nothing cached fails at once with its own code
    /// (not `.timeout` after 30 s) and starts the lookup; once that lookup has answered, the same call
    /// returns the cached answer.
    @Test func aBlockingResolveOnTheMainThreadNeverWaits() async throws {
        try await withHTTPDNS { httpdns in
            let resolver = httpdns.resolver
            let first = await MainActor.run {
                Result { try resolver.resolveBlocking("main.test", timeout: .seconds(30)) }
            }
            #expect {
                try first.get()
            } throws: { error in
                (error as? ResolverError)?.code == .wouldBlockMainThread
            }
            // The lookup it started (joined here, not started again) fills the cache.
            _ = try await resolver.resolve("main.test")
            let second = await MainActor.run {
                Result { try resolver.resolveBlocking("main.test", timeout: .seconds(30)) }
            }
            #expect(try second.get().ipv4 == [IPAddress("127.0.0.1")!])
            #expect(try second.get().source.description.hasPrefix("cache("))
        }
    }

    @Test func blockingResolveRefusesAnEventLoopThread() async throws {
        try await withHTTPDNS { httpdns in
            let resolver = httpdns.resolver
            let loop = MultiThreadedEventLoopGroup.singleton.any()
            let result = try await loop.submit {
                Result { try resolver.resolveBlocking("c.test", timeout: .seconds(10)) }
            }.get()
            #expect(throws: ResolverError.self) { try result.get() }
            if case .failure(let error) = result {
                #expect((error as? ResolverError)?.code == .calledOnEventLoop)
            }
        }
    }

    @Test func cachedOrStartAnswersNilThenTheLookupsAnswer() async throws {
        try await withHTTPDNS { httpdns in
            #expect(httpdns.resolver.resolveCachedOrStart("d.test") == nil)
            // The lookup it started (or this one, sharing it) fills the cache.
            _ = try await httpdns.resolver.resolve("d.test")
            let answer = httpdns.resolver.resolveCachedOrStart("d.test")
            #expect(answer?.ipv4 == [IPAddress("127.0.0.1")!])
            #expect(httpdns.resolver.resolveCachedOrStart("127.0.0.9")?.source == .literal)
        }
    }

    @Test func batchResolveReturnsEveryNamesOwnResult() async throws {
        try await withHTTPDNS { httpdns in
            let results = await httpdns.resolver.resolve(["e.test", "nx.test", "e.test"])
            #expect(results.count == 2)
            let resolution = try #require(results["e.test"]).get()
            #expect(resolution.ipv4 == [IPAddress("127.0.0.1")!])
            guard case .failure(let error)? = results["nx.test"] else {
                Issue.record("nx.test should fail")
                return
            }
            #expect(error.code == .noAddress)
        }
    }

    /// A pinned name is answered from the table, not by the resolvers (whose DNS server here answers an
    /// address nothing listens on), and the engine keeps the name for Host.
    @Test func anAddressOverrideAnswersBeforeEveryResolver() async throws {
        let origin = try await HTTPFixtureServer.start { _, _, headers in
            (.ok, "text/plain", Array("host=\(headers.first(name: "host") ?? "")".utf8))
        }
        let dns = try await startDNS(["192.0.2.1"])
        var configuration = HTTPDNS.Configuration(
            resolvers: [.dns(IPAddress("127.0.0.1")!, port: dns.port)],
            policy: try HostPolicy(only: ["*.test"])
        )
        // Not a test of timeouts: a bound a starved 2-core machine cannot miss.
        configuration.timeouts.lookup = .seconds(60)
        configuration.addressOverrides = ["Pinned.TEST.": [IPAddress("127.0.0.1")!]]
        configuration.network.watchesChanges = false
        let httpdns = try HTTPDNS(configuration)
        do {
            let resolution = try await httpdns.resolver.resolve("pinned.test")
            #expect(resolution.source == .override)
            #expect(resolution.ipv4 == [IPAddress("127.0.0.1")!])
            #expect(httpdns.resolver.resolveCachedOrStart("PINNED.test")?.source == .override)
            // Other names still go to the resolver.
            #expect(try await httpdns.resolver.resolve("other.test").ipv4 == [IPAddress("192.0.2.1")!])
            let response = try await httpdns.engine.send(
                try HTTPEngineRequest(url: "http://pinned.test:\(origin.port)/")
            )
            #expect(String(buffer: try await response.body.collect(upTo: 1 << 16)) == "host=pinned.test:\(origin.port)")
            #expect(response.metrics.dnsSource == .override)
        } catch {
            Issue.record(error)
        }
        await httpdns.shutdown()
        await dns.stop()
        await origin.stop()
    }

    /// A spare address after the main one is used when the main one refuses (nothing listens on
    /// 127.0.0.2, the origin is on 127.0.0.1); an override without the family the query asks fails
    /// with `.noAddress`, naming the override.
    @Test func anAddressOverrideListsSparesAndKeepsToTheFamiliesAsked() async throws {
        let origin = try await HTTPFixtureServer.start { _, _, _ in (.ok, "text/plain", Array("ok".utf8)) }
        var configuration = HTTPDNS.Configuration(resolvers: [])
        configuration.addressOverrides = [
            "spare.test": [IPAddress("127.0.0.2")!, IPAddress("127.0.0.1")!],
            "six.test": [IPAddress("::1")!],
        ]
        configuration.network.watchesChanges = false
        let httpdns = try HTTPDNS(configuration)
        do {
            let response = try await httpdns.engine.send(
                try HTTPEngineRequest(url: "http://spare.test:\(origin.port)/")
            )
            #expect(response.status == .ok)
            #expect(response.metrics.ip == "127.0.0.1")
            await #expect {
                _ = try await httpdns.resolver.resolve("six.test", .ipv4)
            } throws: { error in
                guard let error = error as? ResolverError else { return false }
                return error.code == .noAddress && "\(error)".contains("address override")
            }
        } catch {
            Issue.record(error)
        }
        await httpdns.shutdown()
        await origin.stop()
    }

    /// The short form takes CA files (`trusting:`): a file that is not one is refused when the
    /// `HTTPDNS` is made, as the full form's `trustedCertificateFiles` is.
    @Test func theShortFormTakesTheCAsToTrust() async throws {
        #expect {
            _ = try HTTPDNS(resolvers: ["system"], only: ["*.test"], trusting: ["/nonexistent/ca.pem"])
        } throws: { error in
            (error as? HTTPDNSConfigurationError)?.code == .invalidCertificate
        }
        await (try HTTPDNS(resolvers: ["system"], only: ["*.test"], trusting: [])).shutdown()
    }

    @Test func aBadAddressOverrideIsAConfigurationError() throws {
        for table in [
            ["exa mple.com": [IPAddress("127.0.0.1")!]], ["empty.test": []], ["10.0.0.1": [IPAddress("10.0.0.2")!]],
        ] {
            var configuration = HTTPDNS.Configuration(resolvers: [])
            configuration.addressOverrides = table
            #expect {
                _ = try HTTPDNS(configuration)
            } throws: { error in
                (error as? HTTPDNSConfigurationError)?.code == .invalidAddressOverride
            }
        }
    }

    @Test func configurationErrorsNameTheBadEntry() throws {
        #expect {
            _ = try HTTPDNS(resolvers: ["carrier-pigeon:x"], only: ["*"])
        } throws: { error in
            (error as? HTTPDNSConfigurationError)?.code == .invalidResolverSpec
        }
        #expect {
            _ = try HTTPDNS(resolvers: ["system"], only: ["exa mple.com"])
        } throws: { error in
            (error as? HTTPDNSConfigurationError)?.code == .invalidHostPattern
        }
    }

    @Test func urlSessionConfigurationPutsTheProtocolFirst() async throws {
        try await withHTTPDNS { httpdns in
            // The protocol, as a class leading to this instance (on Apple platforms one per
            // configuration: each session finds its own configuration's settings through it).
            func ours(_ configuration: URLSessionConfiguration) -> HTTPDNSURLProtocol.Type? {
                configuration.protocolClasses?.first as? HTTPDNSURLProtocol.Type
            }
            let configuration = httpdns.urlSessionConfiguration(.ephemeral)
            #expect(ours(configuration)?.interception === httpdns.interception)
            let other = URLSessionConfiguration.ephemeral
            httpdns.enable(on: other)
            #expect(ours(other)?.interception === httpdns.interception)
        }
    }

    /// Two instances in one process, each with its own answer for the same name: each session loads
    /// through the instance it was made from (its resolver, its metrics handler), also after the other
    /// was made, and one shutting down leaves the other's sessions intercepted.
    @Test func twoInstancesServeTwoSessionsEachWithItsOwnResolver() async throws {
        // One origin per instance, on the same port of two loopback addresses.
        let (first, second) = try await onOnePort(
            { port in
                try await HTTPFixtureServer.start(host: "127.0.0.1", port: port) { _, _, _ in
                    (.ok, "text/plain", Array("first".utf8))
                }
            },
            port: { $0.port },
            { port in
                try await HTTPFixtureServer.start(host: "127.0.0.2", port: port) { _, _, _ in
                    (.ok, "text/plain", Array("second".utf8))
                }
            },
            release: { await $0.stop() }
        )
        func instance(_ address: String) throws -> HTTPDNS {
            var configuration = HTTPDNS.Configuration(resolvers: [], policy: try HostPolicy(only: ["app.test"]))
            configuration.addressOverrides = ["app.test": [IPAddress(address)!]]
            configuration.network.watchesChanges = false
            return try HTTPDNS(configuration)
        }
        let a = try instance("127.0.0.1")
        let b = try instance("127.0.0.2")
        let metricsA = NIOLockedValueBox<[String]>([])
        let metricsB = NIOLockedValueBox<[String]>([])
        a.onURLSessionMetrics { m in metricsA.withLockedValue { $0 += m.hops.compactMap(\.ip) } }
        b.onURLSessionMetrics { m in metricsB.withLockedValue { $0 += m.hops.compactMap(\.ip) } }
        let url = URL(string: "http://app.test:\(first.port)/")!
        func body(_ session: URLSession) async throws -> String {
            String(decoding: try await session.data(from: url).0, as: UTF8.self)
        }
        // Both sessions exist before either loads: the last one made decides nothing for the other.
        let sessionA = URLSession(configuration: a.urlSessionConfiguration(.ephemeral))
        let sessionB = URLSession(configuration: b.urlSessionConfiguration(.ephemeral))
        defer {
            sessionA.invalidateAndCancel()
            sessionB.invalidateAndCancel()
        }
        do {
            #expect(try await body(sessionA) == "first")
            #expect(try await body(sessionB) == "second")
            #expect(try await body(sessionA) == "first")
            #expect(metricsA.withLockedValue { $0 } == ["127.0.0.1", "127.0.0.1"])
            #expect(metricsB.withLockedValue { $0 } == ["127.0.0.2"])
            // B shuts down: A's sessions are still A's.
            await b.shutdown()
            #expect(try await body(sessionA) == "first")
            #expect(try await body(URLSession(configuration: a.urlSessionConfiguration(.ephemeral))) == "first")
            #expect(metricsA.withLockedValue { $0 }.count == 4)
        } catch {
            Issue.record(error)
        }
        await a.shutdown()
        await b.shutdown()
        await first.stop()
        await second.stop()
    }
}
