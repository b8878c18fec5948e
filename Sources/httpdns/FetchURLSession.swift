// `httpdns fetch --engine urlsession`: the same request made through URLSession with
// HTTPDNSURLProtocol installed, as an app would. Same flags, same --trace-json keys; -L is the
// session's redirect handling (the delegate below allows or refuses each hop).

import ArgumentParser
import HTTPDNSKit
import Foundation
import HTTPDNSEngine
import HTTPDNSLookup
import HTTPDNSURLSession
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension FetchCommand {
    func runThroughURLSession(_ httpdns: HTTPDNS) async throws {
        // The front door's resolver and engine. Every name is intercepted (not only the policy's, as
        // an app's sessions are): the resolver itself sends names outside --only to --local-dns.
        var setup = HTTPDNSURLProtocol.Setup(resolver: httpdns.resolver, engine: httpdns.engine, intercept: .all)
        setup.maxRedirects = maxRedirects
        let metrics = NIOLockedValueBox<HTTPDNSTaskMetrics?>(nil)
        setup.onMetrics = { m in metrics.withLockedValue { $0 = m } }
        let interception = Interception(setup)
        defer { interception.end() }

        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = requestMethod
        for (name, value) in parsedHeaders { request.addValue(value, forHTTPHeaderField: name) }
        if let data {
            if data.hasPrefix("@") {
                let path = String(data.dropFirst())
                request.httpBodyStream = InputStream(fileAtPath: path)
                let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
                if let size { request.setValue("\(size)", forHTTPHeaderField: "Content-Length") }
            } else {
                request.httpBody = Data(data.utf8)
            }
            if request.value(forHTTPHeaderField: "Content-Type") == nil {
                request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            }
        }
        if !compressed {
            // curl without --compressed asks for no encoding; URLSession would ask for gzip.
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        if let maxTime { request.timeoutInterval = maxTime }

        let trace = Trace(enabled: verbose)
        trace.line(
            "* URLSession with HTTPDNSURLProtocol; resolving through \(self.resolver.resolvers.joined(separator: ", "))"
        )
        let sink: OutputSink
        do {
            sink = try OutputSink.create(output)
        } catch {
            await httpdns.shutdown()
            throw failure(error)
        }
        let delegate = FetchSessionDelegate(follow: location, sink: sink) { response in
            let statusLine =
                "HTTP \(response.statusCode) \(HTTPURLResponse.localizedString(forStatusCode: response.statusCode))"
            trace.line("< \(statusLine)")
            let fields = response.allHeaderFields.compactMap { (k, v) in (k as? String).map { ($0, "\(v)") } }
                .sorted { $0.0 < $1.0 }
            for (name, value) in fields { trace.line("< \(name): \(value)") }
            if include { try writeHead(statusLine, fields, to: sink) }
        }
        let configuration = URLSessionConfiguration.ephemeral
        interception.enable(on: configuration)
        if let maxTime { configuration.timeoutIntervalForResource = maxTime }
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: request).resume()
        var error = await delegate.completion()
        if let failed = delegate.writeError { error = failed }
        do {
            try sink.close()
        } catch let closing {
            error = error ?? closing
        }
        if let error {
            // The code the app's URLSession sees (-1009 offline, -1202 an untrusted certificate…).
            if let urlError = error as? URLError {
                trace.line("* URLSession failed: NSURLErrorDomain \(urlError.errorCode)")
            }
            await httpdns.shutdown()
            throw failure((error as? URLError)?.userInfo[HTTPDNSURLProtocol.engineErrorKey] as? any Error ?? error)
        }
        if let m = metrics.withLockedValue({ $0 }), var last = m.hops.last {
            last.redirects = m.hops.count - 1
            trace.line(
                "* Connected to \(last.ip ?? "?") port \(last.port ?? 0) via \(last.sourceText), \(last.protocolText)\(last.reused ? " (reused)" : "")"
            )
            if last.redirects > 0 { trace.line("* Followed \(last.redirects) redirect(s) to \(last.url)") }
            try report(last, trace: trace)
        }
        await httpdns.shutdown()
    }
}

/// Writes the body as it arrives, allows or refuses redirects (-L), and reports the end. `@unchecked
/// Sendable`: URLSession calls it on its serial delegate queue, and the state the waiting task reads
/// (`result`, `waiter`, `_writeError`) is under `lock`; the `let`s are set once in `init`.
final class FetchSessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let follow: Bool
    let sink: OutputSink
    let onResponse: (HTTPURLResponse) throws -> Void
    private let lock = NSLock()
    private var result: ((any Error)?)?
    private var waiter: CheckedContinuation<(any Error)?, Never>?
    /// The first failed write (exit 23); the task is cancelled when it happens.
    private var _writeError: (any Error)?
    var writeError: (any Error)? { lock.withLock { _writeError } }

    init(follow: Bool, sink: OutputSink, onResponse: @escaping (HTTPURLResponse) throws -> Void) {
        self.follow = follow
        self.sink = sink
        self.onResponse = onResponse
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(follow ? request : nil)
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        do {
            if let http = response as? HTTPURLResponse { try onResponse(http) }
            completionHandler(.allow)
        } catch {
            failedWrite(error)
            completionHandler(.cancel)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard writeError == nil else { return }
        do {
            try sink.write(data)
        } catch {
            failedWrite(error)
            dataTask.cancel()
        }
    }

    private func failedWrite(_ error: any Error) {
        lock.withLock { if _writeError == nil { _writeError = error } }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        lock.withLock {
            if let waiter {
                waiter.resume(returning: error)
                self.waiter = nil
            } else {
                result = .some(error)
            }
        }
    }

    func completion() async -> (any Error)? {
        await withCheckedContinuation { continuation in
            lock.withLock {
                if let result { continuation.resume(returning: result) } else { waiter = continuation }
            }
        }
    }
}
