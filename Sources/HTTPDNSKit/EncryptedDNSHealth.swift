import HTTPDNSCore

/// Which resolver the system uses for the app's process when HTTPDNS points its encrypted DNS at a DoH
/// server (`HTTPDNS.enableSystemEncryptedDNS(_:)`).
public enum EncryptedDNSMode: String, Sendable, Hashable, CustomStringConvertible {
    /// Every name the process resolves goes to the DoH server, encrypted.
    case encrypted
    /// The system's own resolver (the network's DNS, or the user's encrypted DNS or iCloud Private
    /// Relay when set): the DoH server failed its health checks, or was never checked healthy.
    case system

    public var description: String { rawValue }
}

/// The rules of the system encrypted-DNS mode's health check, without I/O: checks in, what to apply
/// and when to check next out. Plain value type; the owner keeps it under a lock and runs the actions.
///
/// - Nothing is applied before the first check passes: a DoH server that is down at launch never takes
///   the process's name resolution with it.
/// - A healthy server is checked every `interval`.
/// - One failed check is confirmed at once (after `confirmAfter`, 5 s); `failuresBeforeFallback` in a row
///   put the system's resolver back, because with encryption required the system does not fall back by
///   itself: every lookup would fail while the server is down.
/// - While on the system's resolver, the server is checked again after `initialBackoff`, doubling up to
///   `maximumBackoff`; the first check that passes points the system at it again.
/// - A network change, or the app returning to the foreground, checks at once. A check that was running
///   then was made on the old network: its result is dropped and the check runs again.
struct EncryptedDNSHealth: Sendable {
    /// What the executor does.
    package enum Action: Sendable, Hashable {
        /// Run one health check now and report it with `checkFinished(healthy:)`.
        case check
        /// Point the system's resolution at the DoH server (`.encrypted`) or give it back (`.system`).
        case apply(EncryptedDNSMode)
        /// Run the next check after this long, replacing any check scheduled before.
        case schedule(after: Duration)
    }

    var interval: Duration
    var failuresBeforeFallback: Int
    var initialBackoff: Duration
    var maximumBackoff: Duration
    /// The wait before a check that confirms a first failure: short, because with encryption required
    /// every lookup of the process fails while the server is down.
    var confirmAfter: Duration

    /// What the system was last told; nil before the first `.apply`.
    private(set) var applied: EncryptedDNSMode?
    private var consecutiveFailures = 0
    /// Failed checks while on the system's resolver, for the back-off.
    private var failuresOnSystem = 0
    private var checking = false
    private var staleCheck = false
    private var stopped = false

    init(
        interval: Duration = .seconds(300),
        failuresBeforeFallback: Int = 2,
        initialBackoff: Duration = .seconds(30),
        maximumBackoff: Duration = .seconds(600),
        confirmAfter: Duration = .seconds(5)
    ) {
        self.confirmAfter = confirmAfter
        self.interval = interval
        self.failuresBeforeFallback = max(1, failuresBeforeFallback)
        self.initialBackoff = initialBackoff
        self.maximumBackoff = max(initialBackoff, maximumBackoff)
    }

    /// The mode is turned on: check the server before anything is applied.
    mutating func start() -> [Action] {
        checkNow()
    }

    /// The scheduled time came.
    mutating func timerFired() -> [Action] {
        checkNow()
    }

    /// The device moved to another network, or the app came back to the foreground.
    mutating func conditionsChanged() -> [Action] {
        guard !stopped else { return [] }
        if checking {
            staleCheck = true
            return []
        }
        return checkNow()
    }

    /// The check started by `.check` ended.
    mutating func checkFinished(healthy: Bool) -> [Action] {
        guard !stopped else { return [] }
        checking = false
        if staleCheck {
            staleCheck = false
            return checkNow()
        }
        if healthy {
            consecutiveFailures = 0
            failuresOnSystem = 0
            let switchBack: [Action] = applied == .encrypted ? [] : [.apply(.encrypted)]
            applied = .encrypted
            return switchBack + [.schedule(after: interval)]
        }
        consecutiveFailures += 1
        if applied == .encrypted && consecutiveFailures < failuresBeforeFallback {
            return [.schedule(after: confirmAfter)]
        }
        let fallBack: [Action] = applied == .system ? [] : [.apply(.system)]
        applied = .system
        failuresOnSystem += 1
        return fallBack + [.schedule(after: backoff())]
    }

    /// The mode is turned off: the system's resolver comes back, and nothing more runs.
    mutating func stop() -> [Action] {
        guard !stopped else { return [] }
        stopped = true
        let wasEncrypted = applied == .encrypted
        applied = .system
        return wasEncrypted ? [.apply(.system)] : []
    }

    private mutating func checkNow() -> [Action] {
        guard !stopped, !checking else { return [] }
        checking = true
        return [.check]
    }

    /// The wait before the next check while on the system's resolver: `initialBackoff` after the first
    /// failure there, doubling per failure, at most `maximumBackoff`.
    private func backoff() -> Duration {
        var wait = initialBackoff
        for _ in 1..<max(1, min(failuresOnSystem, 32)) where wait < maximumBackoff {
            wait = wait * 2
        }
        return min(wait, maximumBackoff)
    }
}

/// How the system resolved a name for one transaction of a URLSession task
/// (`URLSessionTaskTransactionMetrics.domainResolutionProtocol`).
public enum ResolutionTransport: String, Sendable, Hashable, CustomStringConvertible {
    /// DNS over HTTPS.
    case https
    /// DNS over TLS.
    case tls
    /// Classic DNS over UDP: cleartext, where a LocalDNS can hijack.
    case udp
    /// Classic DNS over TCP: cleartext.
    case tcp
    /// The system looked the name up and did not say how.
    case unknown

    /// Whether the lookup was encrypted.
    public var isEncrypted: Bool { self == .https || self == .tls }

    public var description: String { rawValue }
}

/// Whether a URLSession task's names were resolved encrypted, from its metrics: made by
/// `HTTPDNS.resolutionReport(for:)` on Apple platforms, from the transactions that looked a name up.
public struct ResolutionReport: Sendable, Hashable {
    /// How each transaction that looked its name up resolved it, in order. Transactions that reused a
    /// connection, connected to an address literal or were served from the cache looked nothing up.
    public var lookups: [ResolutionTransport]

    /// Makes a report from the lookups of a task's transactions.
    ///
    /// - Parameter lookups: How each transaction that looked its name up resolved it, in order.
    public init(lookups: [ResolutionTransport]) {
        self.lookups = lookups
    }

    /// True when the task looked at least one name up and every lookup was encrypted.
    public var isEncrypted: Bool { !lookups.isEmpty && lookups.allSatisfy(\.isEncrypted) }
    /// True when any lookup went out in cleartext (UDP or TCP DNS).
    public var usedCleartext: Bool { lookups.contains { $0 == .udp || $0 == .tcp } }
}
