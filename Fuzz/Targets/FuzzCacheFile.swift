// cache-file: CacheSnapshot.load(from:capacity:) on hostile files (what CachePersistence reads).
//
// Whatever loads: every entry passes the validity rules, keys are unique, at most `capacity` entries,
// the dropped count adds up; the snapshot saved again loads to itself with nothing dropped; and the
// cache restores it and answers lookups without trapping on extreme timestamps.

func fuzzCacheFile(_ data: [UInt8]) {
    let capacity = 8
    guard let loaded = try? CacheSnapshot.load(from: data, capacity: capacity) else { return }
    let entries = loaded.snapshot.entries
    check(entries.count <= capacity, "\(entries.count) entries kept, capacity \(capacity)")
    check(loaded.dropped >= 0, "negative dropped count")
    check(Set(entries.map(\.key)).count == entries.count, "duplicate keys kept")
    for item in entries {
        check(CacheSnapshot.isValid(item), "invalid entry kept: \(item)")
        check((try? validatedHostname(item.key.name)) == item.key.name, "name \(item.key.name) kept")
        for ip in item.entry.addresses { checkAddress(ip, "cache entry \(item.key.name)") }
    }
    let again: CacheSnapshot.LoadResult
    do {
        again = try CacheSnapshot.load(from: try loaded.snapshot.fileBytes(), capacity: capacity)
    } catch {
        fatalError("invariant broken: a loaded snapshot, saved, does not load: \(error)")
    }
    check(again.dropped == 0, "saved snapshot lost \(again.dropped) entries on reload")
    check(again.snapshot == loaded.snapshot, "saved snapshot changed on reload")

    var cache = DNSCache()
    let now = Timestamp.seconds(1_700_000_000)
    cache.restore(loaded.snapshot, now: now)
    for item in entries {
        _ = cache.lookup(item.key, now: now)
        _ = cache.lookup(item.key, now: item.entry.expiresAt)
    }
    _ = cache.snapshot(now: now)
}
