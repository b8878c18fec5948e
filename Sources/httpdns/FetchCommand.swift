// `httpdns fetch URL`: one request through the IP-direct engine, with curl's flag meanings.
// The URL keeps its hostname; only the socket address comes from the --resolver list.
// Exit status: 0 for any HTTP response (like curl without -f); curl's codes for failures
// (3 bad URL, 6 name not resolved, 7 connect failed, 28 timeout, 35/60 TLS, 47 redirects, 23 write,
// 26 read); 64 for a usage error.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import ArgumentParser
import HTTPDNSCommandLine
import HTTPDNSOTLP
import HTTPDNSKit
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import NIOCore
import NIOHTTP1

struct FetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Fetch a URL, connecting to the address HTTPDNS gives while keeping the hostname for TLS and Host.",
        discussion: """
            Example: httpdns fetch https://a.test:8443/ --resolver doh:https://127.0.0.1:8473/dns-query --cacert ca.pem -v
            """
    )

    @Argument(help: "http:// or https:// URL.")
    var url: String

    @Option(name: .customShort("X"), help: "Request method.")
    var method: String?

    @Option(name: .customShort("H"), help: ArgumentHelp("Extra header, repeatable.", valueName: "Name: value"))
    var headers: [String] = []

    @Option(
        name: .customShort("d"),
        help: ArgumentHelp("Request body; @FILE streams the file (binary, as is).", valueName: "DATA")
    )
    var data: String?

    @Option(name: .customShort("o"), help: ArgumentHelp("Write the body to FILE instead of stdout.", valueName: "FILE"))
    var output: String?

    @Flag(name: .customShort("i"), help: "Include the response status line and headers in the output.")
    var include = false

    @Flag(name: .customShort("L"), help: "Follow redirects (each hop resolved again through HTTPDNS).")
    var location = false

    @Option(name: .customLong("max-redirs"), help: "Redirects followed at most with -L.")
    var maxRedirects = 50

    @Flag(name: .customLong("http1.1"), help: "Use HTTP/1.1 only.")
    var http11 = false

    @Flag(name: .customLong("http2"), help: "Use HTTP/2 only (h2 through ALPN; h2c prior knowledge for http://).")
    var http2 = false

    @Option(
        name: .customLong("max-time"),
        parsing: .unconditional,  // so that "-1" is a value, refused as negative, not a missing one
        help: ArgumentHelp("Bound on the whole transfer.", valueName: "SECONDS")
    )
    var maxTime: Double?

    @Flag(name: .customLong("compressed"), help: "Ask for gzip/deflate and decompress the body.")
    var compressed = false

    @Flag(name: .customShort("v"), help: "Print a human trace on stderr.")
    var verbose = false

    @Flag(name: .customLong("trace-json"), help: "Print one JSON object of metrics on stderr at the end.")
    var traceJSON = false

    @Flag(
        name: .customLong("preconnect"),
        help:
            "Open the connection (lookup, TCP, TLS) before the request, as an app does at launch with HTTPDNS.preconnect: the request's metrics are its own."
    )
    var preconnect = false

    @Flag(
        name: .customLong("warm-resolver"),
        help:
            "Wait until the resolver's connection, which HTTPDNS opens when it is made, is up before the request: an app's first request after launch, when it made HTTPDNS at launch. The request's metrics are its own."
    )
    var warmResolver = false

    @Flag(
        name: .customLong("probe"),
        help:
            "Probe the host's addresses first (TCP, and TLS for https, each in parallel), as an app with NetworkSettings.probing does when it pre-resolves: the request tries the fastest first."
    )
    var probe = false

    @Option(
        name: .customLong("pin"),
        help: ArgumentHelp("Pin the target's public key (base64 SHA-256 of SPKI), repeatable.", valueName: "SHA256")
    )
    var pins: [String] = []

    enum Engine: String, ExpressibleByArgument, CaseIterable {
        case direct, urlsession
    }

    @Option(
        help: ArgumentHelp(
            "direct: the IP-direct engine; urlsession: URLSession with HTTPDNSURLProtocol installed (redirects through the session's delegate).",
            valueName: "direct|urlsession"
        )
    )
    var engine: Engine = .direct

    @OptionGroup var resolver: ResolverOptions
    @OptionGroup var tracing: TracingOptions

    func validate() throws {
        // A bad URL is not a usage error here: curl's exit 3, from run().
        guard !(http11 && http2) else { throw ValidationError("--http1.1 and --http2: give one of them") }
        try resolver.requireResolver(for: [url])
        for h in headers {
            guard let colon = h.firstIndex(of: ":"), colon != h.startIndex, !h.contains("\r"), !h.contains("\n") else {
                throw ValidationError("-H: \"\(h)\" is not 'Name: value'")
            }
        }
        if let maxTime { _ = try seconds(maxTime, flag: "--max-time", range: 0.001...604_800) }
        if let data, data.hasPrefix("@"), !FileManager.default.isReadableFile(atPath: String(data.dropFirst())) {
            throw ValidationError("-d: cannot read \(data.dropFirst())")
        }
        if let method, method.isEmpty || method.contains(" ") {
            throw ValidationError("-X: \"\(method)\" is not a method")
        }
        for pin in pins where Data(base64Encoded: pin)?.count != 32 {
            throw ValidationError(
                "--pin: \"\(pin.prefix(60))\" is not a base64 SHA-256 digest (44 characters, e.g. from openssl x509 -pubkey | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)"
            )
        }
        guard maxRedirects >= -1 else { throw ValidationError("--max-redirs: give 0 or more (-1: no limit)") }
    }

    /// Redirects followed with -L; curl's -1 means no limit.
    var redirectLimit: Int { location ? (maxRedirects == -1 ? Int.max : maxRedirects) : 0 }

    func run() async throws {
        try await tracing.exporting(logger: resolver.tracingLogger) { try await fetch() }
    }

    private func fetch() async throws {
        let target: HTTPURL
        do {
            target = try HTTPURL(url)
        } catch {
            throw failure(error)
        }
        let httpdns = try self.resolver.makeHTTPDNS { config in
            config.tls.pins = pins.isEmpty ? [:] : [target.host: Set(pins)]
            config.http.versions = http11 ? .http1Only : http2 ? .http2Only : .automatic
            config.http.http2PriorKnowledge = http2
            if probe { config.network.probing = AddressProbing() }
            if let maxTime {
                config.timeouts.request = try seconds(maxTime, flag: "--max-time", range: 0.001...604_800)
            }
        }
        await resolver.fetchServiceLists(httpdns)
        if self.engine == .urlsession {
            return try await runThroughURLSession(httpdns)
        }
        let engine = httpdns.engine

        var request = HTTPEngineRequest(method: HTTPMethod(rawValue: requestMethod), url: target)
        for (name, value) in parsedHeaders { request.headers.add(name: name, value: value) }
        if let data {
            request.body = data.hasPrefix("@") ? try .file(String(data.dropFirst())) : .bytes(Array(data.utf8))
            if !request.headers.contains(name: "content-type") {
                request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
            }
        }
        request.decompress = compressed

        let trace = Trace(enabled: verbose)
        trace.line("* Resolving \(target.host) through \(self.resolver.resolvers.joined(separator: ", "))")
        let origin = "\(target.scheme)://\(target.authority)"
        if probe {
            await httpdns.preResolve([origin])
            trace.line("* Probed the addresses of \(target.host)")
        }
        if warmResolver {
            do {
                try await httpdns.resolverConnected()
                trace.line("* The resolver's connection is up")
            } catch {
                trace.line("* The resolver's connection failed (\(error)); the lookup connects itself")
            }
        }
        if preconnect {
            if let failed = await httpdns.preconnect([origin])[origin] {
                trace.line("* Pre-connect to \(origin) failed (\(failed)); the request connects itself")
            } else {
                trace.line("* Pre-connected to \(origin)")
            }
        }
        do {
            try await transfer(request, engine: engine, trace: trace)
        } catch {
            await httpdns.shutdown()
            throw failure(error)
        }
        await httpdns.shutdown()
    }

    /// The request, its redirects, and the body written out.
    private func transfer(_ request: HTTPEngineRequest, engine: HTTPEngine, trace: Trace) async throws {
        let response = try await engine.send(request, followRedirects: redirectLimit)
        if location, redirectLimit == 0, let next = try? HTTPEngine.redirect(from: request, response: response) {
            // curl -L --max-redirs 0: a redirect to follow is an error, not the answer.
            throw HTTPEngineError(.tooManyRedirects, "more than 0 redirects (to \(next.url))")
        }
        let m = response.metrics
        trace.line(
            "* Connected to \(response.url.host) (\(m.ip ?? "?")) port \(m.port ?? 0) via \(m.sourceText)\(m.reused ? " (reused)" : "")"
        )
        if response.url.isTLS {
            trace.line(
                "* TLS verified for \(response.url.host) (SNI \(response.url.hostIsIP ? "none" : response.url.host)), ALPN \(response.version.rawValue)"
            )
        }
        if m.redirects > 0 { trace.line("* Followed \(m.redirects) redirect(s) to \(response.url)") }
        if request.url.scheme == "http", (m.hops.first?.url ?? m.url).hasPrefix("https:") {
            trace.line("* \(request.url.host) is a known https origin (HSTS, or an HTTPS record): sent over https")
        }
        trace.line(
            "> \(request.method.rawValue) \(response.url.target) \(response.version == .http2 ? "HTTP/2" : "HTTP/1.1")"
        )
        trace.line("> host: \(response.url.authority)")
        for (name, value) in request.headers { trace.line("> \(name): \(value)") }
        let statusLine =
            "\(response.version == .http2 ? "HTTP/2" : "HTTP/1.1") \(response.status.code)\(response.version == .http2 ? "" : " \(response.status.reasonPhrase)")"
        trace.line("< \(statusLine)")
        for (name, value) in response.headers { trace.line("< \(name): \(value)") }

        let sink = try OutputSink.create(output)
        if include { try writeHead(statusLine, response.headers.map { ($0.name, $0.value) }, to: sink) }
        let expected = response.headers.first(name: "content-length").flatMap(Int.init)
        let progress = Progress(
            total: expected,
            enabled: isatty(STDERR_FILENO) == 1 && !verbose && (expected ?? Int.max) > 1 << 20
        )
        defer { progress.finish() }
        for try await chunk in response.body {
            try sink.write(Data(chunk.readableBytesView))
            progress.advance(chunk.readableBytes)
        }
        try sink.close()
        try report(response.metrics, trace: trace)
    }

    /// The -i head: status line and header fields.
    func writeHead(_ statusLine: String, _ fields: [(String, String)], to sink: OutputSink) throws {
        var head = statusLine + "\r\n"
        for (name, value) in fields { head += "\(name): \(value)\r\n" }
        try sink.write(Data((head + "\r\n").utf8))
    }

    /// The -v timing line and the --trace-json object (the same keys for both engines).
    func report(_ final: RequestMetrics, trace: Trace) throws {
        // One number at a time: a phase that did not happen (a reused connection's lookup) prints 0.0.
        func ms(_ d: Duration?) -> String { String(format: "%.1f", d.map(\.milliseconds) ?? 0.0) }
        trace.line(
            "* dns \(ms(final.dns)) ms, connect \(ms(final.connect)) ms, tls \(ms(final.tls)) ms, first byte \(ms(final.timeToFirstByte)) ms, total \(ms(final.total)) ms, \(final.bytesReceived) bytes"
                // The waits, after the fields scripts read, only when there were any.
                + (final.recordsWait.map { ", waited \(ms($0)) ms for HTTPS records" } ?? "")
                + (final.stalled.flatMap { $0 >= .milliseconds(1) ? ", stalled \(ms($0)) ms" : nil } ?? "")
        )
        for reask in final.reasks {
            let after = reask.failed.isEmpty ? "no answer yet" : reask.failed.joined(separator: ", ") + " failed"
            trace.line(
                "* Asked again (\(reask.kind.rawValue), \(after)): \(reask.source?.description ?? "no answer") in \(ms(reask.duration)) ms"
            )
        }
        for (index, hop) in final.hops.enumerated() {
            trace.line(
                "* Hop \(index + 1): \(hop.url) \(hop.status.map(String.init) ?? "-") via \(hop.ip ?? "?"), dns \(ms(hop.dns)) ms, connect \(ms(hop.connect)) ms, tls \(ms(hop.tls)) ms, first byte \(ms(hop.timeToFirstByte)) ms, total \(ms(hop.total)) ms"
            )
        }
        if traceJSON {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            FileHandle.standardError.write(try encoder.encode(final) + Data("\n".utf8))
        }
    }

    var requestMethod: String { method ?? (data == nil ? "GET" : "POST") }

    /// The -H values as (name, value), validated by `validate()`.
    var parsedHeaders: [(String, String)] {
        headers.map { h in
            let colon = h.firstIndex(of: ":")!
            return (
                String(h[..<colon]).trimmingCharacters(in: .whitespaces),
                String(h[h.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            )
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var message: String
        var description: String { message }
    }

    /// curl's exit status for each engine error code: the one table of the mapping (a code missing
    /// here exits 1).
    static let curlExitCodes: [HTTPEngineError.Code: Int32] = [
        .invalidRequest: 3,  // CURLE_URL_MALFORMAT
        .nameNotResolved: 6,  // CURLE_COULDNT_RESOLVE_HOST
        .noAddresses: 6,
        .connectFailed: 7,  // CURLE_COULDNT_CONNECT
        .connectTimeout: 28,  // CURLE_OPERATION_TIMEDOUT
        .tlsHandshakeTimeout: 28,
        .readTimeout: 28,
        .totalTimeout: 28,
        .untrustedCertificate: 60,  // CURLE_PEER_FAILED_VERIFICATION
        .certificateNameMismatch: 35,  // CURLE_SSL_CONNECT_ERROR
        .pinMismatch: 35,
        .tlsFailed: 35,
        .tooManyRedirects: 47,  // CURLE_TOO_MANY_REDIRECTS
        .protocolError: 56,  // CURLE_RECV_ERROR
        .responseTooLarge: 56,
        .cancelled: 42,  // CURLE_ABORTED_BY_CALLBACK
        .shutdown: 42,
    ]

    /// Prints the error like curl does and maps it to curl's exit code.
    func failure(_ error: any Error) -> ExitCode {
        let code: Int32
        var text: String
        if let e = error as? HTTPEngineError {
            text = e.description
            code = Self.curlExitCodes[e.code] ?? 1
        } else if let e = error as? URLError {
            text = e.localizedDescription
            switch e.code {
            case .badURL, .unsupportedURL: code = 3
            case .cannotFindHost: code = 6
            case .cannotConnectToHost: code = 7
            case .timedOut: code = 28
            case .serverCertificateUntrusted: code = 60
            case .secureConnectionFailed: code = 35
            case .httpTooManyRedirects: code = 47
            case .cancelled: code = 42
            default: code = 56
            }
        } else if let e = error as? Failure {
            text = e.message
            code = e.code
        } else {
            text = "\(error)"
            code = 1
        }
        if let advice = resolver.advice(for: error) { text += advice }
        FileHandle.standardError.write(Data("httpdns: \(text)\n".utf8))
        return ExitCode(code)
    }
}

/// `-v` lines on stderr.
struct Trace {
    var enabled: Bool
    func line(_ s: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data((s + "\n").utf8))
    }
}

/// A one-line progress bar on stderr, redrawn at most ten times a second.
final class Progress {
    let total: Int?
    let enabled: Bool
    var done = 0
    var lastDraw = ContinuousClock.now
    let started = ContinuousClock.now

    init(total: Int?, enabled: Bool) {
        self.total = total
        self.enabled = enabled
    }

    func advance(_ n: Int) {
        done += n
        guard enabled, ContinuousClock.now - lastDraw > .milliseconds(100) else { return }
        lastDraw = .now
        draw()
    }

    func draw() {
        let mb = Double(done) / 1_048_576
        let rate = mb / max((ContinuousClock.now - started).seconds, 0.001)
        var line: String
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let width = 30
            let filled = Int(fraction * Double(width))
            line = "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "]"
            line += String(format: " %3.0f%% %.1f MiB %.1f MiB/s", fraction * 100, mb, rate)
        } else {
            line = String(format: "%.1f MiB %.1f MiB/s", mb, rate)
        }
        FileHandle.standardError.write(Data(("\r" + line).utf8))
    }

    func finish() {
        guard enabled else { return }
        draw()
        FileHandle.standardError.write(Data("\n".utf8))
    }
}
