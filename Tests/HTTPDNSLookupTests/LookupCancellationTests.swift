// A lookup nobody waits for any more is cancelled (a server's client went away: its stream was reset or
// its connection closed), unless another caller shares it. Hermetic: the provider is held open by the
// test and says when it was cancelled.

@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// Answers only when released; counts the questions it got and the ones cancelled while it held them.
final class HeldProvider: DNSProvider {
    private struct State {
        var started = 0
        var cancelled = 0
        var released = false
        var waiting: [CheckedContinuation<Void, any Error>] = []
    }
    let name = "held"
    private let state = NIOLockedValueBox(State())
    /// One element each time a question arrives, and each time one held is cancelled: the events the
    /// tests wait for (no deadline: a loaded machine only makes them later).
    private let askedEvents = AsyncStream<Void>.makeStream()
    private let cancelledEvents = AsyncStream<Void>.makeStream()

    /// Returns once a question has arrived (each call takes one).
    func nextQuestion() async { for await _ in askedEvents.stream { return } }
    /// Returns once a held question has been cancelled (each call takes one).
    func nextCancellation() async { for await _ in cancelledEvents.stream { return } }

    var started: Int { state.withLockedValue { $0.started } }
    var cancelled: Int { state.withLockedValue { $0.cancelled } }

    /// Every question held, and every later one, is answered.
    func release() {
        let waiting = state.withLockedValue { state in
            state.released = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for c in waiting { c.resume() }
    }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        state.withLockedValue { $0.started += 1 }
        askedEvents.continuation.yield()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let resume: Result<Void, any Error>? = state.withLockedValue { state in
                    if state.released { return .success(()) }
                    // Cancelled before this point: the handler below has run already (it takes this lock).
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiting.append(c)
                    return nil
                }
                if let resume { c.resume(with: resume) }
            }
        } onCancel: {
            let waiting = state.withLockedValue { state in
                state.cancelled += 1
                defer { state.waiting = [] }
                return state.waiting
            }
            for c in waiting { c.resume(throwing: CancellationError()) }
            cancelledEvents.continuation.yield()
        }
        return FamilyAnswer(addresses: [IPAddress("203.119.0.7")!], ttl: 60)
    }
}

@Suite struct LookupCancellationTests {
    @Test func aLookupWhoseOnlyCallerIsCancelledIsCancelledAndNotHeldAgainstItsProvider() async throws {
        let provider = HeldProvider()
        let resolver = makeResolver([provider]) { $0.fallbackToLocalDNS = false }
        let caller = Task { try await resolver.resolve("a.example.com", .ipv4) }
        await provider.nextQuestion()
        caller.cancel()
        await provider.nextCancellation()
        #expect(provider.cancelled == 1)
        let result = await caller.result
        #expect(throws: (any Error).self) { try result.get() }
        // The provider is not marked down for it: the next question goes to it and is answered.
        provider.release()
        #expect(try await resolver.resolve("a.example.com", .ipv4).ipv4 == [IPAddress("203.119.0.7")!])
        #expect(provider.started == 2)
    }

    @Test func aSharedLookupGoesOnForTheCallerStillWaiting() async throws {
        let provider = HeldProvider()
        let resolver = makeResolver([provider]) { $0.fallbackToLocalDNS = false }
        let leaving = Task { try await resolver.resolve("b.example.com", .ipv4) }
        await provider.nextQuestion()
        let staying = Task { try await resolver.resolve("b.example.com", .ipv4) }
        // No event says so: the statistics are read until they do (a hang check, not a speed bound).
        try await eventually("the second caller joined", within: .seconds(60)) { resolver.statistics.coalesced == 1 }
        leaving.cancel()
        provider.release()
        #expect(try await staying.value.ipv4 == [IPAddress("203.119.0.7")!])
        #expect(provider.started == 1)
        #expect(provider.cancelled == 0)
    }
}

@Suite struct Do53SocketFailureTests {
    /// A UDP socket that cannot be set up (here: connect(2) refuses a broadcast address without
    /// SO_BROADCAST, EACCES; in production EMFILE, ENFILE or ENOBUFS) is a failed lookup. The promise
    /// its answer handler would have completed is completed too: a debug build used to abort on it
    /// ("leaking promise").
    @Test func aSocketThatCannotBeSetUpIsAFailedLookupAndNoPromiseLeaks() async throws {
        let provider = try Do53Provider(server: IPAddress("255.255.255.255")!, port: 53)
        await #expect(throws: ProviderError.self) {
            _ = try await provider.resolve("a.example.com", family: .ipv4, deadline: .now() + .seconds(5))
        }
    }
}
