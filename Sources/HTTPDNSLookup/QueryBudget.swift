// The providers' fair time shares, as a value (QueryBudgetTests): no clock inside.

/// How one upstream lookup shares the resolver's timeout (counted from the query's start): an equal part
/// of the time left for each provider still to try, plus one part kept for LocalDNS when it may be
/// asked afterwards. Time is passed in; the resolver reads the clock.
struct QueryBudget: Sendable {
    var reserveForFallback: Bool

    /// The time for the provider at `position` (from 0) of `count` tried in order, given `left`.
    func share(of left: Int64, position: Int, of count: Int) -> Int64 {
        let attemptsLeft = count - position + (reserveForFallback ? 1 : 0)
        return left / Int64(max(1, attemptsLeft))
    }

    /// At least this much for LocalDNS after every provider failed: one equal part of the timeout.
    static func fallbackShare(timeout: Int64, providers: Int) -> Int64 {
        timeout / Int64(providers + 1)
    }
}
