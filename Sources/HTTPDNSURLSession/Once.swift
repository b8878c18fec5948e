import NIOConcurrencyHelpers

/// Resumes a continuation with the first value given; later ones are ignored (a delegate calling its
/// completion handler twice, a cancellation racing the answer). A delegate's completion handler may be
/// called on any thread, so the continuation is taken under a lock, and resumed outside it.
final class Once<Value>: Sendable {
    private let continuation: NIOLockedValueBox<CheckedContinuation<Value, Never>?>

    init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = NIOLockedValueBox(continuation)
    }

    func resume(_ value: sending Value) {
        let taken = continuation.withLockedValue { stored in
            defer { stored = nil }
            return stored
        }
        taken?.resume(returning: value)
    }
}
