// How many names `serve` asks its upstream at once. Each name not at hand costs sockets (a UDP socket per
// family for a `dns:` upstream) until its answer or its timeout; a flood of names nobody cached would
// otherwise open sockets until the process runs out of descriptors. Past the bound a question is
// answered as an upstream failure at once (SERVFAIL for DoH, 502 for the vendor forms), the way unbound
// drops queries past num-queries-per-thread; the hosts file and the cache answer as before.
//
// A question counts once however many requests wait for it: the resolver asks the upstream once for all
// of them (coalescing), so they share its slot.

import CoreMetrics
import NIOConcurrencyHelpers

/// The bound's rules: which questions are in flight, and whether one more may go.
struct UpstreamGate<Question: Hashable & Sendable>: Sendable {
    let limit: Int
    /// Requests waiting, per question in flight.
    private(set) var askers: [Question: Int] = [:]

    init(limit: Int) { self.limit = limit }

    /// Questions in flight now.
    var inFlight: Int { askers.count }

    /// A request needs `question` from the upstream: true when it may ask (or join the asking already
    /// under way), false when the bound is reached.
    mutating func enter(_ question: Question) -> Bool {
        if let n = askers[question] {
            askers[question] = n + 1
            return true
        }
        guard askers.count < limit else { return false }
        askers[question] = 1
        return true
    }

    /// The request that entered with `question` has its answer (or gave up).
    mutating func leave(_ question: Question) {
        guard let n = askers[question] else { return }
        askers[question] = n > 1 ? n - 1 : nil
    }
}

/// `UpstreamGate` under a lock, with its metrics: `httpdns_server_upstream_lookups` (questions in flight)
/// and `httpdns_server_upstream_refused_total` (questions answered as failures because of the bound).
final class UpstreamLookups<Question: Hashable & Sendable>: Sendable {
    private let gate: NIOLockedValueBox<UpstreamGate<Question>>
    private let inFlight = Gauge(label: "httpdns_server_upstream_lookups")
    private let refused = Counter(label: "httpdns_server_upstream_refused_total")

    init(limit: Int) { gate = NIOLockedValueBox(UpstreamGate(limit: limit)) }

    /// `body`'s answer, or `full` at once when the bound is reached.
    func run<T>(_ question: Question, orElse full: T, _ body: () async -> T) async -> T {
        let (admitted, count) = gate.withLockedValue { ($0.enter(question), $0.inFlight) }
        guard admitted else {
            refused.increment()
            return full
        }
        inFlight.record(count)
        defer {
            inFlight.record(
                gate.withLockedValue {
                    $0.leave(question); return $0.inFlight
                }
            )
        }
        return await body()
    }
}
