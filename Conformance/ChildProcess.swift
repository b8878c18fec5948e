// Runs one side of one case in a child process (this executable with `--child`), with a home folder
// of its own (corelibs keeps the shared cookie storage under it), and reads its result.

import Foundation

struct SideResult {
    var result: String
    var served: Int
    var exit: Int32
}

/// The longest a side may take; a side still running then is reported as hung.
let sideLimit: TimeInterval = 15

func runSide(_ name: String, _ side: String, ports: (Int, Int), doh: String, behindSystemProxy: Bool = false)
    -> SideResult
{
    let port = ports.0
    #if os(macOS) || os(Linux)
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        process.arguments = ["--child", name, side, "\(port)", "\(ports.1)", doh]
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        environment["XDG_DATA_HOME"] = home.path
        for name in [
            "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
        ] {
            environment[name] = nil
        }
        if behindSystemProxy { environment["http_proxy"] = "http://127.0.0.1:\(port)" }
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        if environment["CONFORMANCE_DEBUG"] == nil { process.standardError = FileHandle.nullDevice }
        do { try process.run() } catch { return SideResult(result: "could not start: \(error)", served: 0, exit: -1) }
        let timer = DispatchWorkItem { process.terminate() }
        DispatchQueue.global().asyncAfter(deadline: .now() + sideLimit, execute: timer)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        timer.cancel()
        let text = String(decoding: data, as: UTF8.self)
        let lines = text.split(separator: "\n")
        let result = lines.last { $0.hasPrefix("RESULT ") }.map { String($0.dropFirst(7)) }
        let served = lines.last { $0.hasPrefix("SERVED ") }.flatMap { Int($0.dropFirst(7)) } ?? 0
        if let result, process.terminationReason == .exit { return SideResult(result: result, served: served, exit: 0) }
        let how =
            process.terminationReason == .uncaughtSignal
            ? (process.terminationStatus == SIGTERM
                ? "hung past \(Int(sideLimit)) s" : "crashed (signal \(process.terminationStatus))")
            : "exited \(process.terminationStatus) without a result"
        return SideResult(
            result: how,
            served: served,
            exit: process.terminationStatus == 0 ? -2 : process.terminationStatus
        )
    #else
        return SideResult(result: "child processes are not available on this platform", served: 0, exit: -1)
    #endif
}
