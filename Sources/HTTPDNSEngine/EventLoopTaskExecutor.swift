// A Swift `TaskExecutor` that runs a task's jobs on one NIO event loop (SE-0417). NIO 2.101 makes an
// event loop a SerialExecutor (for actors) but not a TaskExecutor, so this adapter is ours.
//
// A task that prefers it (`withTaskExecutorPreference(_:operation:)`, or `Task(executorPreference:)`)
// resumes on the loop's own thread when an engine future completes there: an HTTP exchange then costs
// no thread hop between the event loop and Swift's concurrency pool. Only code that never blocks may
// run there (the engine's own code, a loop of requests); anything else belongs on the default pool.
//
// Availability: `TaskExecutor` and `UnownedJob.runSynchronously(on:)` need macOS 15 / iOS 18 (Linux:
// any). The executor is only a speed-up: on older Apple systems callers run on the default pool
// (`HTTPEngine.nextEventLoop()` and the `#available` check at the call site), and every request
// behaves the same, one thread hop slower.

import NIOCore

/// Runs Swift tasks' jobs on `eventLoop`. `@unchecked Sendable`: its only state is a `let` of a Sendable
/// event loop; the class is `final` only so it can be an executor identity.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
package final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    let eventLoop: any EventLoop

    package init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
