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
    static func readHosts(_ path: String) throws -> ([String: [IPAddress]], String) {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let stamp = "\(attributes[.modificationDate] ?? "")/\(attributes[.size] ?? "")"
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
    @discardableResult
    package func reloadHosts() throws -> Bool {
        guard let path = configuration.hostsFile else { return false }
        return try Self.reloadIfChanged(path, hosts: hosts, statics: configuration.staticHosts)
    }

    static func reloadIfChanged(
        _ path: String,
        hosts: NIOLockedValueBox<Hosts>,
        statics: [String: [IPAddress]]
    ) throws -> Bool {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let stamp = attributes.map { "\($0[.modificationDate] ?? "")/\($0[.size] ?? "")" }
        guard stamp != hosts.withLockedValue({ $0.stamp }) else { return false }
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
