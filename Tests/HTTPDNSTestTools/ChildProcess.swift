// Child processes for the tests, without Foundation's `Process`.
//
// Why not `Process`: in corelibs it crashed two test runs by itself (a SIGSEGV in `run()`'s descriptor
// scan when the test process holds many descriptors, a `try!` trap in `FileHandle` on a read that a
// signal interrupted), and a crashed test process left its `httpdns serve` children running.
//
// So, here:
// - `posix_spawn` (glibc's is vfork-like: no copy of the test process's memory), with the descriptors
//   above 2 closed in the child (`posix_spawn_file_actions_addclosefrom_np`), every signal back to its
//   default and an empty signal mask, whatever the test process set.
// - The child dies with the test process: it is started through util-linux's `setpriv --pdeathsig KILL`
//   (Debian's util-linux is essential, so it is always there), which sets PR_SET_PDEATHSIG and then
//   becomes the program (same process ID). Linux sends that signal when the *thread* that spawned the
//   child ends, so every spawn runs on `processThreads`, whose threads live as long as the test process.
// - Reads and waits retry on EINTR; nothing traps.

import NIOConcurrencyHelpers
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// A child process of the test process: spawned, signalled, waited for.
final class ChildProcess: Sendable {
    /// How the child ended: as `Foundation.Process.TerminationReason`.
    enum TerminationReason: Sendable, Equatable {
        case exit
        case uncaughtSignal
    }

    /// Where one of the child's standard streams goes.
    enum Stream: Sendable {
        /// /dev/null.
        case null
        /// A file, created or truncated.
        case file(String)
        /// A file, appended to.
        case appending(String)
        /// A pipe the test reads through `readToEnd(_:)` or `readLines(_:)`.
        case pipe
    }

    /// The process ID.
    let processIdentifier: pid_t
    /// The reading ends of the pipes asked for, by stream (1 stdout, 2 stderr); -1 where none.
    let stdoutPipe: Int32
    let stderrPipe: Int32
    /// The wait status, once reaped (a second waitpid would find nothing).
    private let reaped = NIOLockedValueBox<Int32?>(nil)
    /// The CPU time (user and system) the child used, once reaped: what a blow-up check measures, since
    /// unlike wall time it does not grow when the machine is busy.
    private let usage = NIOLockedValueBox<Duration?>(nil)

    private init(pid: pid_t, stdoutPipe: Int32, stderrPipe: Int32) {
        self.processIdentifier = pid
        self.stdoutPipe = stdoutPipe
        self.stderrPipe = stderrPipe
    }

    deinit {
        if stdoutPipe >= 0 { close(stdoutPipe) }
        if stderrPipe >= 0 { close(stderrPipe) }
    }

    /// Spawns `path` with `arguments`, on one of `processThreads` (see the note at the top).
    /// `environment`: the whole environment when given, else the test process's own.
    static func launch(
        _ path: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        stdout: Stream = .null,
        stderr: Stream = .null
    ) async throws -> ChildProcess {
        try await processThreads.runIfActive {
            try spawnBlocking(path, arguments, environment: environment, stdout: stdout, stderr: stderr)
        }
    }

    /// `launch`, for code already running on `processThreads`.
    static func spawnBlocking(
        _ path: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        stdout: Stream = .null,
        stderr: Stream = .null
    ) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // Standard input is always /dev/null: no test feeds a child.
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var parentEnds: [Int32] = [-1, -1, -1]
        var childEnds: [Int32] = []
        defer { for fd in childEnds { close(fd) } }
        func wire(_ stream: Stream, to target: Int32) throws {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            case .appending(let path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard gnu.pipe2(&ends, O_CLOEXEC) == 0 else { throw ChildProcessError.spawn(path, errno) }
                parentEnds[Int(target)] = ends[0]
                childEnds.append(ends[1])
                // dup2 clears close-on-exec on the copy.
                posix_spawn_file_actions_adddup2(&actions, ends[1], target)
            }
        }
        do {
            try wire(stdout, to: 1)
            try wire(stderr, to: 2)
        } catch {
            for fd in parentEnds where fd >= 0 { close(fd) }
            throw error
        }
        // Nothing of the test process's leaks into the child (its sockets would outlive a closed listener).
        _ = gnu.addCloseFrom(&actions, 3)

        // Every signal back to its default, none blocked.
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let setpriv = "/usr/bin/setpriv"
        let argv: [String]
        let program: String
        if access(setpriv, X_OK) == 0 {
            program = setpriv
            argv = [setpriv, "--pdeathsig", "KILL", "--", path] + arguments
        } else {
            program = path
            argv = [path] + arguments
        }
        let environmentLines =
            (environment ?? currentEnvironment()).map { "\($0.key)=\($0.value)" }
        var pid = pid_t()
        let status = withCStrings(argv) { cArgv in
            withCStrings(environmentLines) { cEnvironment in
                posix_spawn(&pid, program, &actions, &attributes, cArgv, cEnvironment)
            }
        }
        guard status == 0 else {
            for fd in parentEnds where fd >= 0 { close(fd) }
            throw ChildProcessError.spawn(path, status)
        }
        return ChildProcess(pid: pid, stdoutPipe: parentEnds[1], stderrPipe: parentEnds[2])
    }

    /// True until the child has ended (it is reaped then).
    var isRunning: Bool {
        reaped.withLockedValue { status in
            if status != nil { return false }
            var raw: Int32 = 0
            var resources = rusage()
            let r = wait4(processIdentifier, &raw, WNOHANG, &resources)
            if r == processIdentifier {
                status = raw
                usage.withLockedValue { $0 = Self.cpuTime(resources) }
                return false
            }
            return r == 0 || (r < 0 && errno == EINTR)
        }
    }

    /// Blocks until the child ends; call it on `processThreads`. Returns `terminationStatus`.
    @discardableResult
    func waitUntilExit() -> Int32 {
        while true {
            if let status = reaped.withLockedValue({ $0 }) { return Self.code(status) }
            var raw: Int32 = 0
            var resources = rusage()
            let r = wait4(processIdentifier, &raw, 0, &resources)
            if r == processIdentifier {
                usage.withLockedValue { $0 = Self.cpuTime(resources) }
                reaped.withLockedValue { $0 = raw }
            } else if r < 0 && errno != EINTR {
                // Reaped by a concurrent `isRunning`: its status is stored, or the child is gone.
                if let status = reaped.withLockedValue({ $0 }) { return Self.code(status) }
                return -1
            }
        }
    }

    /// The exit code, or the signal that ended the child (as `Foundation.Process`); -1 while it runs.
    var terminationStatus: Int32 {
        guard let status = reaped.withLockedValue({ $0 }) else { return -1 }
        return Self.code(status)
    }

    /// The CPU time the child used (user plus system); nil while it runs.
    var cpuTime: Duration? { usage.withLockedValue { $0 } }

    private static func cpuTime(_ r: rusage) -> Duration {
        .seconds(Int64(r.ru_utime.tv_sec) + Int64(r.ru_stime.tv_sec))
            + .microseconds(Int64(r.ru_utime.tv_usec) + Int64(r.ru_stime.tv_usec))
    }

    /// Whether the child exited or was ended by a signal; nil while it runs.
    var terminationReason: TerminationReason? {
        guard let status = reaped.withLockedValue({ $0 }) else { return nil }
        return Self.signalled(status) ? .uncaughtSignal : .exit
    }

    /// Sends `signal` (a no-op once the child has been reaped: its ID may be another process's now).
    func signal(_ signal: Int32) {
        reaped.withLockedValue { status in
            if status == nil { _ = kill(processIdentifier, signal) }
        }
    }

    /// SIGTERM.
    func terminate() { signal(SIGTERM) }

    /// Ends the child at once (SIGKILL) and reaps it: cleanup for a `defer`, where nothing can be
    /// awaited. Blocks only for the kernel to end the process (milliseconds), never for a graceful drain,
    /// so it does not hold one of the two cooperative threads of a 2-core machine for seconds.
    func stopNow() {
        signal(SIGKILL)
        waitUntilExit()
    }

    /// Reads the pipe of `stream` (1 or 2) to its end; blocking, on `processThreads`.
    func readToEnd(_ stream: Int32 = 1) -> [UInt8] {
        readUntil(stream) { _ in false }
    }

    /// Reads the pipe of `stream` until `enough` says so (given all read so far) or the pipe ends.
    func readUntil(_ stream: Int32 = 1, _ enough: ([UInt8]) -> Bool) -> [UInt8] {
        let fd = stream == 2 ? stderrPipe : stdoutPipe
        precondition(fd >= 0, "stream \(stream) was not asked for as a pipe")
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !enough(data) {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                data.append(contentsOf: buffer[0..<n])
            } else if n == 0 || errno != EINTR {
                break
            }
        }
        return data
    }

    /// Reads both pipes to their ends at once (a child that fills one while the other is read would
    /// block forever otherwise); blocking, on `processThreads`.
    func readBothToEnd() -> (stdout: [UInt8], stderr: [UInt8]) {
        var out: [UInt8] = []
        var err: [UInt8] = []
        var fds = [
            pollfd(fd: stdoutPipe, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stderrPipe, events: Int16(POLLIN), revents: 0),
        ]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while fds.contains(where: { $0.fd >= 0 }) {
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in fds.indices where fds[i].fd >= 0 && fds[i].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(fds[i].fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    if i == 0 { out.append(contentsOf: buffer[0..<n]) } else { err.append(contentsOf: buffer[0..<n]) }
                } else if n == 0 || errno != EINTR {
                    fds[i].fd = -1  // poll skips negative descriptors; `deinit` closes the real one
                }
            }
        }
        return (out, err)
    }

    private static func signalled(_ status: Int32) -> Bool {
        let low = status & 0x7f
        return low != 0 && low != 0x7f
    }

    private static func code(_ status: Int32) -> Int32 {
        signalled(status) ? status & 0x7f : (status >> 8) & 0xff
    }
}

enum ChildProcessError: Error, CustomStringConvertible {
    case spawn(String, Int32)

    var description: String {
        switch self {
        case .spawn(let path, let code): "could not start \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// glibc's GNU extensions, which Swift's Glibc module does not import (it does not define _GNU_SOURCE):
/// looked up once. Both are in every glibc since 2.34 (Debian 12 has 2.36); without them the test
/// process could not start a child that does not hold its descriptors, so their absence traps here,
/// once, with the reason.
private struct GNUExtensions: Sendable {
    let pipe2: @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32

    init() {
        func symbol<T>(_ name: String, as type: T.Type) -> T {
            guard let found = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
                fatalError("glibc 2.34 or later is needed for the tests' child processes (\(name) is missing)")
            }
            return unsafeBitCast(found, to: type)
        }
        pipe2 = symbol("pipe2", as: (@convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32).self)
        addCloseFrom = symbol(
            "posix_spawn_file_actions_addclosefrom_np",
            as: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32).self
        )
    }
}

private let gnu = GNUExtensions()

/// The test process's environment, read from `environ`.
private func currentEnvironment() -> [String: String] {
    var result: [String: String] = [:]
    var pointer = environ
    while let entry = pointer.pointee {
        let line = String(cString: entry)
        if let equals = line.firstIndex(of: "=") {
            result[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        pointer += 1
    }
    return result
}

/// Calls `body` with a NULL-terminated array of C strings copied from `strings`.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for p in pointers { free(p) } }
    return body(pointers)
}
