// The hosts(5) file the server answers first: read, and read again when it changes (size or
// modification time); a file that cannot be used keeps the previous table.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

extension HTTPDNSService {
    /// The file's modification time and size, as one text (nil when it cannot be read).
    static func stamp(_ path: String) -> String? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
        return stamp(attributes)
    }

    static func stamp(_ attributes: [FileAttributeKey: Any]) -> String {
        "\(attributes[.modificationDate] ?? "")/\(attributes[.size] ?? "")"
    }

    static func readHosts(_ path: String) throws -> ([String: [IPAddress]], String) {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let stamp = stamp(attributes)
        if let size = attributes[.size] as? Int, size > HostsFile.maxBytes {
            // Refused before reading: a huge file would stall every reload.
            throw HostsFile.ParseError(
                line: 0,
                reason: "\(path): \(size) bytes, over the \(HostsFile.maxBytes >> 20) MiB limit"
            )
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        do {
            return (try HostsFile.parse(text), stamp)
        } catch {
            throw HostsFile.ParseError(line: (error as? HostsFile.ParseError)?.line ?? 0, reason: "\(path): \(error)")
        }
    }

    /// Reads the hosts file again if it changed since it was last read (size or modification time):
    /// true when the table was replaced, false when the file had not changed (or there is none).
    ///
    /// Throws the read or parse error of a changed file that cannot be used; the previous table stays,
    /// and the file is not read again until it changes once more. The polling loop calls this too.
    ///
    /// With `force` (SIGHUP: the operator says the file is ready), the file is read even when its stamp
    /// did not change (rewritten in place within the clock's resolution, to the same size).
    @discardableResult
    package func reloadHosts(force: Bool = false) throws -> Bool {
        guard let path = configuration.hostsFile else { return false }
        return try Self.reloadIfChanged(path, hosts: hosts, statics: configuration.staticHosts, force: force)
    }

    static func reloadIfChanged(
        _ path: String,
        hosts: NIOLockedValueBox<Hosts>,
        statics: [String: [IPAddress]],
        force: Bool = false
    ) throws -> Bool {
        let stamp = stamp(path)
        guard force || stamp != hosts.withLockedValue({ $0.stamp }) else { return false }
        do {
            let (table, newStamp) = try readHosts(path)
            hosts.withLockedValue { $0 = Hosts(table: statics.merging(table) { $1 }, stamp: newStamp) }
            return true
        } catch {
            hosts.withLockedValue { $0.stamp = stamp }  // do not retry a broken file every second
            throw error
        }
    }
}
