import ArgumentParser

/// A flag given in seconds, as a Duration: a finite number within `range`, else a usage error (exit 64)
/// that names the flag. `nan`, `inf` and `1e300` are refused here rather than trapping on conversion.
package func seconds(_ value: Double, flag: String, range: ClosedRange<Double>) throws -> Duration {
    let give = "give seconds from \(range.lowerBound) to \(range.upperBound)"
    guard !value.isNaN else { throw ValidationError("\(flag): \(value) is not a number; \(give)") }
    guard value >= 0 else { throw ValidationError("\(flag): \(value) is negative; \(give)") }
    guard value.isFinite, range.contains(value) else {
        throw ValidationError("\(flag): \(value) is out of range; \(give)")
    }
    return .nanoseconds(Int64((value * 1e9).rounded()))
}
