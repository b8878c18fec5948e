import HTTPDNSCore

/// Which providers to try, in which order: a dead or failing provider is skipped for a while (1 s after
/// its first failure, doubling up to 60 s) and tried again after that. When every provider is marked
/// down they are all tried anyway, in the configured order: skipping everything would turn a blip into
/// an outage. Plain value type; the owner keeps it under a lock.
struct ProviderHealth: Sendable {
    struct Record: Sendable {
        var consecutiveFailures = 0
        var downUntil: Timestamp?
    }

    var initialBackoff: Duration = .seconds(1)
    var maximumBackoff: Duration = .seconds(60)
    private var records: [Int: Record] = [:]

    init() {}

    /// Provider indices to try now, healthy ones first (each group in configured order).
    func order(count: Int, now: Timestamp) -> [Int] {
        var up: [Int] = []
        var down: [Int] = []
        for i in 0..<count {
            if let until = records[i]?.downUntil, now < until { down.append(i) } else { up.append(i) }
        }
        return up + down
    }

    func isDown(_ index: Int, now: Timestamp) -> Bool {
        guard let until = records[index]?.downUntil else { return false }
        return now < until
    }

    mutating func succeeded(_ index: Int) {
        records[index] = nil
    }

    mutating func failed(_ index: Int, now: Timestamp) {
        var r = records[index] ?? Record()
        r.consecutiveFailures += 1
        let factor = Int64(1) << Int64(min(r.consecutiveFailures - 1, 16))
        let backoff = min(Duration.nanoseconds(initialBackoff.nanoseconds &* factor), maximumBackoff)
        r.downUntil = now + backoff
        records[index] = r
    }
}
