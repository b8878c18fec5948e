// A lookup nobody waits for any more is cancelled (a server's client went away: its stream was reset or
// its connection closed), unless another caller shares it. Hermetic: the provider is held open by the
// test and says when it was cancelled.

import HTTPDNSCore
import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
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
                    // Cancelled before this point: the handler below has run already (it takes this lock).
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.released { return .success(()) }
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
        // The caller left at once; the query ends once its provider call has unwound (no event says so:
        // the record is read until it does, a hang check, not a speed bound).
        try await eventually("the cancelled query ended", within: .seconds(60)) {
            resolver.state.withLockedValue { $0.queries.isEmpty }
        }
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

/// A caller with a deadline of its own (the engine's request) leaves at it; the resolver, not the
/// engine, ends the wait, with no Task of its own.
@Suite struct LookupDeadlineTests {
    @Test func aLoneCallerLeavesAtItsDeadlineAndItsQueryIsCancelled() async throws {
        let provider = HeldProvider()
        let resolver = makeResolver([provider]) { $0.fallbackToLocalDNS = false }
        let error = await #expect(throws: ResolverError.self) {
            _ = try await resolver.addresses(for: "a.example.com", deadline: .now() + .milliseconds(100))
        }
        #expect(error?.code == .timeout || error?.code == .allProvidersFailed, "\(String(describing: error))")
        await provider.nextCancellation()  // the last caller went: the query stops
        provider.release()
    }

    @Test func aCallerWithAnEarlierDeadlineLeavesASharedQueryThatRunsOnForTheOther() async throws {
        let provider = HeldProvider()
        let resolver = makeResolver([provider]) { $0.fallbackToLocalDNS = false }
        let patient = Task { try await resolver.addresses(for: "b.example.com", deadline: nil) }
        await provider.nextQuestion()
        await #expect(throws: ResolverError.self) {
            _ = try await resolver.addresses(for: "b.example.com", deadline: .now() + .milliseconds(100))
        }
        provider.release()
        #expect(try await patient.value.ipv4 == [IPAddress("203.119.0.7")!])
        // The hurried caller joined the patient one's query (one per family asked): no question of its
        // own, and leaving cancelled nothing.
        #expect(resolver.statistics.coalesced >= 1)
        #expect(provider.started <= 2)
        #expect(provider.cancelled == 0)
    }

    /// Cancelled, a caller leaves at once (not when the shared query ends), and the query runs on.
    @Test func aCancelledCallerLeavesASharedQueryAtOnce() async throws {
        let provider = HeldProvider()
        let resolver = makeResolver([provider]) { $0.fallbackToLocalDNS = false }
        let patient = Task { try await resolver.addresses(for: "c.example.com", deadline: nil) }
        await provider.nextQuestion()
        let hurried = Task { try await resolver.addresses(for: "c.example.com", deadline: nil) }
        try await eventually("the second caller joined", within: .seconds(60)) { resolver.statistics.coalesced >= 1 }
        hurried.cancel()
        await #expect(throws: (any Error).self) { _ = try await hurried.value }
        provider.release()
        #expect(try await patient.value.ipv4 == [IPAddress("203.119.0.7")!])
        #expect(provider.cancelled == 0)
    }

    @Test func aRequestWhoseTotalTimeoutPassesDuringTheLookupFailsWithTotalTimeout() async throws {
        let provider = HeldProvider()
        let resolver = makeResolver([provider]) { $0.fallbackToLocalDNS = false }
        let engine = try HTTPEngine(addressSource: resolver)
        defer { engine.shutdown() }
        var request = try HTTPEngineRequest(url: "https://d.example.com/")
        request.timeout = .milliseconds(100)
        await #expect(throws: HTTPEngineError(.totalTimeout, "")) { _ = try await engine.execute(request) }
        await provider.nextCancellation()
        provider.release()
    }
}

/// Answers every question after one yield, so that callers pile up on shared queries.
final class YieldingProvider: DNSProvider {
    let name = "yielding"
    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        await Task.yield()
        return FamilyAnswer(addresses: [IPAddress(family == .ipv4 ? "203.119.0.7" : "2400:3200::1")!], ttl: 1)
    }
}

@Suite struct SharedQueryWaiterTests {
    /// Many callers on few names, some with deadlines that pass at once and some with long ones, the
    /// cache emptied each round: every caller without a deadline gets its answer, none waits forever (a
    /// caller the query forgot to resume would hang here until the time limit).
    @Test(.timeLimit(.minutes(1))) func everyCallerOfASharedQueryIsResumed() async throws {
        let resolver = makeResolver([YieldingProvider()]) { $0.fallbackToLocalDNS = false }
        for _ in 0..<100 {
            resolver.clearCache()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<40 {
                    let name = "n\(i % 5).example.com"
                    group.addTask {
                        if i % 3 == 0 {
                            let deadline = NIODeadline.now() + (i % 2 == 0 ? .milliseconds(1) : .seconds(30))
                            _ = try? await resolver.addresses(for: name, deadline: deadline)
                        } else {
                            let resolution = try await resolver.resolve(name)
                            #expect(resolution.ipv4 == [IPAddress("203.119.0.7")!])
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
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
