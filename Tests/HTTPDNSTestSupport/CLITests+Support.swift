// The `httpdns resolve` contract, run as a user would: the built binary, its stdout, stderr and exit code.

import Foundation
import HTTPDNSEngine
import NIOPosix
import Testing

struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs the `httpdns` binary built next to the tests (scripts/test.sh builds it with --build-tests).
/// The blocking wait happens on NIO's thread pool, never on the test's concurrency threads.
func runCLI(_ arguments: [String], namespace: String? = nil) async throws -> CLIResult {
    try await NIOThreadPool.singleton.runIfActive { try runCLIBlocking(arguments, namespace: namespace) }
}

func runCLIBlocking(_ arguments: [String], namespace: String?) throws -> CLIResult {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let binary = root.appendingPathComponent(".build/debug/httpdns")
    try #require(
        FileManager.default.isExecutableFile(atPath: binary.path),
        "build the CLI first: swift build --build-tests"
    )
    if let namespace {
        return try runProcessBlocking("/usr/sbin/ip", ["netns", "exec", namespace, binary.path] + arguments)
    }
    return try runProcessBlocking(binary.path, arguments)
}

/// Runs a program to its end and collects its output. Blocking: call it on NIO's thread pool.
func runProcessBlocking(_ path: String, _ arguments: [String]) throws -> CLIResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CLIResult(
        status: process.terminationStatus,
        stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self)
    )
}

/// Starts a long-running program and returns it with the first line it prints (its listening address).
/// `stderr`: a file its standard error goes to (discarded without).
func startInBackground(_ path: String, _ arguments: [String], stderr: String? = nil) async throws -> (Process, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    if let stderr {
        _ = FileManager.default.createFile(atPath: stderr, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderr))
    } else {
        process.standardError = FileHandle.nullDevice
    }
    try process.run()
    // Read off the concurrency pool: availableData blocks.
    let line = try await NIOThreadPool.singleton.runIfActive { () -> String in
        var data = Data()
        while !data.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            data.append(chunk)
        }
        return String(decoding: data, as: UTF8.self)
    }
    return (process, line)
}
