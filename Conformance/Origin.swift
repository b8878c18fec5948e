// The origin the conformance cases talk to: plain HTTP/1.1 on 127.0.0.1, started in-process by the
// parent run, stateless apart from per-case counters (keyed by the `id` query item), so the plain and
// the HTTPDNS side of a case see the same server. Every route answers what a case needs to observe:
//
//   /echo            the request as the server saw it: method, header fields, body length and digest
//   /bytes?n=N       N bytes with a Content-Length;  /drip?n=N&ms=M  N bytes, one every M ms
//   /gzip            a gzip-encoded text;  /status?code=N  that status with a short body
//   /redirect?code=N&to=PATH   a redirect;  /chain  301 -> 302 -> 307 -> /echo
//   /set-cookie?c=NAME=VALUE   sets a cookie;  /basic, /digest  401 until the right credentials
//   /etag?id=I       ETag "v1" with max-age=0, 304 on a match;  /fresh?id=I  max-age=60
//   /count?id=I      how many requests /etag, /fresh or /flaky saw for I
//   /slow?ms=M       headers after M ms;  /concurrent?id=I&ms=M  holds M ms, /count reports the peak
//   /flaky?id=I      503 the first time, then 200
//   any absolute URI (asked as a proxy): 407 with a Basic Proxy-Authenticate

import Crypto
import Foundation
import HTTPDNSDemoPKI
import HTTPDNSServer
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

final class ConformanceOrigin: Sendable {
    let channel: any Channel
    var port: Int { channel.localAddress?.port ?? 0 }
    let state = NIOLockedValueBox(State())

    struct State {
        var counts: [String: Int] = [:]
        var inFlight: [String: Int] = [:]
        var peak: [String: Int] = [:]
    }

    private init(channel: any Channel) { self.channel = channel }

    static func start() async throws -> ConformanceOrigin {
        let box = NIOLockedValueBox<ConformanceOrigin?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(OriginHandler(origin: box))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let origin = ConformanceOrigin(channel: channel)
        box.withLockedValue { $0 = origin }
        return origin
    }

    func stop() async { try? await channel.close() }

    /// An https origin for `localhost` whose CA is made now and trusted by nobody: every request is
    /// answered "secure" (the server trust cases never get that far unless the app accepts the server).
    static func startTLS() async throws -> SecureOrigin {
        let pki = try DemoPKI()
        let (certificate, key) = try pki.leaf("localhost")
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate)],
            privateKey: .privateKey(key)
        )
        tls.applicationProtocols = ["http/1.1"]
        var quiet = Logger(label: "conformance.tls")
        quiet.logLevel = .critical
        let listener = try await HTTPListener.start(
            host: "127.0.0.1",
            port: 0,
            tls: try NIOSSLContext(configuration: tls),
            logger: quiet
        ) { _ in ListenerResponse(status: .ok, text: "secure") }
        return SecureOrigin(listener: listener)
    }
}

/// The https origin (ConformanceOrigin.startTLS).
struct SecureOrigin: Sendable {
    let listener: HTTPListener
    var port: Int { listener.port }
    func stop() async { await listener.stop() }
}

private final class OriginHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let origin: NIOLockedValueBox<ConformanceOrigin?>
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(origin: NIOLockedValueBox<ConformanceOrigin?>) { self.origin = origin }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            guard let head, let origin = origin.withLockedValue({ $0 }) else { return }
            respond(to: head, body: body, origin: origin, context: context)
        }
    }

    private func respond(
        to head: HTTPRequestHead,
        body: ByteBuffer,
        origin: ConformanceOrigin,
        context: ChannelHandlerContext
    ) {
        let components = URLComponents(string: head.uri)
        let path = components?.path ?? head.uri
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        let id = query["id"] ?? ""
        let loop = context.eventLoop
        let bound = NIOLoopBound(context, eventLoop: loop)
        func send(_ status: HTTPResponseStatus, _ text: String, _ extra: [(String, String)] = [], after ms: Int64 = 0) {
            let bytes = Array(text.utf8)
            var headers = HTTPHeaders(extra)
            if !headers.contains(name: "content-type") { headers.add(name: "content-type", value: "text/plain") }
            headers.add(name: "Date", value: Self.httpDate(Date()))
            if status != .notModified && status != .noContent {
                headers.add(name: "content-length", value: "\(bytes.count)")
            }
            let headersToSend = headers
            let write: @Sendable () -> Void = {
                let headers = headersToSend
                let context = bound.value
                context.write(
                    self.wrapOutboundOut(
                        .head(HTTPResponseHead(version: head.version, status: status, headers: headers))
                    ),
                    promise: nil
                )
                if head.method != .HEAD, status != .notModified, status != .noContent, !bytes.isEmpty {
                    context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: bytes)))), promise: nil)
                }
                context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            }
            if ms > 0 { loop.scheduleTask(in: .milliseconds(ms)) { write() } } else { write() }
        }
        func count() -> Int {
            origin.state.withLockedValue { state in
                state.counts[id, default: 0] += 1
                return state.counts[id]!
            }
        }
        // Asked as a proxy (an absolute URI): it wants credentials, as a company proxy may.
        if head.uri.lowercased().hasPrefix("http://") {
            return send(
                .proxyAuthenticationRequired,
                "proxy says who are you",
                [("Proxy-Authenticate", "Basic realm=\"proxy\"")]
            )
        }
        switch path {
        case "/echo":
            var lines = ["method=\(head.method.rawValue)", "uri=\(head.uri)"]
            // Not compared: the transport's own fields. Host is the same URL's; Connection is how the
            // client keeps HTTP/1.1 connections (HTTP/2 has none); Accept-Encoding lists the codings the
            // client can decode (libcurl also brotli and zstd), while what the app sees is the decoded
            // body either way (the gzip cases compare that).
            for (name, value) in head.headers
            where !["host", "connection", "accept-encoding"].contains(name.lowercased()) {
                lines.append("\(name.lowercased()): \(value)")
            }
            let digest = SHA256.hash(data: Data(body.readableBytesView)).prefix(6).map { String(format: "%02x", $0) }
                .joined()
            lines.append("body=\(body.readableBytes) bytes sha256=\(digest)")
            send(.ok, lines.sorted().joined(separator: "\n"))
        case "/bytes":
            send(.ok, String(repeating: "x", count: Int(query["n"] ?? "") ?? 100))
        case "/gzip":
            // "hello, gzip\n", gzip-compressed (fixed bytes, so no compressor is needed here).
            let gz: [UInt8] = [
                0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0xd7,
                0x51, 0x48, 0xaf, 0xca, 0x2c, 0xe0, 0x02, 0x00, 0x86, 0x1f, 0x82, 0xa4, 0x0c, 0x00, 0x00, 0x00,
            ]
            let headers: HTTPHeaders = [
                "content-type": "text/plain", "content-encoding": "gzip", "content-length": "\(gz.count)",
            ]
            let context = bound.value
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
                promise: nil
            )
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: gz)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        case "/status":
            let code = Int(query["code"] ?? "") ?? 200
            send(HTTPResponseStatus(statusCode: code), code == 204 ? "" : "status \(code)")
        case "/redirect":
            let code = Int(query["code"] ?? "") ?? 302
            send(HTTPResponseStatus(statusCode: code), "moved", [("location", query["to"] ?? "/echo")])
        case "/chain":
            let step = Int(query["step"] ?? "") ?? 0
            let codes = [301, 302, 307]
            guard step < codes.count else { return send(.ok, "chain done") }
            let next = step + 1 < codes.count ? "/chain?step=\(step + 1)" : "/echo"
            send(HTTPResponseStatus(statusCode: codes[step]), "hop \(step)", [("location", next)])
        case "/set-cookie":
            // "Set-Cookie" as most HTTP/1.1 servers spell it: corelibs only reads that spelling.
            send(.ok, "set", [("Set-Cookie", (query["c"] ?? "a=1") + "; Path=/")])
        case "/basic":
            // user:secret
            if head.headers.first(name: "authorization") == "Basic dXNlcjpzZWNyZXQ=" {
                send(.ok, "welcome, method=\(head.method.rawValue) body=\(body.readableBytes)")
            } else {
                send(.unauthorized, "who are you", [("www-authenticate", "Basic realm=\"conformance\"")])
            }
        case "/digest":
            if let auth = head.headers.first(name: "authorization"),
                Self.digestValid(auth, method: head.method.rawValue)
            {
                send(.ok, "welcome, digest")
            } else {
                send(
                    .unauthorized,
                    "who are you",
                    [("www-authenticate", "Digest realm=\"conformance\", qop=\"auth\", nonce=\"n0nce\", opaque=\"0p\"")]
                )
            }
        case "/etag":
            _ = count()
            if head.headers.first(name: "if-none-match") == "\"v1\"" {
                send(.notModified, "", [("etag", "\"v1\""), ("cache-control", "max-age=0")])
            } else {
                send(.ok, "version one", [("etag", "\"v1\""), ("cache-control", "max-age=0")])
            }
        case "/fresh":
            let n = count()
            send(.ok, "fresh \(n)", [("cache-control", "max-age=600")])
        case "/count":
            let (n, peak) = origin.state.withLockedValue { ($0.counts[id] ?? 0, $0.peak[id] ?? 0) }
            send(.ok, "count=\(n) peak=\(peak)")
        case "/slow":
            send(.ok, "slow", after: Int64(query["ms"] ?? "") ?? 2000)
        case "/drip":
            drip(n: Int(query["n"] ?? "") ?? 10, every: Int64(query["ms"] ?? "") ?? 100, head: head, context: context)
        case "/concurrent":
            origin.state.withLockedValue { state in
                state.counts[id, default: 0] += 1
                state.inFlight[id, default: 0] += 1
                state.peak[id] = max(state.peak[id] ?? 0, state.inFlight[id]!)
            }
            loop.scheduleTask(in: .milliseconds(Int64(query["ms"] ?? "") ?? 300)) {
                origin.state.withLockedValue { $0.inFlight[id, default: 1] -= 1 }
            }
            send(.ok, "held", after: Int64(query["ms"] ?? "") ?? 300)
        case "/flaky":
            send(count() == 1 ? .serviceUnavailable : .ok, "attempt")
        default:
            send(.notFound, "not found")
        }
    }

    private func drip(n: Int, every ms: Int64, head: HTTPRequestHead, context: ChannelHandlerContext) {
        let headers: HTTPHeaders = ["content-type": "text/plain", "content-length": "\(n)"]
        context.writeAndFlush(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
            promise: nil
        )
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        @Sendable func step(_ left: Int) {
            let (context, handler) = bound.value
            guard left > 0 else { return context.writeAndFlush(handler.wrapOutboundOut(.end(nil)), promise: nil) }
            guard context.channel.isActive else { return }
            context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "x")))), promise: nil)
            context.eventLoop.scheduleTask(in: .milliseconds(ms)) { step(left - 1) }
        }
        step(n)
    }

    /// An IMF-fixdate, as every origin with a clock sends it (RFC 9110 §6.6.1).
    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    /// RFC 7616 with MD5 and qop=auth, for user "user", password "secret", realm "conformance".
    static func digestValid(_ header: String, method: String) -> Bool {
        guard header.lowercased().hasPrefix("digest ") else { return false }
        var fields: [String: String] = [:]
        for part in header.dropFirst(7).split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            fields[pair[0].trimmingCharacters(in: .whitespaces).lowercased()] =
                pair[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        func md5(_ s: String) -> String {
            Insecure.MD5.hash(data: Data(s.utf8)).map { String(format: "%02x", $0) }.joined()
        }
        guard let uri = fields["uri"], let response = fields["response"], let nc = fields["nc"],
            let cnonce = fields["cnonce"]
        else { return false }
        let ha1 = md5("user:conformance:secret")
        let ha2 = md5("\(method):\(uri)")
        return response == md5("\(ha1):n0nce:\(nc):\(cnonce):auth:\(ha2)")
    }
}
