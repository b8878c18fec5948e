// The load of `scripts/soak.sh`: an app's traffic through the public API, for as long as the
// soak runs, while the script injects faults around it. Each worker loops over every kind of request an
// app makes, in turn:
//   h2-get, h1-get         the engine, GET of a file whose SHA-256 is known (HTTP/2 by ALPN; an
//                          HTTP/1.1-only server)
//   h2-post, h1-post       the engine, POST of a streamed body (half with a length, half chunked), checked
//                          against the SHA-256 the echo reports
//   h2-cancel, h1-cancel   a POST whose body stalls after two chunks, cancelled there (h2: only its
//                          stream is reset)
//   get-cancel             a large download cancelled after its first chunk
//   urlsession-get, urlsession-post   URLSession through the URLProtocol, checked the same way
//   proxy-get              the engine through `httpdns proxy` (CONNECT)
// Every request writes one line to stdout: `START_MS END_MS KIND OUTCOME [DETAIL]`, with OUTCOME one of
// ok, cancelled (a cancelled request that ended as cancelled), fail (an error), mismatch (bytes differ).
// The script decides which failures a fault explains; this program only reports.

import ArgumentParser
import Crypto
import Foundation
import HTTPDNSKit
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@main
struct SoakClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak-client",
        abstract: "The soak's load: engine, URLSession and proxy requests until the time is up."
    )

    @Option(help: "The HTTPDNS server (json:URL or any --resolver form).")
    var resolver: String

    @Option(help: "PEM CA of the origin's certificates.")
    var cacert: String

    @Option(help: "The origin's HTTPS port (h2 and HTTP/1.1 by ALPN).")
    var tlsPort: Int

    @Option(help: "The origin's HTTPS port that speaks HTTP/1.1 only.")
    var h1Port: Int

    @Option(help: "`httpdns proxy`'s port on 127.0.0.1.")
    var proxyPort: Int

    @Option(help: "The origin's file folder (small.bin, mid.bin, big.bin are read for their SHA-256).")
    var www: String

    @Option(help: "How long to run.")
    var seconds: Int

    @Option(help: "Requests in flight.")
    var workers = 6

    @Option(help: "Only these kinds, comma-separated (to find which one a problem follows).")
    var kinds: String?

    func run() async throws {
        let files = try Dictionary(
            uniqueKeysWithValues: ["small.bin", "mid.bin"].map { name -> (String, String) in
                (name, hex(SHA256.hash(data: try Data(contentsOf: URL(fileURLWithPath: www + "/" + name)))))
            }
        )
        var configuration = HTTPDNS.Configuration(resolvers: [try ResolverSpec(parsing: resolver)], policy: .all)
        configuration.fallbackToLocalDNS = false
        configuration.tls.trustedCertificateFiles = [cacert]
        configuration.timeouts.lookup = .seconds(3)
        var proxied = configuration
        // The resolver's own queries go straight to the server; only the origin is reached through the proxy.
        proxied.network.proxy = HTTPProxySettings(
            all: HTTPProxy(host: "127.0.0.1", port: proxyPort),
            noProxy: ["127.0.0.1"]
        )
        let viaProxy = try HTTPDNS(proxied)
        let httpdns = try HTTPDNS(configuration)
        let session = URLSession(configuration: httpdns.urlSessionConfiguration())
        let load = Load(
            httpdns: httpdns,
            viaProxy: viaProxy,
            session: session,
            files: files,
            tls: "https://a.test:\(tlsPort)",
            tlsB: "https://b.test:\(tlsPort)",
            h1: "https://a.test:\(h1Port)"
        )
        let chosen =
            try kinds.map { list in
                try list.split(separator: ",").map { name in
                    guard let kind = Load.Kind(rawValue: String(name)) else {
                        throw ValidationError("--kinds: \(name) is not one of \(Load.Kind.allCases.map(\.rawValue))")
                    }
                    return kind
                }
            } ?? Load.Kind.rotation
        let until = ContinuousClock.now + .seconds(seconds)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var turn = worker
                    while ContinuousClock.now < until {
                        await load.one(chosen[turn % chosen.count])
                        turn += 1
                    }
                }
            }
        }
        session.invalidateAndCancel()
        await viaProxy.shutdown()
        await httpdns.shutdown()
    }
}

func hex(_ digest: some Sequence<UInt8>) -> String { digest.map { String(format: "%02x", $0) }.joined() }

func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

struct Load: Sendable {
    enum Kind: String, CaseIterable {
        case h2Get = "h2-get", h1Get = "h1-get", h2Post = "h2-post", h1Post = "h1-post"
        case h2Cancel = "h2-cancel", h1Cancel = "h1-cancel", getCancel = "get-cancel"
        case urlSessionGet = "urlsession-get", urlSessionPost = "urlsession-post", proxyGet = "proxy-get"
        /// URLSession without HTTPDNS, plain HTTP to 127.0.0.1: the platform's own share of what the
        /// URLSession kinds cost (not in the rotation; `--kinds` names it).
        case plainURLSessionGet = "plain-urlsession-get"
        /// An HTTP/1.1 GET on a new connection each time (`Connection: close`): what a connection costs,
        /// apart from what a request costs (not in the rotation; `--kinds` names it).
        case h1Close = "h1-close"

        static let rotation: [Kind] = allCases.filter { $0 != .plainURLSessionGet && $0 != .h1Close }
    }

    enum Outcome: Error {
        case ok, cancelled
        case mismatch(String)
    }

    let httpdns: HTTPDNS
    let viaProxy: HTTPDNS
    let session: URLSession
    let files: [String: String]
    let tls: String
    let tlsB: String
    let h1: String
    let output = NIOLock()

    func one(_ kind: Kind) async {
        let start = nowMs()
        let line: String
        do {
            switch try await run(kind) {
            case .ok: line = "ok"
            case .cancelled: line = "cancelled"
            case .mismatch(let what): line = "mismatch \(what)"
            }
        } catch {
            line = "fail \(String(describing: error).replacingOccurrences(of: "\n", with: " "))"
        }
        let text = "\(start) \(nowMs()) \(kind.rawValue) \(line)\n"
        output.withLock { FileHandle.standardOutput.write(Data(text.utf8)) }
    }

    func run(_ kind: Kind) async throws -> Outcome {
        switch kind {
        case .h2Get: return try await get(httpdns, tls + "/files/mid.bin", "mid.bin")
        case .h1Get: return try await get(httpdns, h1 + "/files/small.bin", "small.bin")
        case .h1Close: return try await get(httpdns, h1 + "/files/small.bin", "small.bin", close: true)
        case .proxyGet: return try await get(viaProxy, tlsB + "/files/small.bin", "small.bin")
        case .h2Post: return try await post(tlsB + "/echo")
        case .h1Post: return try await post(h1 + "/echo")
        case .h2Cancel: return try await cancelledPost(tls + "/echo")
        case .h1Cancel: return try await cancelledPost(h1 + "/echo")
        case .getCancel: return try await cancelledGet(tls + "/files/big.bin")
        case .urlSessionGet:
            let (data, response) = try await session.data(from: URL(string: tls + "/files/small.bin")!)
            return check(
                status: (response as? HTTPURLResponse)?.statusCode,
                sha: hex(SHA256.hash(data: data)),
                files["small.bin"]!
            )
        case .plainURLSessionGet:
            let (data, response) = try await URLSession.shared.data(
                from: URL(string: "http://127.0.0.1:8080/files/small.bin")!
            )
            return check(
                status: (response as? HTTPURLResponse)?.statusCode,
                sha: hex(SHA256.hash(data: data)),
                files["small.bin"]!
            )
        case .urlSessionPost:
            let body = randomBytes(Int.random(in: 1...(128 << 10)))
            var request = URLRequest(url: URL(string: tlsB + "/echo")!)
            request.httpMethod = "POST"
            let (data, response) = try await session.upload(for: request, from: Data(body))
            return try echoed(data, status: (response as? HTTPURLResponse)?.statusCode, sent: body)
        }
    }

    func get(_ client: HTTPDNS, _ url: String, _ file: String, close: Bool = false) async throws -> Outcome {
        var request = try HTTPEngineRequest(url: url, headers: close ? ["connection": "close"] : [:])
        request.timeout = .seconds(20)
        let response = try await client.engine.send(request)
        var hash = SHA256()
        for try await chunk in response.body { chunk.withUnsafeReadableBytes { hash.update(bufferPointer: $0) } }
        return check(status: Int(response.status.code), sha: hex(hash.finalize()), files[file]!)
    }

    func check(status: Int?, sha: String, _ expected: String) -> Outcome {
        guard status == 200 else { return .mismatch("status \(status.map(String.init) ?? "none")") }
        return sha == expected ? .ok : .mismatch("sha256 \(sha)")
    }

    func post(_ url: String) async throws -> Outcome {
        let body = randomBytes(Int.random(in: 1...(512 << 10)))
        let chunks = stride(from: 0, to: body.count, by: 16 << 10).map {
            Array(body[$0..<min($0 + (16 << 10), body.count)])
        }
        var request = try HTTPEngineRequest(method: .POST, url: url)
        request.timeout = .seconds(20)
        request.body = .stream(length: Bool.random() ? body.count : nil) {
            let rest = NIOLockedValueBox(chunks[...])
            return AsyncThrowingStream(unfolding: {
                rest.withLockedValue { $0.popFirst() }.map { ByteBuffer(bytes: $0) }
            })
        }
        let response = try await httpdns.engine.send(request)
        let data = Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
        return try echoed(data, status: Int(response.status.code), sent: body)
    }

    func echoed(_ data: Data, status: Int?, sent: [UInt8]) throws -> Outcome {
        struct Echo: Decodable {
            let length: Int
            let sha256: String
        }
        guard status == 200 else { return .mismatch("status \(status.map(String.init) ?? "none")") }
        let echo = try JSONDecoder().decode(Echo.self, from: data)
        let sha = hex(SHA256.hash(data: sent))
        guard echo.length == sent.count, echo.sha256 == sha else {
            return .mismatch("sent \(sent.count) bytes \(sha), the origin got \(echo.length) \(echo.sha256)")
        }
        return .ok
    }

    /// A POST whose body stops after two chunks; cancelled once the second one was taken.
    func cancelledPost(_ url: String) async throws -> Outcome {
        let (taken, tookTwo) = AsyncStream<Void>.makeStream()
        var request = try HTTPEngineRequest(method: .POST, url: url)
        request.timeout = .seconds(20)
        request.body = .stream(length: 1 << 20) {
            let count = NIOLockedValueBox(0)
            return AsyncThrowingStream(unfolding: {
                let n = count.withLockedValue {
                    $0 += 1; return $0
                }
                if n > 2 {
                    tookTwo.yield()
                    try await untilCancelled()
                }
                return ByteBuffer(repeating: 0x61, count: 16 << 10)
            })
        }
        let engine = httpdns.engine
        return try await cancel(Task { try await engine.send(request) }, when: taken, signal: tookTwo)
    }

    /// A large download, cancelled after its first chunk.
    func cancelledGet(_ url: String) async throws -> Outcome {
        var request = try HTTPEngineRequest(url: url)
        request.timeout = .seconds(20)
        let engine = httpdns.engine
        let (first, gotFirst) = AsyncStream<Void>.makeStream()
        let task = Task { () -> HTTPEngineResponse in
            let response = try await engine.send(request)
            for try await _ in response.body {
                gotFirst.yield()
                try await untilCancelled()
            }
            return response
        }
        return try await cancel(task, when: first, signal: gotFirst)
    }

    /// Cancels `task` when `moment` yields, and says how it ended. A task that ends first (a fault
    /// before the moment) finishes the stream, so this never waits for a moment that cannot come.
    func cancel(
        _ task: Task<HTTPEngineResponse, any Error>,
        when moment: AsyncStream<Void>,
        signal: AsyncStream<Void>.Continuation
    ) async throws -> Outcome {
        let watcher = Task {
            _ = try? await task.value
            signal.finish()
        }
        defer { watcher.cancel() }
        var waiting = moment.makeAsyncIterator()
        _ = await waiting.next()
        task.cancel()
        do {
            _ = try await task.value
            return .mismatch("a cancelled request succeeded")
        } catch is CancellationError {
            return .cancelled
        } catch let error as HTTPEngineError where error.code == .cancelled {
            return .cancelled
        }
    }
}

/// Waits until the task is cancelled, then throws: a body producer or reader stalled on purpose, with
/// no timer behind it.
func untilCancelled() async throws {
    let (stream, continuation) = AsyncStream<Void>.makeStream()
    for await _ in stream {}  // ends when the task is cancelled
    withExtendedLifetime(continuation) {}
    throw CancellationError()
}

func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { raw in
        for offset in stride(from: 0, to: count, by: 8) {
            withUnsafeBytes(of: generator.next()) { word in
                for i in 0..<min(8, count - offset) { raw[offset + i] = word[i] }
            }
        }
    }
    return bytes
}
