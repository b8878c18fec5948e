// `httpdns-bench save-loop PATH` (hidden): saves the cache file PATH and its service-list file beside it, over
// and over, each time one number higher, printing "saved N" once both saves of round N have returned.
// The crash-safety test kills it with SIGKILL at random moments and checks that both files
// still load and are never older than the last round printed, and that the next start removes what the
// killed save left behind. It writes through the same code the resolver saves with.

import ArgumentParser
import HTTPDNSCommandLine
import Foundation
import HTTPDNSCore
import HTTPDNSLookup

struct SaveLoopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "save-loop",
        abstract: "Save a cache file over and over (crash-safety test).",
        shouldDisplay: false
    )

    @Argument(help: "The cache file; the service lists go to PATH.servers.")
    var path: String

    @Option(help: "Entries in each save (a bigger file widens the window a kill can land in).")
    var entries = 2000

    @Option(help: "Rounds to save (0: until killed).")
    var rounds = 0

    func run() throws {
        guard (1...4096).contains(entries) else { throw ValidationError("--entries: give 1 to 4096") }
        let servers = ServiceListPersistence.path(besideCache: path)
        var round = 0
        while rounds == 0 || round < rounds {
            round += 1
            let now = SystemWallClock().now()
            var configuration = CacheConfiguration()
            configuration.capacity = entries
            var cache = DNSCache(configuration: configuration)
            for i in 0..<entries {
                cache.store(
                    CacheKey(network: "save-loop", name: "n\(i).test", family: .ipv4),
                    addresses: [IPAddress("10.0.\(i / 256).\(i % 256)")!],
                    ttl: 3600,
                    source: "round-\(round)",
                    now: now
                )
            }
            try CachePersistence.save(cache.snapshot(now: now), path: path)
            let list = ServiceList(
                ipv4: [IPAddress("10.\(round / 65536 % 256).\(round / 256 % 256).\(round % 256)")!],
                ipv6: [],
                fetched: now,
                lifetime: .seconds(round)
            )
            try ServiceListPersistence.save(["save-loop": list], path: servers)
            FileHandle.standardOutput.write(Data("saved \(round)\n".utf8))  // unbuffered: the test reads it live
        }
    }
}
