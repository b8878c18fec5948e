// The `httpdns resolve` contract, run as a user would: the built binary, its stdout, stderr and exit code.

import Foundation
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
    /// The CPU time the program used (user plus system): for blow-up checks, which wall time on a busy
    /// machine cannot make.
    var cpuTime: Duration = .zero
}

/// Runs the `httpdns` binary built next to the tests (scripts/test.sh builds it with --build-tests).
/// The blocking wait happens on NIO's thread pool, never on the test's concurrency threads.
/// `environment`: variables set for this run on top of the test's own (e.g. `https_proxy`).
func runCLI(_ arguments: [String], namespace: String? = nil, environment: [String: String] = [:]) async throws
    -> CLIResult
{
    try await processThreads.runIfActive {
        try runCLIBlocking(arguments, namespace: namespace, environment: environment)
    }
}

func runCLIBlocking(_ arguments: [String], namespace: String?, environment: [String: String] = [:]) throws
    -> CLIResult
{
    let binary = URL(fileURLWithPath: httpdnsBinary)
    try #require(
        FileManager.default.isExecutableFile(atPath: binary.path),
        "build the CLI first: swift build --build-tests"
    )
    if let namespace {
        return try runProcessBlocking(
            "/usr/sbin/ip",
            ["netns", "exec", namespace, binary.path] + arguments,
            environment: environment
        )
    }
    return try runProcessBlocking(binary.path, arguments, environment: environment)
}

/// Runs a program to its end and collects its output. Blocking: call it on `processThreads`.
/// `environment` is added to the test's own.
func runProcessBlocking(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws
    -> CLIResult
{
    let merged =
        environment.isEmpty
        ? nil : ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    let child = try ChildProcess.spawnBlocking(path, arguments, environment: merged, stdout: .pipe, stderr: .pipe)
    let (stdout, stderr) = child.readBothToEnd()
    let status = child.waitUntilExit()
    return CLIResult(
        status: status,
        stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self),
        cpuTime: child.cpuTime ?? .zero
    )
}

/// Starts a long-running program and returns it with the first line it prints (its listening address).
/// `stderr`: a file its standard error goes to (discarded without).
func startInBackground(_ path: String, _ arguments: [String], stderr: String? = nil) async throws
    -> (ChildProcess, String)
{
    let process = try await ChildProcess.launch(
        path,
        arguments,
        stdout: .pipe,
        stderr: stderr.map { .file($0) } ?? .null
    )
    // Read off the concurrency pool: the read blocks.
    let line = try await processThreads.runIfActive {
        String(decoding: process.readUntil(1) { $0.contains(UInt8(ascii: "\n")) }, as: UTF8.self)
    }
    return (process, line)
}

/// Threads that wait on child processes (a CLI run can take 20 s, a drained serve 10 s). Not NIO's shared
/// pool: it has one thread per core, and the code under test needs it (getaddrinfo for LocalDNS, file
/// I/O); two long waits parked on it stalled every other suite of a plain `swift test` for 10 s.
let processThreads: NIOThreadPool = {
    let pool = NIOThreadPool(numberOfThreads: 16)
    pool.start()
    return pool
}()

/// `httpdns serve` as a separate process, as an operator runs it: its memory can be read, a hostile
/// client cannot harm the test process, and signals reach it. Its stdout goes to a file (it prints while
/// it runs and drains; a pipe nobody reads would fill and block it).
struct ServeProcess {
    let process: ChildProcess
    let port: Int
    /// The file its stdout goes to; stderr goes to this path plus ".err".
    let stdout: String
    /// How many times `signalWhileStarting` was sent before it printed its address.
    var signalsSent = 0

    /// `httpdns serve` on a free loopback port with a hosts file answering served.example.com, plus
    /// `extra` flags.
    static func start(_ extra: [String] = []) async throws -> ServeProcess {
        let hosts = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-hostile-\(UUID())").path
        try "198.51.0.7 served.example.com\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        return try await launch(["--listen", "127.0.0.1:0", "--hosts", hosts] + extra)
    }

    /// `httpdns serve ARGUMENTS` (which must listen on 127.0.0.1, first), returned once it printed that
    /// address.
    /// With `descriptorLimit`, the process may open that many descriptors at most (`ulimit -n`).
    /// `command` is the subcommand (`proxy` prints its address the same way). With `signalWhileStarting`,
    /// that signal is sent every 2 ms from the time the process runs its own code (it has an event-loop
    /// thread: no process can act on a signal before its main) until it prints its address.
    static func launch(
        _ arguments: [String],
        descriptorLimit: Int? = nil,
        command: String = "serve",
        signalWhileStarting: Int32? = nil
    ) async throws -> ServeProcess {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-serve-\(UUID()).out").path
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: out + ".err", contents: nil)
        let program: String
        let programArguments: [String]
        if let descriptorLimit {
            // The shell sets the limit, then becomes httpdns (same process ID).
            program = "/bin/sh"
            programArguments =
                ["-c", "ulimit -n \(descriptorLimit) && exec \"$0\" \"$@\"", httpdnsBinary, command] + arguments
        } else {
            program = httpdnsBinary
            programArguments = [command] + arguments
        }
        let process = try await ChildProcess.launch(
            program,
            programArguments,
            stdout: .appending(out),
            stderr: .appending(out + ".err")
        )
        var port: Int?
        var signalsSent = 0
        try await eventually(
            "serve printed its address",
            within: .seconds(20),
            pollEvery: .milliseconds(signalWhileStarting == nil ? 20 : 2)
        ) {
            if let signalWhileStarting, process.isRunning, hasEventLoopThread(pid: process.processIdentifier) {
                process.signal(signalWhileStarting)
                signalsSent += 1
            }
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            if let listening = text.range(of: "listening on "),
                let host = text.range(of: "127.0.0.1:", range: listening.upperBound..<text.endIndex)
            {
                port = Int(text[host.upperBound...].prefix { $0.isNumber })
            }
            return port != nil || !process.isRunning
        }
        let stderr = (try? String(contentsOfFile: out + ".err", encoding: .utf8)) ?? ""
        let found = try #require(port, "serve did not start: \(stderr)")
        return ServeProcess(process: process, port: found, stdout: out, signalsSent: signalsSent)
    }

    var rss: Int? { residentBytes(pid: process.processIdentifier) }

    /// What it printed on stdout so far.
    var output: String { (try? String(contentsOfFile: stdout, encoding: .utf8)) ?? "" }

    /// What it printed on stderr so far.
    var errors: String { (try? String(contentsOfFile: stdout + ".err", encoding: .utf8)) ?? "" }

    func signal(_ sig: Int32) { process.signal(sig) }

    /// Waits for the process to end (bounded), and returns its exit status.
    func exitStatus(within limit: Duration = .seconds(30)) async throws -> Int32 {
        try await eventually("serve exited", within: limit, pollEvery: .milliseconds(20)) { !process.isRunning }
        return process.terminationStatus
    }

    func stop() async {
        process.terminate()
        let p = process
        _ = try? await processThreads.runIfActive { p.waitUntilExit() }
    }
}

/// The Chromium binary Debian installs, if it is there.
let chromiumBinary: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
    FileManager.default.isExecutableFile(atPath: $0)
}
