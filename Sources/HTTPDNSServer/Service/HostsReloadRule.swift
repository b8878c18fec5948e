// When the hosts-file poll reads a changed file: once it has stopped changing.
//
// A file rewritten in place is, for a moment, half written. Read then, it parses (a shorter table), and
// every name of the missing half is answered NXDOMAIN until the next read: hostile round 4 counted 2,855
// such answers while a writer rewrote the file in two halves 1.5 s apart. So a change seen by the poll is
// read only once the file's stamp (modification time and size) has stayed the same for `settle`.
// Replacing the file by rename is atomic and needs no wait, but the poll cannot tell the two apart; an
// operator who wants a change read at once sends SIGHUP (`HTTPDNSService.reloadHosts()`), which reads it
// as it is. Pure: the poll (HTTPDNSService.start) gives it what it saw and when, and reads when told.

struct HostsReloadRule: Sendable {
    /// How long a changed stamp must stay the same before the file is read.
    var settle: Duration

    /// What the poll should do.
    enum Action: Sendable, Hashable {
        /// Nothing: unchanged, or still changing.
        case wait
        /// Read the file now.
        case read
    }

    /// A changed stamp, and when it was first seen.
    private var pending: (stamp: String, since: ContinuousClock.Instant)?

    init(settle: Duration = .seconds(2)) {
        self.settle = settle
    }

    /// The poll saw `stamp` at `now`; `current` is the stamp of the table in use (nil: none read yet).
    mutating func polled(
        _ stamp: String?,
        current: String?,
        now: ContinuousClock.Instant
    ) -> Action {
        guard let stamp, stamp != current else {
            pending = nil
            return .wait
        }
        guard let pending, pending.stamp == stamp else {
            self.pending = (stamp, now)
            return settle <= .zero ? read() : .wait
        }
        return now - pending.since >= settle ? read() : .wait
    }

    private mutating func read() -> Action {
        pending = nil
        return .read
    }
}
