// An OpenAPI client transport on the HTTPDNS engine: a client that swift-openapi-generator
// made sends its requests here, so they resolve through HTTPDNS at connect time and keep the real
// hostname for TLS SNI, the certificate check and Host, like every other request of the library.
//
// What it maps, and nothing more: the request (method, URL under the server URL, header fields, a body
// streamed as the connection takes it) to an engine request; the engine's response (status, header
// fields, a body streamed as the server sends it) back. Errors are the engine's `HTTPEngineError`, so a
// generated client's `ClientError.underlyingError` carries our code.
// Compiled with the package trait `OpenAPI` (Package.swift); without it this module is empty, and an app
// never resolves swift-openapi-runtime or swift-http-types.
#if OpenAPI

    import Foundation
    import HTTPDNSEngine
    import HTTPDNSKit
    import HTTPTypes
    import NIOCore
    import NIOHTTP1
    import OpenAPIRuntime

    /// A `ClientTransport` for clients made by swift-openapi-generator: each request resolves through
    /// HTTPDNS at connect time and goes to that address, while TLS SNI, the certificate check and Host stay
    /// on the server URL's hostname.
    ///
    /// ```swift
    /// let client = Client(serverURL: try Servers.Server1.url(), transport: HTTPDNSTransport(httpdns))
    /// ```
    ///
    /// Request bodies stream to the server as the connection takes them, and response bodies stream to the
    /// client as they arrive (each can be read once). A failure is thrown as an `HTTPEngineError`, which
    /// the generated client wraps in `ClientError` as its `underlyingError`.
    public struct HTTPDNSTransport: ClientTransport {
        /// How the transport sends.
        public struct Configuration: Sendable {
            /// Bound on each request, from the start to the last byte of the response body; nil leaves the
            /// `HTTPDNS` configuration's `requestTimeout`. Its connect and read timeouts apply either way.
            public var timeout: Duration?
            /// Redirects followed at most (each one resolved again); 0 hands the 3xx response to the client,
            /// which decodes it when the document declares it. A body that must be sent again (307, 308)
            /// fails the redirect: request bodies stream, so they are sent once.
            public var followRedirects: Int

            /// A configuration with a request timeout and a redirect limit.
            ///
            /// - Parameters:
            ///   - timeout: bound on each request; nil for the `HTTPDNS` configuration's.
            ///   - followRedirects: redirects followed at most (5, like URLSession and AsyncHTTPClient).
            public init(timeout: Duration? = nil, followRedirects: Int = 5) {
                self.timeout = timeout
                self.followRedirects = followRedirects
            }
        }

        /// The `HTTPDNS` instance whose engine sends the requests.
        public let httpdns: HTTPDNS
        /// How the transport sends.
        public var configuration: Configuration

        /// A transport that sends through `httpdns`'s engine.
        ///
        /// - Parameters:
        ///   - httpdns: The `HTTPDNS` instance whose engine sends the requests.
        ///   - configuration: The request timeout and the redirect limit.
        public init(_ httpdns: HTTPDNS, configuration: Configuration = Configuration()) {
            self.httpdns = httpdns
            self.configuration = configuration
        }

        /// Sends `request` to `baseURL` joined with the request's path; returns once the response head has
        /// arrived, its body still streaming.
        ///
        /// - Parameters:
        ///   - request: The request's method, path and header fields.
        ///   - body: The request body, streamed as the connection takes it (sent once); nil for none.
        ///   - baseURL: The server URL the path is joined to; it may have no query or fragment.
        ///   - operationID: The operation's identifier, named in error messages.
        /// - Returns: The response head, and its body still streaming (nil for HEAD and CONNECT requests).
        /// - Throws: `HTTPEngineError`: `.invalidRequest` for a server URL with a query or fragment, or when the
        ///   request body fails, `.cancelled` when the task is cancelled, or the engine's own error.
        public func send(
            _ request: HTTPRequest,
            body: HTTPBody?,
            baseURL: URL,
            operationID: String
        ) async throws -> (HTTPResponse, HTTPBody?) {
            var outgoing = try HTTPEngineRequest(
                method: HTTPMethod(rawValue: request.method.rawValue),
                url: try Self.url(baseURL, request.path),
                headers: HTTPHeaders(request.headerFields.map { ($0.name.rawName, $0.value) }),
                body: body.map(Self.streaming)
            )
            outgoing.timeout = configuration.timeout
            let response: HTTPEngineResponse
            do {
                response = try await httpdns.engine.send(outgoing, followRedirects: configuration.followRedirects)
            } catch let error as HTTPEngineError {
                throw error
            } catch is CancellationError {
                throw HTTPEngineError(.cancelled, "\(operationID): the request was cancelled")
            } catch {
                // The request body's own sequence failed (the engine passes that error on as it is).
                throw HTTPEngineError(
                    .invalidRequest,
                    "\(operationID): the request body failed: \(error)",
                    underlying: error
                )
            }
            var fields = HTTPFields()
            for header in response.headers {
                guard let name = HTTPField.Name(header.name) else { continue }  // NIO let it through; HTTPTypes not
                fields.append(HTTPField(name: name, value: header.value))
            }
            let head = HTTPResponse(status: .init(code: Int(response.status.code)), headerFields: fields)
            switch request.method {
            case .head, .connect:
                return (head, nil)
            default:
                let length = fields[.contentLength].flatMap(Int64.init).map(HTTPBody.Length.known) ?? .unknown
                let chunks = response.body.map { ArraySlice($0.readableBytesView) }
                return (head, HTTPBody(chunks, length: length, iterationBehavior: .single))
            }
        }

        /// The server URL joined with an operation's path (path and query, percent-encoded, starting with `/`).
        /// Throws `.invalidRequest` for a server URL with a query or fragment, which a path cannot extend.
        package static func url(_ base: URL, _ path: String?) throws -> String {
            var text = base.absoluteString
            guard !text.contains("?"), !text.contains("#") else {
                throw HTTPEngineError(.invalidRequest, "server URL \(text) has a query or fragment: give it without")
            }
            while text.hasSuffix("/") { text.removeLast() }
            let path = path ?? "/"
            return text + (path.hasPrefix("/") ? path : "/" + path)
        }

        /// A request body that streams `body` as the connection takes it. Sent once: the engine neither
        /// retries nor redirects with it (a 307 or 308 fails), as `HTTPBody` may be single-pass.
        static func streaming(_ body: HTTPBody) -> HTTPRequestBody {
            let length: Int? =
                switch body.length {
                case .known(let count): Int(count)
                case .unknown: nil
                }
            return .stream(length: length) {
                let reader = BodyReader(body.makeAsyncIterator())
                return AsyncThrowingStream(unfolding: { try await reader.next() })
            }
        }
    }

    /// Reads an `HTTPBody` for the engine. `AsyncThrowingStream(unfolding:)` calls `next()` one call at a
    /// time, never two at once, which is what makes sharing the iterator safe.
    private final class BodyReader: @unchecked Sendable {
        private var iterator: HTTPBody.AsyncIterator

        init(_ iterator: HTTPBody.AsyncIterator) { self.iterator = iterator }

        func next() async throws -> ByteBuffer? {
            guard let chunk = try await iterator.next() else { return nil }
            return ByteBuffer(bytes: chunk)
        }
    }

#endif  // OpenAPI
