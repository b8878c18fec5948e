// How a load's answer reaches the URL loading system's client: a response and its body as it comes (or
// all at the end where corelibs keeps only the last chunk), a download written to a file (corelibs), and
// a cached response the load decided holds. Every call goes through the load's `ClientGate`.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension HTTPDNSURLProtocol {
    /// Hands the response and its body to the client: every chunk as it comes where the task's
    /// delegate receives them, else (corelibs' completion handlers keep only the last chunk) all at
    /// the end, in one call to the client queue. `beforeFinishing` runs before the last client call.
    static func deliver(
        _ response: HTTPEngineResponse,
        as urlResponse: HTTPURLResponse,
        request: URLRequest,
        context: LoadContext,
        gate: ClientGate,
        beforeFinishing: () -> Void
    ) async throws {
        let policy = Translation.cacheStoragePolicy(
            method: request.httpMethod ?? "GET",
            requestHeaders: request.allHTTPHeaderFields ?? [:],
            status: Int(response.status.code),
            headers: response.headers
        )
        let clientPolicy = context.delivery.storagePolicy(policy)
        context.delivery.responseArrived(expectedLength: urlResponse.expectedContentLength)
        // Where the loading system does not keep a URLProtocol's responses in the session's cache
        // (corelibs), the protocol does, as the system's own protocol would.
        var cacheable = policy == .allowed ? context.delivery.cacheCapacity.map { CacheableBody(capacity: $0) } : nil
        if context.delivery.isCorelibsDownload {
            try await deliverDownload(
                response,
                as: urlResponse,
                context: context,
                gate: gate,
                beforeFinishing: beforeFinishing
            )
        } else if context.delivery.deliversEveryChunk {
            gate.send { $0.urlProtocol($1, didReceive: urlResponse, cacheStoragePolicy: clientPolicy) }
            // Back-pressure: past 1 MiB handed over, wait for the delegate queue to catch up, so a slow
            // delegate slows the server down instead of piling data up in queued operations.
            var handedOver = 0
            for try await chunk in response.body {
                await gate.waitWhileSuspended()
                let data = Data(chunk.readableBytesView)
                guard gate.send({ $0.urlProtocol($1, didLoad: data) }) else { return }
                cacheable?.append(data)
                handedOver += data.count
                if handedOver >= 1 << 20 {
                    await context.host.delegateQueueCaughtUp()
                    handedOver = 0
                }
            }
            beforeFinishing()
            let kept = cacheable?.data
            gate.finish { client, me in
                client.urlProtocolDidFinishLoading(me)
                if let kept { context.delivery.storeInCache(urlResponse, data: kept) }
            }
        } else {
            var all = Data()
            for try await chunk in response.body {
                await gate.waitWhileSuspended()
                all.append(contentsOf: chunk.readableBytesView)
                guard gate.isOpen else { return }
            }
            cacheable?.append(all)
            beforeFinishing()
            let body = all
            let kept = cacheable?.data
            gate.finish { client, me in
                client.urlProtocol(me, didReceive: urlResponse, cacheStoragePolicy: clientPolicy)
                if !body.isEmpty { client.urlProtocol(me, didLoad: body) }
                client.urlProtocolDidFinishLoading(me)
                if let kept { context.delivery.storeInCache(urlResponse, data: kept) }
            }
        }
    }

    /// Answers from the URL cache: the system is told the cached response holds, then it is handed over
    /// as a load would (corelibs' own protocol does the same).
    static func deliverCached(_ cached: UncheckedCachedResponse, gate: ClientGate) {
        gate.finish { client, me in
            client.urlProtocol(me, cachedResponseIsValid: cached.response)
            client.urlProtocol(me, didReceive: cached.response.response, cacheStoragePolicy: .notAllowed)
            if !cached.response.data.isEmpty { client.urlProtocol(me, didLoad: cached.response.data) }
            client.urlProtocolDidFinishLoading(me)
        }
    }

    /// Answers with the cached response a 304 confirmed, its header fields refreshed by the 304's
    /// (`CacheUse.refreshed`), and keeps that refreshed response in the cache, so it is fresh for as long
    /// as the 304 said: handed over as a load would be, for the system to store (Apple) or stored here
    /// (corelibs).
    static func deliverRevalidated(
        _ cached: UncheckedCachedResponse,
        notModified: HTTPHeaders,
        context: LoadContext,
        gate: ClientGate
    ) {
        guard let stored = cached.response.response as? HTTPURLResponse, let url = stored.url,
            let facts = cached.facts,
            let response = HTTPURLResponse(
                url: url,
                statusCode: stored.statusCode,
                httpVersion: "HTTP/1.1",
                headerFields: CacheUse.refreshed(facts.headers, by: notModified.map { ($0.name, $0.value) })
            )
        else { return deliverCached(cached, gate: gate) }
        let data = cached.response.data
        let policy = context.delivery.storagePolicy(cached.response.storagePolicy)
        let storesHere = context.delivery.cacheCapacity != nil
        gate.finish { client, me in
            client.urlProtocol(me, didReceive: response, cacheStoragePolicy: policy)
            if !data.isEmpty { client.urlProtocol(me, didLoad: data) }
            client.urlProtocolDidFinishLoading(me)
            if storesHere { context.delivery.storeInCache(response, data: data) }
        }
    }

    /// A download task on swift-corelibs-foundation: the body goes to a file, as corelibs' own protocol
    /// writes it, and corelibs is told where it is (it hands that file to the delegate or the completion
    /// handler); the file is removed once the delegate queue has run them.
    static func deliverDownload(
        _ response: HTTPEngineResponse,
        as urlResponse: HTTPURLResponse,
        context: LoadContext,
        gate: ClientGate,
        beforeFinishing: () -> Void
    ) async throws {
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("CFNetworkDownload_\(UUID().uuidString).tmp")
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw URLError(.cannotCreateFile, userInfo: [NSLocalizedDescriptionKey: "cannot create \(file.path)"])
        }
        let handle = try FileHandle(forWritingTo: file)
        var kept = false
        defer {
            try? handle.close()
            if !kept { try? FileManager.default.removeItem(at: file) }
        }
        gate.send { $0.urlProtocol($1, didReceive: urlResponse, cacheStoragePolicy: .notAllowed) }
        var total: Int64 = 0
        for try await chunk in response.body {
            await gate.waitWhileSuspended()
            try handle.write(contentsOf: Data(chunk.readableBytesView))
            total += Int64(chunk.readableBytes)
            context.delivery.downloadProgress(
                written: Int64(chunk.readableBytes),
                total: total,
                expected: urlResponse.expectedContentLength
            )
            guard gate.isOpen else { return }
        }
        try handle.synchronize()
        beforeFinishing()
        kept = true
        gate.finish { client, me in
            if context.delivery.setDownloadedFile(file, of: me) {
                client.urlProtocolDidFinishLoading(me)
            } else {
                client.urlProtocol(
                    me,
                    didFailWithError: URLError(
                        .cannotCreateFile,
                        userInfo: [
                            NSLocalizedDescriptionKey:
                                "this Foundation gives a URLProtocol no way to hand over a download"
                        ]
                    )
                )
            }
            context.delivery.afterDelegateQueue { try? FileManager.default.removeItem(at: file) }
        }
    }
}

/// A response from the URL cache, handed to the load's task: the loading system made it and nothing
/// changes it after.
struct UncheckedCachedResponse: @unchecked Sendable {
    let response: CachedURLResponse

    init(_ response: CachedURLResponse) { self.response = response }

    /// What the cache rules need to know; nil for a response that is not HTTP.
    var facts: CacheUse.Cached? {
        guard let http = response.response as? HTTPURLResponse else { return nil }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields { headers["\(name)"] = "\(value)" }
        return CacheUse.Cached(headers: headers, storedAt: nil)
    }
}

/// A response body kept for the URL cache while it is delivered, dropped once it outgrows what the
/// cache would keep (`CacheUse.fits`).
struct CacheableBody {
    let capacity: Int
    private(set) var data: Data? = Data()

    init(capacity: Int) { self.capacity = capacity }

    mutating func append(_ more: Data) {
        guard var kept = data else { return }
        kept.append(more)
        data = CacheUse.fits(size: kept.count, capacity: capacity) ? kept : nil
    }
}
