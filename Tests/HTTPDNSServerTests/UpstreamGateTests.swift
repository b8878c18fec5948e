// The bound on names `serve` asks its upstream at once (UpstreamGate): distinct questions count, the
// requests that share one do not, and a question answered frees its place. Pure.

@testable import HTTPDNSServer
import Testing

@Suite struct UpstreamGateTests {
    @Test func distinctQuestionsAreBoundedAndSharedOnesRideAlong() {
        var gate = UpstreamGate<String>(limit: 2)
        #expect(admit(&gate, "a"))
        #expect(admit(&gate, "b"))
        #expect(!admit(&gate, "c"))
        // A second request for a name already asked shares its place.
        #expect(admit(&gate, "a"))
        #expect(gate.inFlight == 2)
        gate.leave("a")
        #expect(!admit(&gate, "c"), "a is still asked for the other request")
        gate.leave("a")
        #expect(admit(&gate, "c"))
        #expect(gate.inFlight == 2)
    }

    @Test func thePastBoundAnswerComesAtOnce() async {
        let lookups = UpstreamLookups<String>(limit: 1)
        let entered = AsyncStream<Void>.makeStream()
        let held = AsyncStream<Void>.makeStream()
        let first = Task {
            await lookups.run("a", orElse: "refused") {
                entered.continuation.yield()
                for await _ in held.stream {}
                return "answered"
            }
        }
        // The first question holds the only place until the test lets it go.
        for await _ in entered.stream { break }
        #expect(await lookups.run("b", orElse: "refused") { "answered" } == "refused")
        held.continuation.finish()
        #expect(await first.value == "answered")
        #expect(await lookups.run("b", orElse: "refused") { "answered" } == "answered")
    }
}

/// `gate.enter(question)`, outside `#expect` (which cannot call a mutating method).
private func admit(_ gate: inout UpstreamGate<String>, _ question: String) -> Bool { gate.enter(question) }
