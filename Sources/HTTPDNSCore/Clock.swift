#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A point in wall-clock time, nanoseconds since the Unix epoch.
///
/// The cache uses wall-clock time (not a monotonic clock) because its entries are persisted and must
/// still age correctly after a restart.
package struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    package var nanoseconds: Int64
    init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    static func seconds(_ s: Double) -> Timestamp { Timestamp(nanoseconds: Int64(s * 1e9)) }

    package static func < (l: Timestamp, r: Timestamp) -> Bool { l.nanoseconds < r.nanoseconds }
    package static func + (l: Timestamp, r: Duration) -> Timestamp {
        Timestamp(nanoseconds: l.nanoseconds &+ r.nanoseconds)
    }
    package static func - (l: Timestamp, r: Timestamp) -> Duration { .nanoseconds(l.nanoseconds &- r.nanoseconds) }
    package var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating).
    package var nanoseconds: Int64 {
        let (s, a) = self.components
        let (ns, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, o2) = ns.addingReportingOverflow(a / 1_000_000_000)
        return (o1 || o2) ? (s < 0 ? .min : .max) : total
    }

    package var seconds: Double { Double(nanoseconds) / 1e9 }
    package var milliseconds: Double { Double(nanoseconds) / 1e6 }
}

/// Where the resolver reads the time. Inject a manual clock in tests so TTLs, stale windows and
/// prefetch are tested without sleeping.
package protocol WallClock: Sendable {
    func now() -> Timestamp
}

/// The wall clock of the machine.
package struct SystemWallClock: WallClock {
    package init() {}
    package func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}
