// Two listeners on one port number at two loopback addresses: an origin that moved from 127.0.0.1 to
// 127.0.0.2, a relay in front of an origin, a service IP's replica. A port free on the first address
// may be held on the second by another suite's listener (seen: EADDRINUSE in 1 of 7 busy runs, and a
// CI run failed on it), so a taken pair is given back and another tried.
//
// Only the first try lets the kernel choose (port 0): it chooses a port free on the first address only,
// and Linux came back to ports held on the second again and again (with 400 of 1,000 ports held on
// 127.0.0.2, 20 tries at port 0 failed in 3 tests of 5). Later tries draw from the ephemeral range.

import Foundation

/// `first` listening on `port` (0 on the first try: any free one) and `second` listening on first's
/// port (`port(first)`) at another address. When `second` cannot (it throws, or returns nil),
/// `release` gives `first` back and a new pair is tried on a random port, `attempts` times at most;
/// then this throws, with the last error. After the first try, `first` failing is a taken port too.
func onOnePort<First, Second>(
    attempts: Int = 20,
    _ first: (_ port: Int) async throws -> First,
    port: (First) -> Int,
    _ second: (_ port: Int) async throws -> Second?,
    release: (First) async -> Void
) async throws -> (First, Second) {
    var lastError: (any Error)?
    for attempt in 0..<attempts {
        let made: First
        if attempt == 0 {
            made = try await first(0)
        } else {
            do {
                made = try await first(Int.random(in: ephemeralPorts))
            } catch {
                lastError = error
                continue
            }
        }
        do {
            if let other = try await second(port(made)) { return (made, other) }
        } catch {
            lastError = error
        }
        await release(made)
    }
    throw NoPortOnBothAddresses(attempts: attempts, lastError: lastError)
}

/// The ports the kernel hands out for port 0: Linux's `ip_local_port_range`, elsewhere the IANA dynamic
/// range (macOS's default).
let ephemeralPorts: ClosedRange<Int> = {
    if let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) {
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        if bounds.count == 2, bounds[0] <= bounds[1] { return bounds[0]...bounds[1] }
    }
    return 49152...65535
}()

/// `onOnePort` found no port free on both addresses.
struct NoPortOnBothAddresses: Error, CustomStringConvertible {
    let attempts: Int
    let lastError: (any Error)?

    var description: String {
        "no port free on both addresses in \(attempts) tries" + (lastError.map { "; the last: \($0)" } ?? "")
    }
}
