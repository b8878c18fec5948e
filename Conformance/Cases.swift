// The cases. Each one does what an app does and returns what the app (or the origin) can see, as
// text; the plain side and the HTTPDNS side must return the same text. Names are stable: scripts
// and the CHANGELOG refer to them.

import Foundation
import HTTPDNSKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct ConformanceCase: Sendable {
    let name: String
    /// False where HTTPDNS must hand the request back to the system (the result then proves the
    /// hand-back); true where the HTTPDNS side must really have gone through HTTPDNS.
    var intercepted = true
    /// Both sides run with the origin as the system's HTTP proxy (curl's `http_proxy`, which corelibs
    /// reads; on Apple platforms the system's proxy settings are the machine's own, so the case only
    /// proves the hand-back there).
    var behindSystemProxy = false
    /// Why the case cannot run on swift-corelibs-foundation (it lacks what the case uses): printed as
    /// SKIP there and not counted; nil: it runs everywhere.
    var unavailableOnCorelibs: String? = nil
    let run: @Sendable (Harness) async throws -> String
}

/// A POST body the cases share.
let formBody = Data("a=1&b=two".utf8)

let allCases: [ConformanceCase] =
    basicCases + bodyCases + redirectCases + cookieCases + cacheCases
    + timingCases + delegateCases + trustCases + authCases + policyCases + clientCases

// MARK: Requests and responses

let basicCases: [ConformanceCase] = [
    .init(name: "get-text") { h in "\(await load(h.session(), h.request("/status?code=200")))" },
    .init(name: "default-request-headers") { h in "\(await load(h.session(), h.request("/echo")))" },
    .init(name: "user-agent-set-by-app") { h in
        var r = h.request("/echo")
        r.setValue("MyApp/1.0", forHTTPHeaderField: "User-Agent")
        return "\(await load(h.session(), r))"
    },
    .init(name: "session-additional-headers") { h in
        let c = Harness.fresh()
        c.httpAdditionalHeaders = ["X-Session": "s1", "User-Agent": "SessionAgent/2"]
        return "\(await load(h.session(c), h.request("/echo")))"
    },
    .init(name: "request-header-beats-session-header") { h in
        let c = Harness.fresh()
        c.httpAdditionalHeaders = ["X-Both": "session"]
        var r = h.request("/echo")
        r.setValue("request", forHTTPHeaderField: "X-Both")
        return "\(await load(h.session(c), r))"
    },
    .init(name: "head-request") { h in "\(await load(h.session(), h.request("/bytes?n=10", method: "HEAD")))" },
    .init(name: "delete-request") { h in "\(await load(h.session(), h.request("/echo", method: "DELETE")))" },
    .init(name: "gzip-decoded") { h in "\(await load(h.session(), h.request("/gzip")))" },
    .init(name: "accept-encoding-set-by-app") { h in
        var r = h.request("/gzip")
        r.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        return "\(await load(h.session(), r))"
    },
    .init(name: "status-404") { h in "\(await load(h.session(), h.request("/nowhere")))" },
    .init(name: "status-204") { h in "\(await load(h.session(), h.request("/status?code=204")))" },
    .init(name: "status-500") { h in "\(await load(h.session(), h.request("/status?code=500")))" },
    .init(name: "query-percent-encoded") { h in
        "\(await load(h.session(), h.request("/echo?q=a%20b&x=%E4%B8%AD")))"
    },
    .init(name: "expected-content-length") { h in
        let probe = Probe()
        let session = h.session(delegate: probe)
        let task = session.dataTask(with: h.request("/bytes?n=5000"))
        task.resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") expectedContentLength=\(probe.response?.expectedContentLength ?? -2) "
            + "countOfBytesExpectedToReceive=\(task.countOfBytesExpectedToReceive) countOfBytesReceived=\(task.countOfBytesReceived) "
            + "data=\(probe.data.count)"
    },
]

// MARK: Bodies

let bodyCases: [ConformanceCase] = [
    .init(name: "post-data-default-content-type") { h in
        "\(await load(h.session(), h.request("/echo", method: "POST", body: formBody)))"
    },
    .init(name: "post-content-type-set-by-app") { h in
        var r = h.request("/echo", method: "POST", body: Data("{\"a\":1}".utf8))
        r.setValue("application/json", forHTTPHeaderField: "Content-Type")
        return "\(await load(h.session(), r))"
    },
    .init(name: "put-data") { h in "\(await load(h.session(), h.request("/echo", method: "PUT", body: formBody)))" },
    .init(name: "upload-task-data") { h in
        "\(await upload(h.session(), h.request("/echo", method: "POST"), data: Data(repeating: 7, count: 100_000)))"
    },
    .init(name: "upload-task-file") { h in
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-upload-\(getpid())")
        try Data(repeating: 9, count: 70_000).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return "\(await upload(h.session(), h.request("/echo", method: "PUT"), file: file))"
    },
    .init(name: "body-stream-with-length") { h in
        var r = h.request("/echo", method: "POST")
        r.httpBodyStream = InputStream(data: Data(repeating: 1, count: 3000))
        r.setValue("3000", forHTTPHeaderField: "Content-Length")
        return "\(await load(h.session(), r))"
    },
    .init(name: "upload-progress") { h in
        let probe = Probe()
        let session = h.session(delegate: probe)
        let task = session.uploadTask(with: h.request("/echo", method: "POST"), from: Data(repeating: 3, count: 64_000))
        task.resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") progressCalled=\(probe.sentCalls > 0) last=\(probe.lastSent.0)/\(probe.lastSent.1) "
            + "countOfBytesSent=\(task.countOfBytesSent) countOfBytesExpectedToSend=\(task.countOfBytesExpectedToSend)"
    },
    .init(name: "download-completion-handler") { h in
        let session = h.session()
        return await withCheckedContinuation { continuation in
            session.downloadTask(with: h.url("/bytes?n=20000")) { location, response, error in
                let size = location.flatMap { try? Data(contentsOf: $0) }?.count
                continuation.resume(
                    returning:
                        "error=\(error.map(errorCode) ?? "none") status=\((response as? HTTPURLResponse)?.statusCode ?? -1) "
                        + "location=\(location == nil ? "nil" : "file") bytes=\(size ?? -1)"
                )
            }.resume()
        }
    },
    .init(name: "download-delegate") { h in
        let probe = DownloadProbe()
        let session = h.session(delegate: probe)
        let task = session.downloadTask(with: h.url("/bytes?n=30000"))
        task.resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") file=\(probe.fileBytes ?? -1) progressCalled=\(probe.writeCalls > 0) "
            + "expected=\(probe.expected) countOfBytesExpectedToReceive=\(task.countOfBytesExpectedToReceive)"
    },
]

// MARK: Redirects

func redirectCase(_ code: Int, method: String) -> ConformanceCase {
    .init(name: "redirect-\(code)-\(method.lowercased())") { h in
        let probe = Probe()
        let session = h.session(delegate: probe)
        let task = session.dataTask(
            with: h.request("/redirect?code=\(code)&to=/echo", method: method, body: method == "POST" ? formBody : nil)
        )
        task.resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") events=\(probe.log) body=[\(String(decoding: probe.data, as: UTF8.self).replacingOccurrences(of: "\n", with: " | "))]"
    }
}

let redirectCases: [ConformanceCase] = [
    redirectCase(301, method: "POST"), redirectCase(302, method: "POST"), redirectCase(303, method: "POST"),
    redirectCase(307, method: "POST"), redirectCase(308, method: "POST"), redirectCase(302, method: "GET"),
    .init(name: "redirect-chain-current-request") { h in
        let probe = Probe()
        let session = h.session(delegate: probe)
        let task = session.dataTask(with: h.url("/chain"))
        task.resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") events=\(probe.log) original=\(task.originalRequest?.url?.path ?? "nil") "
            + "current=\(task.currentRequest?.url?.path ?? "nil") response=\(task.response?.url?.path ?? "nil")"
    },
    .init(name: "redirect-refused-by-delegate") { h in
        let probe = Probe()
        probe.redirect = .refuse
        let session = h.session(delegate: probe)
        session.dataTask(with: h.url("/redirect?code=302&to=/echo")).resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") events=\(probe.log) body=[\(String(decoding: probe.data, as: UTF8.self))]"
    },
    .init(name: "redirect-rewritten-by-delegate") { h in
        let probe = Probe()
        probe.redirect = .addHeader
        let session = h.session(delegate: probe)
        session.dataTask(with: h.url("/redirect?code=302&to=/echo")).resume()
        let error = await probe.completion()
        let hop = String(decoding: probe.data, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("x-hop") }
        return "error=\(error.map(errorCode) ?? "none") events=\(probe.log) seen=\(hop)"
    },
    .init(name: "redirect-without-delegate") { h in "\(await load(h.session(), h.request("/chain")))" },
]

// MARK: Cookies

/// Sets `cookie` through the origin, then returns what the next request carried.
func cookieRoundTrip(_ session: URLSession, _ h: Harness, set cookie: String = "a=1", then request: URLRequest? = nil)
    async -> String
{
    let first = await load(session, h.request("/set-cookie?c=\(cookie)"))
    let second = await load(session, request ?? h.request("/echo"))
    let sent = second.text.split(separator: "\n").filter { $0.hasPrefix("cookie") }
    return "set=\(first.status ?? -1) sent=\(sent)"
}

let cookieCases: [ConformanceCase] = [
    .init(name: "cookie-round-trip") { h in await cookieRoundTrip(h.session(Harness.fresh()), h) },
    .init(name: "cookie-set-by-app-kept") { h in
        var r = h.request("/echo")
        r.setValue("x=1", forHTTPHeaderField: "Cookie")
        let sent = await load(h.session(Harness.fresh()), r).text.split(separator: "\n").filter {
            $0.hasPrefix("cookie")
        }
        return "sent=\(sent)"
    },
    .init(name: "cookie-set-by-app-with-stored-cookie") { h in
        var r = h.request("/echo")
        r.setValue("x=1", forHTTPHeaderField: "Cookie")
        return await cookieRoundTrip(h.session(Harness.fresh()), h, then: r)
    },
    .init(name: "cookie-handling-off-for-request") { h in
        var r = h.request("/echo")
        r.httpShouldHandleCookies = false
        return await cookieRoundTrip(h.session(Harness.fresh()), h, then: r)
    },
    .init(name: "cookie-session-should-set-off") { h in
        let c = Harness.fresh()
        c.httpShouldSetCookies = false
        return await cookieRoundTrip(h.session(c), h)
    },
    .init(name: "cookie-accept-policy-never") { h in
        let c = Harness.fresh()
        c.httpCookieAcceptPolicy = .never
        return await cookieRoundTrip(h.session(c), h)
    },
    .init(name: "cookie-ephemeral-not-shared") { h in
        let before = HTTPCookieStorage.shared.cookies?.count ?? 0
        let trip = await cookieRoundTrip(h.session(.ephemeral), h, set: "eph=1")
        let after = HTTPCookieStorage.shared.cookies?.count ?? 0
        return "\(trip) sharedGrew=\(after > before)"
    },
    .init(name: "cookie-default-session-shared-store") { h in
        let trip = await cookieRoundTrip(h.session(.default), h, set: "def=1")
        let inShared = HTTPCookieStorage.shared.cookies?.contains { $0.name == "def" } ?? false
        return "\(trip) inShared=\(inShared)"
    },
    .init(name: "cookie-custom-storage") { h in
        let c = Harness.fresh()
        let storage = HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: "conformance")
        c.httpCookieStorage = storage
        let trip = await cookieRoundTrip(h.session(c), h, set: "cus=1")
        let inCustom = storage.cookies?.contains { $0.name == "cus" } ?? false
        return "\(trip) inCustom=\(inCustom)"
    },
]

// MARK: Cache

func cacheSession(_ h: Harness, policy: URLRequest.CachePolicy = .useProtocolCachePolicy) -> URLSession {
    let c = Harness.fresh()
    // A disk cache of its own (corelibs keeps responses on disk only), in this side's own home folder.
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-cache-\(getpid())")
    c.urlCache = URLCache(memoryCapacity: 4 << 20, diskCapacity: 16 << 20, diskPath: folder.path)
    c.requestCachePolicy = policy
    return h.session(c)
}

func twice(_ h: Harness, _ path: String, policy: URLRequest.CachePolicy) async -> String {
    let session = cacheSession(h)
    let id = "\(path)-\(policy.rawValue)-\(h.viaHTTPDNS)"
    var r = h.request("\(path)?id=\(id)")
    let first = await load(session, r)
    r.cachePolicy = policy
    let second = await load(session, r)
    let count = await load(session, h.request("/count?id=\(id)")).text
    return "first=\(first) second=\(second) origin=\(count.split(separator: " ").first ?? "")"
}

let cacheCases: [ConformanceCase] = [
    .init(name: "cache-etag-revalidation") { h in await twice(h, "/etag", policy: .useProtocolCachePolicy) },
    .init(name: "cache-fresh-use-protocol-policy") { h in await twice(h, "/fresh", policy: .useProtocolCachePolicy) },
    .init(name: "cache-reload-ignoring-local") { h in await twice(h, "/fresh", policy: .reloadIgnoringLocalCacheData) },
    .init(name: "cache-return-cache-else-load") { h in await twice(h, "/fresh", policy: .returnCacheDataElseLoad) },
    .init(name: "cache-return-cache-dont-load-cached") { h in await twice(h, "/fresh", policy: .returnCacheDataDontLoad)
    },
    .init(name: "cache-reload-ignoring-local-and-remote") { h in
        await twice(h, "/fresh", policy: .reloadIgnoringLocalAndRemoteCacheData)
    },
    .init(name: "cache-reload-revalidating") { h in await twice(h, "/etag", policy: .reloadRevalidatingCacheData) },
    .init(name: "cache-return-cache-dont-load-empty", intercepted: false) { h in
        var r = h.request("/fresh?id=empty-\(h.viaHTTPDNS)")
        r.cachePolicy = .returnCacheDataDontLoad
        return "\(await load(cacheSession(h), r))"
    },
]

// MARK: Timeouts, cancellation, connections

let timingCases: [ConformanceCase] = [
    .init(name: "timeout-request") { h in
        var r = h.request("/slow?ms=3000")
        r.timeoutInterval = 1
        return "\(await load(h.session(), r))"
    },
    .init(name: "timeout-session-request") { h in
        let c = Harness.fresh()
        c.timeoutIntervalForRequest = 1
        return "\(await load(h.session(c), h.request("/slow?ms=3000")))"
    },
    .init(name: "timeout-resource") { h in
        let c = Harness.fresh()
        c.timeoutIntervalForResource = 1
        return "\(await load(h.session(c), h.request("/drip?n=40&ms=100")))"
    },
    .init(name: "cancel-mid-body") { h in
        let probe = Probe()
        probe.cancelAfterFirstData = true
        let session = h.session(delegate: probe)
        session.dataTask(with: h.url("/drip?n=30&ms=50")).resume()
        let error = await probe.completion()
        return "error=\(error.map(errorCode) ?? "none") events=\(probe.log)"
    },
    .init(name: "max-connections-per-host") { h in
        let c = Harness.fresh()
        c.httpMaximumConnectionsPerHost = 1
        let session = h.session(c)
        let id = "conc-\(h.viaHTTPDNS)"
        let results = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<3 {
                group.addTask { await load(session, h.request("/concurrent?id=\(id)&ms=300")).status ?? -1 }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        let count = await load(session, h.request("/count?id=\(id)")).text
        return "statuses=\(results.sorted()) \(count)"
    },
    .init(name: "task-metrics") { h in
        let probe = Probe()
        let session = h.session(delegate: probe)
        session.dataTask(with: h.url("/bytes?n=10")).resume()
        _ = await probe.completion()
        // Give the metrics call (made around completion) a moment on the delegate queue.
        await withCheckedContinuation { c in session.delegateQueue.addOperation { c.resume() } }
        guard let m = probe.metrics else { return "metrics=none" }
        let t = m.transactionMetrics.last
        return "metrics=yes transactions=\(m.transactionMetrics.count) url=\(t?.request.url?.path ?? "nil") "
            + "status=\((t?.response as? HTTPURLResponse)?.statusCode ?? -1) fetchStart=\(t?.fetchStartDate != nil) "
            + "interval=\(m.taskInterval.duration >= 0)"
    },
]

// MARK: Delegate paths

let delegateCases: [ConformanceCase] = [
    .init(name: "response-disposition-cancel") { h in
        let probe = Probe()
        probe.disposition = .cancel
        let session = h.session(delegate: probe)
        session.dataTask(with: h.url("/bytes?n=100")).resume()
        let error = await probe.completion()
        return "error=\(error.map(errorCode) ?? "none") events=\(probe.log) data=\(probe.data.count)"
    },
    .init(name: "response-disposition-become-download") { h in
        let probe = Probe()
        probe.disposition = .becomeDownload
        let session = h.session(delegate: probe)
        session.dataTask(with: h.url("/bytes?n=100")).resume()
        let error = await probe.completion()
        return "error=\(error.map(errorCode) ?? "none") events=\(probe.log) data=\(probe.data.count)"
    },
]

// MARK: Server trust (an origin whose CA nobody trusts)

func trustCase(_ name: String, answer: URLSession.AuthChallengeDisposition?) -> ConformanceCase {
    .init(name: name) { h in
        let probe = Probe()
        if let answer {
            probe.challengeAnswer = answer
            probe.credential = nil
        }
        let session = h.session(Harness.fresh(), delegate: answer == nil ? nil : probe)
        if answer == nil { return "\(await load(session, URLRequest(url: h.secureURL("/"))))" }
        session.dataTask(with: h.secureURL("/")).resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") events=\(probe.log) body=[\(String(decoding: probe.data, as: UTF8.self))]"
    }
}

let trustCases: [ConformanceCase] = [
    trustCase("server-trust-untrusted-without-delegate", answer: nil),
    trustCase("server-trust-untrusted-default-handling", answer: .performDefaultHandling),
    // What "continue without credential" arrives as, and a bare .useCredential on Apple platforms.
    trustCase("server-trust-untrusted-reject-protection-space", answer: .rejectProtectionSpace),
    trustCase("server-trust-untrusted-cancel", answer: .cancelAuthenticationChallenge),
    // A naive delegate answering every challenge with its user and password: no trust credential, so
    // the untrusted certificate stands (Apple accepts a server only with `URLCredential(trust:)`).
    .init(name: "server-trust-untrusted-password-credential") { h in
        let probe = Probe()
        probe.challengeAnswer = .useCredential
        probe.credential = URLCredential(user: "user", password: "secret", persistence: .none)
        let session = h.session(Harness.fresh(), delegate: probe)
        session.dataTask(with: h.secureURL("/")).resume()
        let error = await probe.completion()
        return
            "error=\(error.map(errorCode) ?? "none") events=\(probe.log) body=[\(String(decoding: probe.data, as: UTF8.self))]"
    },
    // URLSession asks a delegate about the server's certificate once per new TLS connection: three
    // requests of one session, one kept-alive connection, one question (pinning runs, and runs once).
    .init(name: "server-trust-asked-once-per-connection") { h in
        let probe = Probe()
        probe.acceptsServerTrust = true
        let session = h.session(Harness.fresh(), delegate: probe)
        var statuses: [Int] = []
        for _ in 0..<3 { statuses.append(await load(session, URLRequest(url: h.secureURL("/"))).status ?? -1) }
        return "statuses=\(statuses) events=\(probe.log)"
    },
]

// MARK: Authentication

func authCase(
    _ name: String,
    path: String,
    method: String = "GET",
    answer: URLSession.AuthChallengeDisposition = .useCredential,
    password: String = "secret"
) -> ConformanceCase {
    .init(name: name) { h in
        let probe = Probe()
        probe.credential = URLCredential(user: "user", password: password, persistence: .none)
        probe.challengeAnswer = answer
        let session = h.session(Harness.fresh(), delegate: probe)
        session.dataTask(with: h.request(path, method: method, body: method == "POST" ? formBody : nil)).resume()
        let error = await probe.completion()
        return "error=\(error.map(errorCode) ?? "none") events=\(probe.log) status=\(probe.response?.statusCode ?? -1) "
            + "body=[\(String(decoding: probe.data, as: UTF8.self))]"
    }
}

let authCases: [ConformanceCase] = [
    .init(name: "auth-stored-credential-default-handling") { h in
        let probe = Probe()
        probe.challengeAnswer = .performDefaultHandling
        let c = Harness.fresh()
        let storage = URLCredentialStorage()
        let space = URLProtectionSpace(
            host: "localhost",
            port: h.port,
            protocol: "http",
            realm: "conformance",
            authenticationMethod: NSURLAuthenticationMethodHTTPBasic
        )
        storage.setDefaultCredential(
            URLCredential(user: "user", password: "secret", persistence: .forSession),
            for: space
        )
        c.urlCredentialStorage = storage
        let session = h.session(c, delegate: probe)
        session.dataTask(with: h.url("/basic")).resume()
        let error = await probe.completion()
        return "error=\(error.map(errorCode) ?? "none") status=\(probe.response?.statusCode ?? -1) "
            + "body=[\(String(decoding: probe.data, as: UTF8.self).replacingOccurrences(of: "who are you", with: ""))]"
    },
    authCase("auth-basic-get", path: "/basic"),
    authCase("auth-basic-post", path: "/basic", method: "POST"),
    authCase("auth-basic-wrong-password", path: "/basic", password: "nope"),
    authCase("auth-basic-cancel", path: "/basic", answer: .cancelAuthenticationChallenge),
    authCase("auth-basic-default-handling", path: "/basic", answer: .performDefaultHandling),
    authCase("auth-digest-get", path: "/digest"),
    .init(name: "auth-without-delegate") { h in "\(await load(h.session(Harness.fresh()), h.request("/basic")))" },
]

// MARK: What the system decides about the request

let policyCases: [ConformanceCase] = [
    .init(name: "network-rules-cellular-forbidden") { h in
        var r = h.request("/echo")
        r.allowsCellularAccess = false
        return "\(await load(h.session(), r))"
    },
    .init(name: "marked-handled-left-to-the-system", intercepted: false) { h in
        var r = h.request("/echo")
        HTTPDNS.markHandled(&r)
        return "\(await load(h.session(), r))"
    },
    .init(
        name: "background-configuration-left-to-the-system",
        intercepted: false,
        unavailableOnCorelibs: "corelibs has no background sessions (URLSessionConfiguration.background traps)"
    ) { h in
        #if canImport(Darwin)
            // Its tasks run outside the app, where no URLProtocol runs: enabling leaves it as it was.
            let c = URLSessionConfiguration.background(withIdentifier: "conformance.\(getpid())")
            h.httpdns?.enable(on: c)
            return "protocolClasses=\((c.protocolClasses ?? []).map { "\($0)" }.filter { $0.hasPrefix("HTTPDNS") })"
        #else
            return "not run"
        #endif
    },
    .init(name: "proxy-407-from-the-systems-proxy", intercepted: false, behindSystemProxy: true) { h in
        "\(await load(h.session(Harness.fresh()), h.request("/echo")))"
    },
]

// MARK: A third-party-style client

/// What Alamofire-style code does on top of URLSession's public API: an adapter that adds headers, a
/// validator that accepts 200..<300, a retrier that tries again once on 503.
let clientCases: [ConformanceCase] = [
    .init(name: "client-adapter-validator-retrier") { h in
        let session = h.session(Harness.fresh())
        func adapt(_ r: URLRequest) -> URLRequest {
            var r = r
            r.setValue("Bearer t0ken", forHTTPHeaderField: "Authorization")
            r.setValue("adapter", forHTTPHeaderField: "X-Client")
            return r
        }
        let id = "client-\(h.viaHTTPDNS)"
        var attempts: [Int] = []
        for _ in 0..<2 {
            let outcome = await load(session, adapt(h.request("/flaky?id=\(id)")))
            attempts.append(outcome.status ?? -1)
            if let status = outcome.status, (200..<300).contains(status) { break }
        }
        let echo = await load(session, adapt(h.request("/echo")))
        let seen = echo.text.split(separator: "\n").filter { $0.hasPrefix("authorization") || $0.hasPrefix("x-client") }
        return "attempts=\(attempts) seen=\(seen)"
    }
]
