import Foundation
import HTTPDNSCore
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Saves and loads the cache as JSON.
///
/// Writes are atomic: a temporary file created with mode 0600 in the same directory is written, synced
/// and renamed over the old one, and then the directory is synced, so a crash (or a power cut) leaves
/// either the old file or the new one, and the file is never readable by other users (it tells which
/// names were looked up). The writer holds an advisory lock (flock) on its temporary until the rename:
/// a temporary nobody holds was left by a killed process, and `removeLeftovers(besides:)` deletes it at
/// the next start. Reads are bounded
/// (`CacheSnapshot.maxFileBytes`) and validated (`CacheSnapshot.load(from:capacity:)`): a file that is
/// too big, torn, corrupt, foreign or of another version is ignored with a warning and the resolver starts
/// cold; invalid entries are dropped and counted. Only a regular file the user owns and nobody else may
/// write is read (`FileTrust`): its answers are served as the upstream's, so a file another user could
/// plant answers in is ignored with a warning, and a FIFO or a device, which could block the read for
/// ever, is never read.
package enum CachePersistence {
    /// Why a cache file is not to be read, from its type, owner and permissions; nil: read it.
    struct FileTrust: Equatable, Sendable {
        let reason: String

        /// `regular`: it is a regular file; `permissions`: its mode's permission bits; `owner`: its owner's
        /// user ID; `user`: the process's effective user ID.
        static func refusal(regular: Bool, permissions: Int, owner: UInt, user: UInt) -> FileTrust? {
            guard regular else {
                return FileTrust(reason: "not a regular file (a FIFO, a device or a folder could block the read)")
            }
            guard owner == user else {
                return FileTrust(reason: "owned by user \(owner), not by this process's user \(user)")
            }
            guard permissions & 0o022 == 0 else {
                return FileTrust(
                    reason: "writable by other users (mode \(String(permissions & 0o777, radix: 8))): chmod go-w it"
                )
            }
            return nil
        }
    }

    static func load(path: String, capacity: Int = CacheSnapshot.defaultLoadCapacity, logger: Logger)
        -> CacheSnapshot?
    {
        // Its type, owner and mode through FileManager, not stat(2): stat is one of Apple's required-reason
        // APIs (file timestamps), which the privacy manifest declares none of (PrivacyManifestTests).
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            // No file yet is the first start; one that is there but cannot be looked at is said.
            if FileManager.default.fileExists(atPath: path) {
                logger.warning(
                    "ignoring unreadable DNS cache file",
                    metadata: ["path": "\(path)", "error": "\(error)"]
                )
            }
            return nil
        }
        let refusal = FileTrust.refusal(
            regular: attributes[.type] as? FileAttributeType == .typeRegular,
            permissions: (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777,
            owner: (attributes[.ownerAccountID] as? NSNumber)?.uintValue ?? .max,
            user: UInt(geteuid())
        )
        if let refusal {
            logger.warning(
                "ignoring DNS cache file: its answers would be served as the upstream's",
                metadata: ["path": "\(path)", "reason": "\(refusal.reason)"]
            )
            return nil
        }
        // Non-blocking all the same: a FIFO put in its place since would otherwise hold the open until a
        // writer comes (a read of one then finds nothing and the file is ignored as torn).
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        defer { try? handle.close() }
        let bytes: [UInt8]
        do {
            bytes = Array(try handle.read(upToCount: CacheSnapshot.maxFileBytes + 1) ?? Data())
        } catch {
            logger.warning(
                "ignoring unreadable DNS cache file",
                metadata: ["path": "\(path)", "error": "\(error)"]
            )
            return nil
        }
        guard bytes.count <= CacheSnapshot.maxFileBytes else {
            let size = (try? handle.seekToEnd()).map(Int.init) ?? bytes.count
            logger.warning(
                "ignoring DNS cache file larger than the limit",
                metadata: ["path": "\(path)", "bytes": "\(size)", "limit": "\(CacheSnapshot.maxFileBytes)"]
            )
            return nil
        }
        do {
            let loaded = try CacheSnapshot.load(from: bytes, capacity: capacity)
            if loaded.dropped > 0 {
                logger.warning(
                    "dropped invalid or surplus entries from the DNS cache file",
                    metadata: [
                        "path": "\(path)", "dropped": "\(loaded.dropped)",
                        "kept": "\(loaded.snapshot.entries.count)",
                    ]
                )
            }
            return loaded.snapshot
        } catch {
            logger.warning("ignoring DNS cache file", metadata: ["path": "\(path)", "reason": "\(error)"])
            return nil
        }
    }

    package static func save(_ snapshot: CacheSnapshot, path: String) throws {
        try writeAtomically(try snapshot.fileBytes(), to: path)
    }

    /// Writes `bytes` to a new 0600 file beside `path`, syncs it, and renames it over `path`.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        var template = Array((path + ".tmp-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw CacheWriteError("create a temporary file beside", path, errno: errno) }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var isOpen = true
        var renamed = false
        defer {
            if isOpen { close(fd) }
            if !renamed { unlink(temporary) }
        }
        // Held until the rename: tells `removeLeftovers` this temporary is still being written.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { throw CacheWriteError("lock", temporary, errno: errno) }
        guard fchmod(fd, 0o600) == 0 else { throw CacheWriteError("set mode 0600 on", temporary, errno: errno) }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw CacheWriteError("write", temporary, errno: errno)
            }
            written += n
        }
        guard fsync(fd) == 0 else { throw CacheWriteError("sync", temporary, errno: errno) }
        guard rename(temporary, path) == 0 else { throw CacheWriteError("rename over", path, errno: errno) }
        renamed = true
        isOpen = false
        guard close(fd) == 0 else { throw CacheWriteError("close", path, errno: errno) }
        try syncDirectory(of: path)
    }

    /// The rename is durable only once the directory entry is on disk: sync the directory. A file
    /// system that cannot sync a directory (EINVAL, ENOTSUP) has nothing more to offer and is not an
    /// error.
    static func syncDirectory(of path: String) throws {
        let directory = directoryName(path)
        let fd = open(directory, O_RDONLY)
        guard fd >= 0 else { throw CacheWriteError("open the directory", directory, errno: errno) }
        defer { close(fd) }
        if fsync(fd) != 0, errno != EINVAL, errno != ENOTSUP {
            throw CacheWriteError("sync the directory", directory, errno: errno)
        }
    }

    /// Deletes the temporaries of `paths` (`PATH.tmp-XXXXXX`), files of one folder, that no live writer
    /// holds: what a process killed while saving left behind. Lists the folder once. Returns how many
    /// it removed.
    @discardableResult
    static func removeLeftovers(besides paths: [String]) -> Int {
        guard let first = paths.first else { return 0 }
        let directory = directoryName(first)
        let prefixes = paths.map { fileName($0) + ".tmp-" }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        var removed = 0
        for name in names
        where prefixes.contains(where: { name.hasPrefix($0) && name.utf8.count == $0.utf8.count + 6 }) {
            let candidate = directory + "/" + name
            let fd = open(candidate, O_RDONLY | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            // A writer still holds its lock: leave its file alone.
            if flock(fd, LOCK_EX | LOCK_NB) == 0, unlink(candidate) == 0 { removed += 1 }
            close(fd)
        }
        return removed
    }

    static func directoryName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The last component of `path` (all of it when it has no slash).
    static func fileName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }
}

/// The cache file could not be written; says which step failed on which file.
struct CacheWriteError: Error, CustomStringConvertible {
    var description: String

    init(_ step: String, _ path: String, errno code: Int32) {
        description = "could not \(step) \(path): \(String(cString: strerror(code)))"
    }
}
