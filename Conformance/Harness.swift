// What a case runs against: a session made as the side wants (plain, or with HTTPDNS enabled on the
// same configuration), the origin's URLs, and small helpers that turn a task's outcome into a line of
// text. A case's result is that text; the parent compares the plain side's with the HTTPDNS side's.

import Foundation
import HTTPDNSKit
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

final class Harness: @unchecked Sendable {
    let viaHTTPDNS: Bool
    let port: Int
    /// The https origin's port (a certificate from a CA nobody trusts).
    let tlsPort: Int
    let httpdns: HTTPDNS?
    /// Loads HTTPDNS served (its metrics callback), to tell a case that never reached it.
    let intercepted = NIOLockedValueBox(Served())

    struct Served {
        var count = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    /// Returns once HTTPDNS has served a load, or after `limit` seconds: a load the app cancelled
    /// reports its metrics after the task has completed.
    func waitUntilServed(limit: TimeInterval = 5) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = intercepted.withLockedValue { state -> Bool in
                if state.count > 0 { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { return continuation.resume() }
            DispatchQueue.global().asyncAfter(deadline: .now() + limit) { [intercepted] in
                for waiter in intercepted.withLockedValue({ state in
                    defer { state.waiting = [] }; return state.waiting
                }) {
                    waiter.resume()
                }
            }
        }
    }

    init(viaHTTPDNS: Bool, port: Int, tlsPort: Int, doh: String) throws {
        self.viaHTTPDNS = viaHTTPDNS
        self.port = port
        self.tlsPort = tlsPort
        if viaHTTPDNS {
            var configuration = HTTPDNS.Configuration(
                resolvers: [try ResolverSpec(parsing: "doh:\(doh)")],
                policy: try HostPolicy(only: ["localhost"])
            )
            configuration.fallbackToLocalDNS = false
            configuration.network.watchesChanges = false
            let httpdns = try HTTPDNS(configuration)
            let counter = intercepted
            httpdns.onURLSessionMetrics { _ in
                let waiting = counter.withLockedValue { state in
                    state.count += 1
                    defer { state.waiting = [] }
                    return state.waiting
                }
                for waiter in waiting { waiter.resume() }
            }
            self.httpdns = httpdns
        } else {
            httpdns = nil
        }
    }

    /// `http://localhost:PORT` + `path`: a name, so the HTTPDNS side resolves it through HTTPDNS and the
    /// plain side through the system.
    func url(_ path: String) -> URL { URL(string: "http://localhost:\(port)\(path)")! }

    /// `https://localhost:TLS-PORT` + `path`.
    func secureURL(_ path: String) -> URL { URL(string: "https://localhost:\(tlsPort)\(path)")! }

    func request(_ path: String, method: String = "GET", body: Data? = nil) -> URLRequest {
        var request = URLRequest(url: url(path))
        request.httpMethod = method
        request.httpBody = body
        return request
    }

    /// A session on `configuration`, with HTTPDNS enabled on it for the HTTPDNS side (as an app does).
    func session(
        _ configuration: URLSessionConfiguration = .default,
        delegate: (any URLSessionDelegate)? = nil
    ) -> URLSession {
        if let httpdns { httpdns.enable(on: configuration) }
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// A fresh ephemeral configuration: nothing shared with the other cases of this process.
    static func fresh() -> URLSessionConfiguration { .ephemeral }
}

/// The outcome of a data or upload task, as one line.
struct Outcome: CustomStringConvertible {
    var status: Int?
    var headers: [String: String] = [:]
    var body: Data?
    var error: (any Error)?
    var url: URL?

    var text: String { body.map { String(decoding: $0, as: UTF8.self) } ?? "" }

    var description: String {
        if let error { return "error=\(errorCode(error))" }
        var parts = ["status=\(status ?? -1)"]
        for name in ["content-type", "content-encoding", "set-cookie", "etag", "location"] {
            if let value = headers.first(where: { $0.key.lowercased() == name })?.value {
                parts.append("\(name)=\(value)")
            }
        }
        parts.append("body=[\(text.replacingOccurrences(of: "\n", with: " | "))]")
        return parts.joined(separator: " ")
    }
}

func errorCode(_ error: any Error) -> String {
    let e = error as NSError
    return e.domain == NSURLErrorDomain ? "\(e.code)" : "\(e.domain):\(e.code)"
}

/// Runs a data task with a completion handler.
func load(_ session: URLSession, _ request: URLRequest) async -> Outcome {
    await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
        session.dataTask(with: request) { data, response, error in
            let http = response as? HTTPURLResponse
            var fields: [String: String] = [:]
            for (k, v) in http?.allHeaderFields ?? [:] { fields["\(k)"] = "\(v)" }
            continuation.resume(
                returning: Outcome(status: http?.statusCode, headers: fields, body: data, error: error, url: http?.url)
            )
        }.resume()
    }
}

/// Runs an upload task (from data or a file) with a completion handler.
func upload(_ session: URLSession, _ request: URLRequest, data: Data? = nil, file: URL? = nil) async -> Outcome {
    await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
        let handler: @Sendable (Data?, URLResponse?, (any Error)?) -> Void = { data, response, error in
            let http = response as? HTTPURLResponse
            continuation.resume(returning: Outcome(status: http?.statusCode, body: data, error: error))
        }
        let task =
            file.map { session.uploadTask(with: request, fromFile: $0, completionHandler: handler) }
            ?? session.uploadTask(with: request, from: data ?? Data(), completionHandler: handler)
        task.resume()
    }
}

/// A task delegate that records what it is told and answers as the case sets it up.
final class Probe: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Redirect { case follow, refuse, addHeader }
    enum Disposition { case allow, cancel, becomeDownload }

    var redirect = Redirect.follow
    var disposition = Disposition.allow
    var credential: URLCredential?
    var challengeAnswer = URLSession.AuthChallengeDisposition.useCredential
    /// Accept every server's certificate as a pinning delegate that matched does: `.useCredential` with
    /// the challenge's own trust (Apple platforms), with nil elsewhere.
    var acceptsServerTrust = false
    var cancelAfterFirstData = false

    private let lock = NIOLock()
    private var events: [String] = []
    private(set) var data = Data()
    private(set) var sentCalls = 0
    private(set) var lastSent: (Int64, Int64) = (0, 0)
    private(set) var metrics: URLSessionTaskMetrics?
    private(set) var response: HTTPURLResponse?
    private let completed = CompletionLatch()

    func note(_ event: String) { lock.withLock { events.append(event) } }
    var log: String { lock.withLock { events.joined(separator: ",") } }

    /// Waits for didCompleteWithError.
    func completion() async -> (any Error)? { await completed.wait() }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        note("redirect(\(response.statusCode)->\(request.url?.path ?? "?") \(request.httpMethod ?? "?"))")
        switch redirect {
        case .follow: completionHandler(request)
        case .refuse: completionHandler(nil)
        case .addHeader:
            var next = request
            next.setValue("from-delegate", forHTTPHeaderField: "X-Hop")
            completionHandler(next)
        }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        lock.withLock { self.response = response as? HTTPURLResponse }
        note("response(\((response as? HTTPURLResponse)?.statusCode ?? -1))")
        switch disposition {
        case .allow: completionHandler(.allow)
        case .cancel: completionHandler(.cancel)
        case .becomeDownload:
            // `.becomeDownload` (2): corelibs marks the name deprecated (it ignores the answer), Apple does not.
            completionHandler(URLSession.ResponseDisposition(rawValue: 2)!)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask)
    {
        note("becameDownload")
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let first = lock.withLock {
            defer { self.data.append(data) }
            return self.data.isEmpty
        }
        if first, cancelAfterFirstData { dataTask.cancel() }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        lock.withLock {
            sentCalls += 1
            lastSent = (totalBytesSent, totalBytesExpectedToSend)
        }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let space = challenge.protectionSpace
        note(
            "challenge(\(space.authenticationMethod) realm=\(space.realm ?? "-") failures=\(challenge.previousFailureCount))"
        )
        #if canImport(Darwin)
            // A Mac settles whether the trust object crosses the URLProtocol bridge: pinning libraries
            // (Alamofire, TrustKit) read it, and skip or block without it.
            if space.authenticationMethod == NSURLAuthenticationMethodServerTrust {
                note("serverTrust=\(space.serverTrust == nil ? "absent" : "present")")
            }
        #endif
        if acceptsServerTrust, space.authenticationMethod == "NSURLAuthenticationMethodServerTrust" {
            #if canImport(Darwin)
                return completionHandler(.useCredential, space.serverTrust.map { URLCredential(trust: $0) })
            #else
                return completionHandler(.useCredential, nil)
            #endif
        }
        completionHandler(challengeAnswer, challengeAnswer == .useCredential ? credential : nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        lock.withLock { self.metrics = metrics }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        completed.open(error)
    }
}

/// A download task delegate: where the file went and how big it was when the delegate was told.
final class DownloadProbe: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
    private let lock = NIOLock()
    private(set) var fileBytes: Int?
    private(set) var writeCalls = 0
    private(set) var expected: Int64 = 0
    private let completed = CompletionLatch()

    func completion() async -> (any Error)? { await completed.wait() }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let size = (try? Data(contentsOf: location))?.count
        lock.withLock { fileBytes = size }
    }

    func urlSession(
        _ session: URLSession,
        downloadTask: URLSessionDownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64
    ) {
        lock.withLock {
            writeCalls += 1
            expected = totalBytesExpectedToWrite
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        completed.open(error)
    }
}

/// A task's completion, waited for once: `open` before or after `wait`, the waiter gets the error.
final class CompletionLatch: @unchecked Sendable {
    private let lock = NIOLock()
    private var waiter: CheckedContinuation<(any Error)?, Never>?
    private var outcome: (any Error)??

    func open(_ error: (any Error)?) {
        let waiting = lock.withLock {
            outcome = .some(error)
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume(returning: error)
    }

    func wait() async -> (any Error)? {
        await withCheckedContinuation { continuation in
            let already: (any Error)?? = lock.withLock {
                if outcome == nil { waiter = continuation }
                return outcome
            }
            if let already { continuation.resume(returning: already) }
        }
    }
}
