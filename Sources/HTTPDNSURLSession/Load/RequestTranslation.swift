// Between Foundation's URL loading types and the engine's: requests (with their bodies), responses,
// redirects, cache policy and errors. Pure functions, apart from the stream reader.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where an intercepted request's body comes from. Data and files can be sent again (a 307/308
/// redirect); a stream only once.
enum BodySource {
    case none
    case data(Data)
    case file(URL)
    case stream(InputStreamReader)

    /// The engine's body; `length` from the request's Content-Length when the size is not known.
    func engineBody(declaredLength: Int?) throws -> HTTPRequestBody? {
        switch self {
        case .none: return nil
        case .data(let data): return .bytes(data)
        case .file(let url): return try .file(url.path)
        case .stream(let reader):
            try reader.claim()
            return .stream(length: declaredLength) { AsyncThrowingStream(unfolding: { try await reader.next() }) }
        }
    }
}

/// The length a request body is declared with, where the app did not set Content-Length.
enum BodyLength {
    /// What the task expects to send, when it knows (`countOfBytesExpectedToSend`: -1, unknown, or 0
    /// before an upload task has a body).
    static func known(taskExpects: Int64) -> Int? { taskExpects > 0 ? Int(taskExpects) : nil }

    /// The length to declare: the app's Content-Length, else the task's.
    static func declared(contentLength: String?, taskExpects: Int?) -> Int? {
        if let contentLength { return Int(contentLength) }
        return taskExpects
    }
}

/// Reads an `InputStream` in 64 KiB chunks on NIO's blocking pool, one chunk each time the connection
/// asks for one: the body is never all in memory and no concurrency thread blocks on `read`.
/// `@unchecked Sendable`: `InputStream` is not Sendable; every use of it and of the state below is
/// under `lock` (reads run on the blocking pool one at a time), so no two threads touch the stream at once.
/// A plain `NIOLock`, not a `NIOLockedValueBox`: the box is `Sendable` only for `Sendable` state.
final class InputStreamReader: @unchecked Sendable {
    private let lock = NIOLock()
    private let stream: InputStream
    private var opened = false
    private var claimed = false
    /// Chunks read ahead by `buffered(upTo:)`, sent before the rest of the stream.
    private var pending: [ByteBuffer] = []

    /// How much of a body stream is read ahead to learn its length (`buffered(upTo:)`).
    static let replayLimit = 8 << 20

    /// Whether body streams are read ahead: on Apple platforms the loading system hands a URLProtocol
    /// every body as a stream, `httpBody` included, so without reading ahead every POST would go out
    /// chunked and could not be sent again (a 401 answered with credentials, a 307 or 308). corelibs
    /// hands `httpBody` over as it is: a stream there is the app's own, and goes out as one.
    static var readsAhead: Bool {
        #if canImport(Darwin)
            return true
        #else
            return false
        #endif
    }

    /// The body as data when the stream ends within `limit` bytes: sent with its length, and again when
    /// a redirect or an authentication round needs it. A longer stream stays a stream (what was read
    /// goes first), sent once, as the system sends a stream.
    func buffered(upTo limit: Int) async throws -> BodySource {
        var read: [ByteBuffer] = []
        var size = 0
        while size <= limit {
            guard let chunk = try await next() else {
                var all = Data(capacity: size)
                for chunk in read { all.append(contentsOf: chunk.readableBytesView) }
                return .data(all)
            }
            size += chunk.readableBytes
            read.append(chunk)
        }
        lock.withLock { pending = read + pending }
        return .stream(self)
    }

    init(_ stream: InputStream) { self.stream = stream }

    /// A stream can be sent once; a second send (a redirect that keeps the body) fails the way
    /// URLSession does.
    func claim() throws {
        try lock.withLock {
            guard !claimed else {
                throw URLError(
                    .requestBodyStreamExhausted,
                    userInfo: [
                        NSLocalizedDescriptionKey: "the request body stream was already sent and cannot be sent again"
                    ]
                )
            }
            claimed = true
        }
    }

    func next() async throws -> ByteBuffer? {
        if let ahead = lock.withLock({ pending.isEmpty ? nil : pending.removeFirst() }) { return ahead }
        return try await NIOThreadPool.singleton.runIfActive { [self] in
            try lock.withLock {
                if !opened {
                    stream.open()
                    opened = true
                }
                var buffer = ByteBuffer()
                var result = 0
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 1 << 16) { raw in
                    result = stream.read(raw.bindMemory(to: UInt8.self).baseAddress!, maxLength: raw.count)
                    return max(result, 0)
                }
                if result <= 0 {
                    stream.close()
                    // (corelibs' `streamError` getter traps; the status alone is asked.)
                    if result < 0 {
                        throw URLError(
                            .cannotDecodeRawData,
                            userInfo: [NSLocalizedDescriptionKey: "reading the request body stream failed"]
                        )
                    }
                    return nil
                }
                return buffer
            }
        }
    }
}

enum Translation {
    /// The URL a request really goes to: http upgraded to https for hosts on the upgrade list (the
    /// port stays when the URL names one, otherwise 443).
    /// `strict` says whether a host is a known HSTS host (StrictTransportSecurity.swift): its request
    /// goes over https too, port 80 becoming 443 (RFC 6797 §8.3).
    static func upgraded(_ url: URL, upgrade: [HostPattern], strict: (String) -> Bool = { _ in false }) -> URL {
        guard url.scheme?.lowercased() == "http", let host = url.host,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url }
        let listed = upgrade.contains(where: { $0.matches(normalizeHostname(host)) })
        let known = !listed && strict(host)
        guard listed || known else { return url }
        components.scheme = "https"
        if known, components.port == 80 { components.port = nil }
        return components.url ?? url
    }

    /// The response Foundation sees. Repeated fields are joined with ", " (Set-Cookie included, as on
    /// Apple platforms).
    static func urlResponse(_ response: HTTPEngineResponse, url: URL) -> HTTPURLResponse {
        var fields: [String: String] = [:]
        for (name, value) in response.headers {
            if let existing = fields.keys.first(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) {
                fields[existing]! += ", " + value
            } else {
                fields[name] = value
            }
        }
        #if !canImport(Darwin)
            // corelibs answers a 401 carrying WWW-Authenticate with its own libcurl-only auth flow:
            // the task hangs, and a challenge without realm= crashes it. The field is passed on renamed.
            if response.status.code == 401,
                let key = fields.keys.first(where: { $0.lowercased() == "www-authenticate" })
            {
                fields["X-HTTPDNS-WWW-Authenticate"] = fields.removeValue(forKey: key)
            }
        #endif
        return HTTPURLResponse(
            url: url,
            statusCode: Int(response.status.code),
            httpVersion: response.version == .http2 ? "HTTP/2" : "HTTP/1.1",
            headerFields: fields
        )!
    }

    /// How the URL cache may keep a response (RFC 9111 §3): only GET, only heuristically cacheable
    /// statuses, never `no-store`, never an authorized request unless the response says public.
    static func cacheStoragePolicy(method: String, requestHeaders: [String: String], status: Int, headers: HTTPHeaders)
        -> URLCache.StoragePolicy
    {
        let cacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]
        guard method.uppercased() == "GET", cacheable.contains(status) else { return .notAllowed }
        let responseDirectives = headers[canonicalForm: "cache-control"].map { $0.lowercased() }
        let requestDirectives = requestHeaders.first { $0.key.lowercased() == "cache-control" }?.value.lowercased()
        if responseDirectives.contains(where: { $0.hasPrefix("no-store") })
            || requestDirectives?.contains("no-store") == true
        {
            return .notAllowed
        }
        if requestHeaders.keys.contains(where: { $0.lowercased() == "authorization" }),
            !responseDirectives.contains(where: {
                $0 == "public" || $0.hasPrefix("s-maxage") || $0 == "must-revalidate"
            })
        {
            return .notAllowed
        }
        return .allowed
    }

    /// The request a redirect asks for, with the method rules of `RedirectRule`, and whether it carries
    /// the body on; nil when `response` is not a redirect or its Location is not an http(s) URL.
    /// Credentials and cookies never go to another origin; cookies for the next hop are added again
    /// from the cookie storage.
    static func redirectRequest(after request: URLRequest, sentTo url: URL, status: Int, headers: HTTPHeaders)
        -> (request: URLRequest, keepsBody: Bool)?
    {
        guard let rule = RedirectRule.next(status: status, method: request.httpMethod ?? "GET"),
            let location = headers.first(name: "location"),
            let target = URL(string: location, relativeTo: url)?.absoluteURL,
            ["http", "https"].contains(target.scheme?.lowercased() ?? "")
        else { return nil }
        var next = request
        next.url = target
        if !rule.keepsBody {
            next.httpMethod = rule.method
            next.httpBody = nil
            next.httpBodyStream = nil
            for name in RedirectRule.bodyHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        }
        if target.scheme?.lowercased() != url.scheme?.lowercased()
            || target.host?.lowercased() != url.host?.lowercased()
            || target.port != url.port
        {
            for name in RedirectRule.crossOriginDroppedHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        }
        return (next, rule.keepsBody)
    }

    /// `NSURLErrorNetworkUnavailableReasonKey` (corelibs does not declare it): its value is a
    /// `URLError.NetworkUnavailableReason` raw value, read by `URLError.networkUnavailableReason`.
    static let networkUnavailableReasonKey = "NSURLErrorNetworkUnavailableReasonKey"

    /// The URLError code for each engine error code: the one table of the mapping (a code missing
    /// here becomes `.unknown`).
    static let urlErrorCodes: [HTTPEngineError.Code: URLError.Code] = [
        .invalidRequest: .badURL,
        .nameNotResolved: .cannotFindHost,
        .noAddresses: .cannotFindHost,
        .connectFailed: .cannotConnectToHost,
        .connectTimeout: .timedOut,
        .untrustedCertificate: .serverCertificateUntrusted,
        // Apple's URLSession: a certificate for another name is an untrusted server certificate.
        .certificateNameMismatch: .serverCertificateUntrusted,
        .pinMismatch: .secureConnectionFailed,
        .tlsFailed: .secureConnectionFailed,
        .tlsHandshakeTimeout: .timedOut,
        .readTimeout: .timedOut,
        .totalTimeout: .timedOut,
        .protocolError: .networkConnectionLost,
        .responseTooLarge: .dataLengthExceedsMaximum,
        .tooManyRedirects: .httpTooManyRedirects,
        .cancelled: .cancelled,
        .shutdown: .cancelled,
    ]

    /// The URLError an app expects for an engine failure; the engine's error is kept under
    /// `HTTPDNSURLProtocol.engineErrorKey` and its text as the localized description.
    static func urlError(_ error: any Error, url: URL?) -> URLError {
        if let e = error as? URLError { return e }
        let code: URLError.Code
        var unavailable: NetworkUnavailable?
        if let e = error as? HTTPEngineError {
            code = urlErrorCodes[e.code] ?? .unknown
            unavailable = e.networkUnavailable
        } else if error is CancellationError {
            code = .cancelled
        } else {
            code = .unknown
        }
        var info: [String: Any] = [
            NSLocalizedDescriptionKey: "\(error)",
            HTTPDNSURLProtocol.engineErrorKey: error,
        ]
        if let url {
            info[NSURLErrorFailingURLErrorKey] = url
        }
        #if canImport(Darwin)
            // The trust object that failed, where pinning and error reporting code reads it.
            if let trust = (error as? HTTPEngineError)?.peerTrust?.object {
                info[NSURLErrorFailingURLPeerTrustErrorKey] = trust
            }
        #endif
        // No network (or none the request may use): what the system reports, with its reason, which
        // Apple tells apps to read before retrying (say, without Low Data Mode's restriction).
        if let unavailable {
            if let reason = unavailable.reason { info[networkUnavailableReasonKey] = reason.rawValue }
            return URLError(.notConnectedToInternet, userInfo: info)
        }
        return URLError(code, userInfo: info)
    }
}
