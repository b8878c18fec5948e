// What the HTTPDNSCommandLine tests share: the usage error a parse ends in, read as `httpdns` prints it,
// and a throw-away directory for secret files.
//
// Parsing runs the options' `validate()`, which reads the process's environment (curl's proxy variables,
// the HTTPDNS_* secrets). Tests that need an environment pass one to the method that takes it
// (`proxySettings(environment:)`, `apply(to:environment:)`); the ones that parse assume those variables
// are unset, as they are where `swift test` runs.

import ArgumentParser
import Foundation
import Testing

/// The message of the usage error that parsing `arguments` as `T` ends in (what the command prints after
/// "Error: "), checking that it is a usage error (exit 64); nil, recorded as an issue, when it parses.
func usageError<T: ParsableArguments>(
    _ type: T.Type,
    _ arguments: [String],
    sourceLocation: SourceLocation = #_sourceLocation
) -> String? {
    do {
        _ = try T.parse(arguments)
    } catch {
        #expect(T.exitCode(for: error) == .validationFailure, "\(arguments)", sourceLocation: sourceLocation)
        return T.message(for: error)
    }
    Issue.record("\(arguments) parsed without a usage error", sourceLocation: sourceLocation)
    return nil
}

/// A directory of its own under the temporary directory (a UUID in its name) for secret files. Remove it
/// with `remove()` in a `defer` right after making it.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("httpdns-commandline-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` in the directory; the file need not exist.
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Writes `text` as UTF-8 to `name` and returns its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        try write(name, bytes: Data(text.utf8))
    }

    /// Writes `bytes` to `name` and returns its path.
    @discardableResult
    func write(_ name: String, bytes: Data) throws -> String {
        let file = url.appendingPathComponent(name)
        try bytes.write(to: file)
        return file.path
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}
