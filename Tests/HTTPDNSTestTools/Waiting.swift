// Waiting for the event that matters instead of sleeping a fixed time: a test polls the
// condition it needs with `eventually`, or waits on a signal the code under test gives (a log message
// caught by `LogRecorder`). Fixed sleeps are left only where time passing is the scenario itself.

import Logging
import NIOConcurrencyHelpers
import Testing

/// Returns as soon as `condition` holds, checking it again every `pollEvery`; fails the test at the
/// caller's line (and throws, ending it) when it still does not hold after `within`.
///
/// The deadline is generous on purpose: it only bounds a test whose event never comes, so a loaded
/// machine that is slow to get there does not fail. The default, 60 s, is what plain `swift test` on 2
/// cores with two busy loops beside it cannot miss (10 s was missed: every suite runs at once there). Pass a `pollEvery` of 50–100 ms when checking
/// the condition is itself costly (a request to a server).
func eventually(
    _ what: @autoclosure () -> String = "the awaited condition",
    within limit: Duration = .seconds(60),
    pollEvery interval: Duration = .milliseconds(10),
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while true {
        let held = try await condition()
        if held { return }
        if ContinuousClock.now >= deadline {
            try #require(held, "\(what()): still not true after waiting \(limit)", sourceLocation: sourceLocation)
        }
        try await Task.sleep(for: interval)
    }
}

/// A logger whose messages the test can read, for code that signals what it did only by logging it.
final class LogRecorder: Sendable {
    private let box = NIOLockedValueBox<[(Logger.Level, String)]>([])

    /// Records every message at `level` and above.
    func logger(level: Logger.Level = .debug) -> Logger {
        let box = self.box
        var logger = Logger(label: "test.recorded") { _ in RecordingLogHandler(box: box) }
        logger.logLevel = level
        return logger
    }

    /// The messages logged so far, oldest first.
    var messages: [String] { box.withLockedValue { $0.map(\.1) } }

    /// True once a message at `level` starting with `prefix` has been logged.
    func logged(_ prefix: String, level: Logger.Level? = nil) -> Bool {
        box.withLockedValue { $0.contains { (level == nil || $0.0 == level) && $0.1.hasPrefix(prefix) } }
    }
}

private struct RecordingLogHandler: LogHandler {
    let box: NIOLockedValueBox<[(Logger.Level, String)]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        box.withLockedValue { $0.append((event.level, event.message.description)) }
    }
}
