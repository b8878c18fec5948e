// Crash safety of what we persist: the cache file and the service-list file beside it
// survive SIGKILL at any moment (always loadable, never older than the last save that returned), and
// the next start removes the temporaries a killed save left behind, but never one a live writer holds.
// The writer is `httpdns-bench save-loop` (the resolver's own save code), killed at random moments.

import Foundation
@testable import HTTPDNSCore
import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.serialized) struct CrashSafetyTests {
    func temporaries(in dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.contains(".tmp-") }
    }

    /// A resolver start with `path` as its cache file: what an app's next launch does.
    func start(_ path: String) throws {
        var configuration = ResolverConfiguration()
        configuration.persistencePath = path
        _ = try HTTPDNSResolver(configuration: configuration, engine: try HTTPEngine(), logger: testLogger)
    }

    @Test func savesSurviveSIGKILLAtRandomMomentsAndTheNextStartCleansUp() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-kill-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/cache.json"
        var killedMidWrite = 0
        // 40 in CI; HTTPDNS_KILL_LOOP=N for a longer run.
        let kills = Int(ProcessInfo.processInfo.environment["HTTPDNS_KILL_LOOP"] ?? "") ?? 40
        for iteration in 0..<kills {
            let process = try await ChildProcess.launch(httpdnsBenchBinary, ["save-loop", path], stdout: .pipe)
            let wanted = Int.random(in: 1...3)
            // Wait for the wanted number of completed rounds (the event), then kill at a random moment
            // within the next round or two.
            var printed = try await processThreads.runIfActive { () -> String in
                let data = process.readUntil(1) { read in read.filter { $0 == UInt8(ascii: "\n") }.count >= wanted }
                return String(decoding: data, as: UTF8.self)
            }
            if iteration % 2 == 0 {
                try await Task.sleep(for: .microseconds(Int.random(in: 0...20_000)))
            } else {
                // Every other kill lands while a save is under way: as soon as its temporary appears.
                let watched = dir
                _ = try await processThreads.runIfActive {
                    let until = ContinuousClock.now + .seconds(5)
                    while ContinuousClock.now < until,
                        !((try? FileManager.default.contentsOfDirectory(atPath: watched)) ?? []).contains(where: {
                            $0.contains(".tmp-")
                        })
                    {}
                }
            }
            process.signal(SIGKILL)
            printed += try await processThreads.runIfActive {
                let rest = String(decoding: process.readToEnd(), as: UTF8.self)
                process.waitUntilExit()
                return rest
            }
            #expect(process.terminationReason == .uncaughtSignal, "it was killed, not finished: \(printed)")
            let last = try #require(printed.split(separator: "\n").last.flatMap { Int($0.dropFirst(6)) }, "\(printed)")
            if !temporaries(in: dir).isEmpty { killedMidWrite += 1 }

            // Both files load, and hold the last round that returned or the one after it (renamed just
            // before the kill), never an older one.
            let snapshot = try #require(
                CachePersistence.load(path: path, logger: testLogger),
                "cache file after round \(last)"
            )
            #expect(snapshot.entries.count == 2000)
            let rounds = Set(snapshot.entries.map(\.entry.source))
            #expect(rounds == ["round-\(last)"] || rounds == ["round-\(last + 1)"], "\(rounds) after round \(last)")
            let lists = ServiceListPersistence.load(path: path + ".servers", logger: testLogger)
            let round = try #require(lists["save-loop"], "service-list file after round \(last)").lifetime
            #expect([Duration.seconds(last), .seconds(last + 1)].contains(round), "\(round) after round \(last)")

            // The next start removes what the killed save left.
            try start(path)
            #expect(temporaries(in: dir).isEmpty, "\(temporaries(in: dir))")
        }
        #expect(killedMidWrite > 0, "no kill landed while a save was under way")
        print("kill loop: \(kills) kills, \(killedMidWrite) left an unfinished save behind; every file loaded")
    }

    @Test func aTemporaryALiveWriterHoldsIsKept() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-leftover-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/cache.json"
        // One left by a dead writer, one a live writer holds (its flock), and files that only look alike.
        let dead = path + ".tmp-AbC123"
        let live = path + ".servers.tmp-XyZ789"
        for file in [dead, live, path + ".tmp-toolongname", dir + "/other.json.tmp-AbC123"] {
            #expect(FileManager.default.createFile(atPath: file, contents: Data("{".utf8)))
        }
        let fd = open(live, O_RDONLY)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX) == 0)
        try start(path)
        #expect(!FileManager.default.fileExists(atPath: dead))
        #expect(FileManager.default.fileExists(atPath: live), "a live writer's file is left alone")
        #expect(FileManager.default.fileExists(atPath: path + ".tmp-toolongname"))
        #expect(FileManager.default.fileExists(atPath: dir + "/other.json.tmp-AbC123"))
    }
}
