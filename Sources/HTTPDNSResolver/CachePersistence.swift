import Foundation
import HTTPDNSCore
import Logging

/// Saves and loads the cache as JSON. Writes are atomic (a temporary file renamed over the old one), so
/// a crash leaves either the old file or the new one; a torn, corrupt or foreign file is ignored with a
/// warning and the resolver starts cold.
enum CachePersistence {
    static func load(path: String, logger: Logger) -> CacheSnapshot? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            let snapshot = try JSONDecoder().decode(CacheSnapshot.self, from: data)
            guard snapshot.version == CacheSnapshot.currentVersion else {
                logger.warning(
                    "ignoring DNS cache file of another version",
                    metadata: ["path": "\(path)", "version": "\(snapshot.version)"]
                )
                return nil
            }
            return snapshot
        } catch {
            logger.warning("ignoring unreadable DNS cache file (torn or corrupt)", metadata: ["path": "\(path)"])
            return nil
        }
    }

    static func save(_ snapshot: CacheSnapshot, path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(snapshot)
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
