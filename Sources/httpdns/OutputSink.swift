// Where `fetch` writes the body: stdout or `-o FILE`. Every write can fail — EPIPE when the reader of a
// pipe has gone (`| head -c 10`), ENOSPC on a full disk — and must end the transfer with curl's exit 23,
// not a trap: FileHandle.write(_:) (the non-throwing form) traps on both, leaving a truncated file.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation

/// Not shared across threads at once: the engine path writes from one task, the URLSession delegate
/// from its serial delegate queue. `@unchecked` because FileHandle is not Sendable on Linux.
final class OutputSink: @unchecked Sendable {
    private let handle: FileHandle
    private let path: String?

    private init(handle: FileHandle, path: String?) {
        self.handle = handle
        self.path = path
    }

    /// Stdout, or `path` created (mode 0644) and truncated. `open(2)` rather than FileManager: an atomic
    /// create would replace a device such as /dev/full instead of writing to it.
    static func create(_ path: String?) throws -> OutputSink {
        // A closed pipe must surface as EPIPE on write, not kill the process.
        signal(SIGPIPE, SIG_IGN)
        guard let path else { return OutputSink(handle: .standardOutput, path: nil) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw FetchCommand.Failure(code: 23, message: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return OutputSink(handle: FileHandle(fileDescriptor: fd, closeOnDealloc: true), path: path)
    }

    func write(_ data: Data) throws {
        do {
            try handle.write(contentsOf: data)
        } catch {
            throw FetchCommand.Failure(
                code: 23,
                message: "cannot write \(path ?? "to standard output"): \(Self.describe(error))"
            )
        }
    }

    func close() throws {
        guard path != nil else { return }
        do {
            try handle.close()
        } catch {
            throw FetchCommand.Failure(code: 23, message: "cannot write \(path ?? ""): \(Self.describe(error))")
        }
    }

    /// "Broken pipe", "No space left on device"… for a POSIX error, else the error's own text.
    private static func describe(_ error: any Error) -> String {
        let e = error as NSError
        if e.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(e.code))) }
        if let underlying = e.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return "\(error)"
    }
}
