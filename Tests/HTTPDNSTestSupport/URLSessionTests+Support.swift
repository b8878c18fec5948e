// URLSession (FoundationNetworking on Linux) with HTTPDNSURLProtocol installed, against the real
// peers: nginx (SNI certificates, h2, redirects, body echo, cookies), kresd DoH as the resolver and
// the hijacking dnsmasq as LocalDNS. Each test serves its sessions through an interception of its own;
// the suite runs serially, as it counts the engine's connections.

@testable import HTTPDNSURLSession
import Crypto
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The metrics the protocol reports, per task.
final class MetricsLog: Sendable {
    private let box = NIOLockedValueBox<[HTTPDNSTaskMetrics]>([])
    var all: [HTTPDNSTaskMetrics] { box.withLockedValue { $0 } }
    func add(_ m: HTTPDNSTaskMetrics) { box.withLockedValue { $0.append(m) } }
}

/// Records what a session's delegate is asked about redirects; refuses them when told to.
final class RedirectRecorder: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    struct Hop {
        var status: Int
        var from: String
        var to: String
        var method: String
        var bodyBytes: Int?
    }
    private let lock = NSLock()
    private var _hops: [Hop] = []
    let refuse: Bool
    init(refuse: Bool = false) { self.refuse = refuse }
    var hops: [Hop] { lock.withLock { _hops } }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        lock.withLock {
            _hops.append(
                Hop(
                    status: response.statusCode,
                    from: response.url?.absoluteString ?? "",
                    to: request.url?.absoluteString ?? "",
                    method: request.httpMethod ?? "GET",
                    bodyBytes: request.httpBody?.count
                )
            )
        }
        completionHandler(refuse ? nil : request)
    }
}

/// A delegate-driven download: counts bytes, cancels after the first chunk when asked.
final class DownloadProbe: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var received = 0
    private var continuation: CheckedContinuation<(any Error)?, Never>?
    private var result: ((any Error)?)?
    let cancelAfterFirstChunk: Bool
    init(cancelAfterFirstChunk: Bool) { self.cancelAfterFirstChunk = cancelAfterFirstChunk }
    var bytes: Int { lock.withLock { received } }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let first = lock.withLock {
            received += data.count
            return received == data.count
        }
        if first && cancelAfterFirstChunk { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        lock.withLock {
            if let continuation {
                continuation.resume(returning: error)
                self.continuation = nil
            } else {
                result = .some(error)
            }
        }
    }

    func completion() async -> (any Error)? {
        await withCheckedContinuation { c in
            lock.withLock {
                if let result { c.resume(returning: result) } else { continuation = c }
            }
        }
    }
}

/// A TCP server that accepts and never answers.
func startSilentTCP() async throws -> (any Channel, Int) {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).get()
    return (channel, channel.localAddress!.port!)
}

/// A TCP server that answers every connection's first bytes with `answer`, then closes it.
func startRawTCP(answer: String) async throws -> (any Channel, Int) {
    final class Answer: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let text: String
        init(_ text: String) { self.text = text }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text))).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Answer(answer)) }
        }
        .bind(host: "127.0.0.1", port: 0).get()
    return (channel, channel.localAddress!.port!)
}
