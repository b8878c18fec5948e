// Whether a load is answered from the URL cache, revalidated with a conditional request, or sent as it
// is: the request's cache policy and the cached response's freshness (RFC 9111), as the system decides
// for its own loads. The loading system hands the protocol the session cache's response for the request
// (`URLProtocol.cachedResponse`); these rules say what to do with it. Pure: facts and a clock in.

import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

enum CacheUse: Equatable {
    /// Go to the origin as the request says.
    case load
    /// The cached response is the answer; nothing goes out.
    case serveCached
    /// Ask the origin whether the cached response still holds, with these header fields; a 304 means
    /// it does (then it is the answer), anything else replaces it.
    case revalidate([String: String])

    /// What the cache needs to know of a cached response: its header fields (any case) and, where it
    /// is known, when it was stored (for a response without a usable Date; unknown and no Date: stale).
    struct Cached: Equatable {
        var headers: [String: String]
        var storedAt: Date?

        func field(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    /// The decision for a request with `policy` and its own header fields `requestHeaders`, given the
    /// cache's response for it (nil: none), at `now`.
    static func decide(
        policy: URLRequest.CachePolicy,
        requestHeaders: [String: String],
        cached: Cached?,
        now: Date
    ) -> CacheUse {
        guard let cached else { return .load }
        // An app that sends its own conditional request handles the 304 itself.
        let conditional = ["if-none-match", "if-modified-since"]
        if requestHeaders.keys.contains(where: { conditional.contains($0.lowercased()) }) { return .load }
        switch policy {
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
            return .load
        case .returnCacheDataElseLoad, .returnCacheDataDontLoad:
            return .serveCached
        case .reloadRevalidatingCacheData:
            return validators(of: cached).map(CacheUse.revalidate) ?? .load
        default:  // .useProtocolCachePolicy
            let requestDirectives = directives(requestHeaders.first { $0.key.lowercased() == "cache-control" }?.value)
            let responseDirectives = directives(cached.field("cache-control"))
            let mustAsk =
                requestDirectives.keys.contains("no-cache") || responseDirectives.keys.contains("no-cache")
                || cached.field("pragma")?.lowercased().contains("no-cache") == true || cached.field("vary") == "*"
            if !mustAsk, let age = age(of: cached, now: now), age < lifetime(of: cached, directives: responseDirectives)
            {
                return .serveCached
            }
            return validators(of: cached).map(CacheUse.revalidate) ?? .load
        }
    }

    /// The stored response's header fields after a 304 to its revalidation (RFC 9111 §4.3.4, §3.2):
    /// each field the 304 carries replaces the stored one of that name (so its Cache-Control, Date,
    /// Expires and ETag make the stored response fresh again), except the fields that describe one
    /// message's framing and the connection, which stay the stored body's own.
    static func refreshed(_ stored: [String: String], by notModified: [(name: String, value: String)])
        -> [String: String]
    {
        let kept: Set<String> = [
            "content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive",
            "proxy-connection", "te", "upgrade", "trailer",
        ]
        var fields = stored
        var joined: [String: (name: String, value: String)] = [:]
        for (name, value) in notModified where !kept.contains(name.lowercased()) {
            let key = name.lowercased()
            if let earlier = joined[key] {
                joined[key] = (earlier.name, earlier.value + ", " + value)
            } else {
                joined[key] = (name, value)
            }
        }
        for (key, field) in joined {
            for name in fields.keys where name.lowercased() == key { fields[name] = nil }
            fields[field.name] = field.value
        }
        return fields
    }

    /// If-None-Match from the ETag, If-Modified-Since from Last-Modified; nil without either.
    static func validators(of cached: Cached) -> [String: String]? {
        var fields: [String: String] = [:]
        if let etag = cached.field("etag") { fields["If-None-Match"] = etag }
        if let modified = cached.field("last-modified") { fields["If-Modified-Since"] = modified }
        return fields.isEmpty ? nil : fields
    }

    /// Seconds the response stays fresh (§4.2.1): max-age, else Expires minus Date, else a tenth of the
    /// time since Last-Modified (§4.2.2's heuristic), else none.
    static func lifetime(of cached: Cached, directives: [String: String]) -> TimeInterval {
        if let maxAge = directives["max-age"].flatMap(TimeInterval.init) { return maxAge }
        let date = cached.field("date").flatMap(httpDate)
        if let expires = cached.field("expires") {
            guard let expiry = httpDate(expires), let date else { return 0 }  // an invalid Expires: stale
            return expiry.timeIntervalSince(date)
        }
        if let modified = cached.field("last-modified").flatMap(httpDate) {
            guard let reference = date ?? cached.storedAt else { return 0 }
            return max(0, reference.timeIntervalSince(modified) / 10)
        }
        return 0
    }

    /// How old the response is (§4.2.3): since its Date (never later than when it was stored), plus
    /// its Age; nil when neither date is known.
    static func age(of cached: Cached, now: Date) -> TimeInterval? {
        var date = cached.field("date").flatMap(httpDate)
        if let stored = cached.storedAt { date = min(date ?? stored, stored) }
        guard let date else { return nil }
        let carried = cached.field("age").flatMap(TimeInterval.init) ?? 0
        return max(0, now.timeIntervalSince(date)) + carried
    }

    /// Cache-Control directives, names lowercased, values unquoted ("" for a directive without one).
    static func directives(_ value: String?) -> [String: String] {
        var result: [String: String] = [:]
        for part in (value ?? "").split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let name = pair.first, !name.isEmpty else { continue }
            result[name.lowercased()] =
                pair.count > 1 ? pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : ""
        }
        return result
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7), or the two obsolete forms it names.
    static func httpDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    /// Whether a response of `size` bytes goes into a cache of `capacity` bytes: at most a twentieth of
    /// it, as Apple's URLCache keeps (a larger one would push out everything else).
    static func fits(size: Int, capacity: Int) -> Bool { capacity > 0 && size <= capacity / 20 }
}
