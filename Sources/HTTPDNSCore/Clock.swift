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
public struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var nanoseconds: Int64
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public static func seconds(_ s: Double) -> Timestamp { Timestamp(nanoseconds: Int64(s * 1e9)) }

    public static func < (l: Timestamp, r: Timestamp) -> Bool { l.nanoseconds < r.nanoseconds }
    public static func + (l: Timestamp, r: Duration) -> Timestamp {
        Timestamp(nanoseconds: l.nanoseconds &+ r.nanoseconds)
    }
    public static func - (l: Timestamp, r: Timestamp) -> Duration { .nanoseconds(l.nanoseconds &- r.nanoseconds) }
    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating).
    public var nanoseconds: Int64 {
        let (s, a) = self.components
        let (ns, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, o2) = ns.addingReportingOverflow(a / 1_000_000_000)
        return (o1 || o2) ? (s < 0 ? .min : .max) : total
    }

    public var seconds: Double { Double(nanoseconds) / 1e9 }
    public var milliseconds: Double { Double(nanoseconds) / 1e6 }
}

/// Where the resolver reads the time. Inject a manual clock in tests so TTLs, stale windows and
/// prefetch are tested without sleeping.
public protocol WallClock: Sendable {
    func now() -> Timestamp
}

/// The wall clock of the machine.
public struct SystemWallClock: WallClock {
    public init() {}
    public func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}
