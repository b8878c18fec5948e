// The resolver's error model, without peers: codes compare as values, and a lookup that every provider
// failed keeps each provider's own error as a value (not flattened into the message).

@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import Testing

/// A provider that always fails with a ProviderError wrapping `StubFailure`.
struct FailingProvider: DNSProvider {
    struct StubFailure: Error, Equatable {}
    var name: String { "stub:failing" }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        throw ProviderError("refused on purpose", underlying: StubFailure())
    }
}

@Suite struct ResolverErrorTests {
    @Test func errorsCompareByCodeAndName() {
        let a = ResolverError(.timeout, name: "a.test", "one message")
        #expect(a == ResolverError(.timeout, name: "a.test", "another message"))
        #expect(a != ResolverError(.timeout, name: "b.test", "one message"))
        #expect(a != ResolverError(.cancelled, name: "a.test", "one message"))
        #expect(ResolverError.Code.calledOnEventLoop.description == "calledOnEventLoop")
        #expect(a.failures.isEmpty)
    }

    @Test func everyFailedProviderIsReportedWithItsOwnError() async throws {
        let engine = try HTTPEngine()
        defer { engine.shutdown() }
        // A DoH server on a closed port (the connection is refused at once), then a provider that fails.
        let doh = try ProviderFactory.make(
            try ResolverSpec(parsing: "doh:http://127.0.0.1:1/dns-query"),
            engine: engine,
            bootstrap: [:]
        )
        let resolver = makeResolver([doh, FailingProvider()]) {
            $0.fallbackToLocalDNS = false
            // The refusal must come before the deadline, or the error is a timeout: 60 s, what a starved
            // machine cannot miss (10 s was missed under plain `swift test` with busy loops beside it).
            $0.timeout = .seconds(60)
        }
        do {
            _ = try await resolver.resolve("a.example.com")  // both families: each provider is listed once
            Issue.record("resolved through providers that all fail")
        } catch let e as ResolverError {
            #expect(e.code == .allProvidersFailed)
            #expect(e.name == "a.example.com")
            #expect(e.failures.map(\.provider) == [doh.name, "stub:failing"], "\(e.failures)")
            let engineError = try #require(e.failures.first?.error as? HTTPEngineError, "\(e.failures)")
            #expect(engineError.code == .connectFailed)
            #expect(e.failures.last?.error is FailingProvider.StubFailure)
            #expect(e.description.contains("refused on purpose"))
        }
    }

    @Test func fallbackFailureKeepsTheProvidersFailuresAndAddsLocalDNS() async throws {
        let local = try Do53Provider(server: IPAddress("127.0.0.1")!, port: 9)  // closed port: refused at once
        let resolver = makeResolver([FailingProvider()], local: local)
        do {
            _ = try await resolver.resolve("b.example.com", .ipv4)
            Issue.record("resolved through providers that all fail")
        } catch let e as ResolverError {
            #expect(e.code == .allProvidersFailed)
            #expect(e.failures.map(\.provider) == ["stub:failing", local.name], "\(e.failures)")
        }
    }

    @Test func rewritingAnHTTPSURLIsNotRewritable() async {
        let resolver = makeResolver([FailingProvider()])
        await #expect(throws: ResolverError(.notRewritable, name: "https://a.test/", "")) {
            _ = try await resolver.ipDirectURL(for: URL(string: "https://a.test/")!)
        }
    }
}

/// Hostile round 4: an upstream whose A answer cannot be read (a compression loop, a lying length, a
/// wrong id) while AAAA is NODATA. The name is not reported absent: the lookup failed.
@Suite struct FailedFamilyTests {
    /// Fails A, answers AAAA with no address (NODATA).
    struct BrokenAProvider: DNSProvider {
        var name: String { "stub:broken-a" }
        func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
            guard family == .ipv6 else { throw ProviderError("the A answer could not be read") }
            return FamilyAnswer(addresses: [], ttl: 300)
        }
    }

    @Test func aFamilyThatFailedMakesTheLookupFailNotNoAddress() async throws {
        let resolver = makeResolver([BrokenAProvider()]) { $0.fallbackToLocalDNS = false }
        do {
            _ = try await resolver.resolve("broken.test")
            Issue.record("resolved through a provider whose A answer is broken")
        } catch let e as ResolverError {
            #expect(e.code != .noAddress, "\(e)")
            #expect(e.message.contains("could not be read"), "\(e.message)")
        }
        // Asked for AAAA alone, the NODATA answer is one: no address.
        do {
            _ = try await resolver.resolve("broken.test", .ipv6)
            Issue.record("an AAAA NODATA answer gave an address")
        } catch let e as ResolverError {
            #expect(e.code == .noAddress, "\(e)")
        }
    }
}
