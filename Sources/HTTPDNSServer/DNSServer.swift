// A classic DNS server (RFC 1035 over UDP and TCP) answering from a function. The project's
// self-hostable server grew from it; today the benchmarks, the tests and the demo use it as an upstream or
// as a hijacking "LocalDNS" on loopback.
//
// Malformed queries are dropped (UDP) or answered FORMERR when the header is readable (NOTIMP when its
// opcode is not QUERY); the server never stops serving because of one. Opcodes and EDNS are answered
// as `AnswerRule` says, never padded (this is plain Do53). Truncation can be forced to exercise a
// client's TCP retry; a truncated answer keeps its OPT record.
// Over TCP every message goes with its length in two bytes (RFC 1035 §4.2.2): NIOExtras'
// LengthFieldBasedFrameDecoder and LengthFieldPrepender strip and add it.

import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSListener
import HTTPDNSLookup
import NIOConcurrencyHelpers
import NIOCore
import NIOExtras
import NIOPosix

/// Thread-safe; `stop()` closes both sockets.
package final class DNSServer: Sendable {
    /// What to answer for one question.
    package struct Answer: Sendable {
        var rcode: DNSResponseCode
        var addresses: [IPAddress]
        var ttl: UInt32

        package init(rcode: DNSResponseCode = .noError, addresses: [IPAddress], ttl: UInt32 = 60) {
            self.rcode = rcode
            self.addresses = addresses
            self.ttl = ttl
        }

        package static let nxdomain = Answer(rcode: .nameError, addresses: [])
    }

    package typealias Responder = @Sendable (_ name: String, _ type: DNSRecordType) -> Answer

    package struct Options: Sendable {
        /// Answer every UDP query with TC set and no records, so clients must retry over TCP.
        var truncateUDP = false
        init() {}
    }

    package let port: Int
    let host: String
    let channels: [any Channel]
    let counters: NIOLockedValueBox<(udp: Int, tcp: Int)>

    /// Queries received so far (UDP, TCP). A client's resend of a UDP query it had no answer to yet (the
    /// same id from the same address, among the last 64 queries) is answered again but counted once: a
    /// count of questions, however slow the answers were on a loaded machine.
    package var queries: (udp: Int, tcp: Int) { counters.withLockedValue { $0 } }

    private init(host: String, port: Int, channels: [any Channel], counters: NIOLockedValueBox<(udp: Int, tcp: Int)>) {
        self.host = host
        self.port = port
        self.channels = channels
        self.counters = counters
    }

    /// Binds UDP and TCP on `host:port` (port 0: the OS picks one free for both).
    package static func start(
        host: String = "127.0.0.1",
        port: Int = 0,
        options: Options = Options(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        responder: @escaping Responder
    ) async throws -> DNSServer {
        let counters = NIOLockedValueBox((udp: 0, tcp: 0))
        // Bind TCP first (port 0 → a free port), then UDP on the same number; retry if that UDP port is taken.
        for _ in 0..<10 {
            let tcp = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // Out of descriptors, accept fails and keeps failing: pause instead of spinning.
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(AcceptPause())
                    }
                }
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        let decoder = LengthFieldBasedFrameDecoder(lengthFieldBitLength: .twoBytes)
                        try sync.addHandler(ByteToMessageHandler(decoder))
                        try sync.addHandler(LengthFieldPrepender(lengthFieldBitLength: .twoBytes))
                        try sync.addHandler(TCPQueryHandler(responder: responder, counters: counters))
                    }
                }
                .bind(host: host, port: port).get()
            let boundPort = tcp.localAddress!.port!
            do {
                let udp = try await DatagramBootstrap(group: group)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(
                                UDPQueryHandler(responder: responder, truncate: options.truncateUDP, counters: counters)
                            )
                        }
                    }
                    .bind(host: host, port: boundPort).get()
                return DNSServer(host: host, port: boundPort, channels: [tcp, udp], counters: counters)
            } catch {
                try? await tcp.close()
                if port != 0 { throw error }
            }
        }
        throw DNSWireError("could not bind a UDP and TCP port pair on \(host)")
    }

    package func stop() async {
        for c in channels { try? await c.close() }
    }

    /// The answer to one message's bytes; nil drops it (an answer that cannot be encoded too).
    static func respond(to bytes: [UInt8], responder: Responder, truncate: Bool) -> [UInt8]? {
        guard let query = try? DNSMessage(parsing: bytes), !query.isResponse else {
            // Unreadable: answer NOTIMP for an opcode we do not implement, else FORMERR, if we at least
            // have an id; else drop.
            guard bytes.count >= 12 else { return nil }
            return DNSMessage.notImplementedAnswer(toUnreadable: bytes)
                ?? [bytes[0], bytes[1], 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]
        }
        let rule = AnswerRule(for: query, encrypted: false)
        if let refusal = rule.refusal { return try? DNSMessage.response(to: query, rcode: refusal, opt: rule.opt) }
        // A query without a question asks nothing the responder could answer.
        guard !query.questionName.isEmpty else {
            return try? DNSMessage.response(to: query, rcode: .formatError, opt: rule.opt)
        }
        if truncate { return try? DNSMessage.response(to: query, truncated: true, opt: rule.opt) }
        let answer = responder(normalizeHostname(query.questionName), query.questionType)
        let wanted = answer.addresses.filter { $0.isIPv6 == (query.questionType == .aaaa) }
        let useful = query.questionType == .a || query.questionType == .aaaa
        return try? DNSMessage.response(
            to: query,
            rcode: answer.rcode,
            addresses: useful ? wanted : [],
            ttl: answer.ttl,
            negativeTTL: wanted.isEmpty ? min(answer.ttl, 30) : nil,
            opt: rule.opt
        )
    }
}

final class UDPQueryHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>
    let responder: DNSServer.Responder
    let truncate: Bool
    let counters: NIOLockedValueBox<(udp: Int, tcp: Int)>

    init(responder: @escaping DNSServer.Responder, truncate: Bool, counters: NIOLockedValueBox<(udp: Int, tcp: Int)>) {
        self.responder = responder
        self.truncate = truncate
        self.counters = counters
    }

    /// The last queries counted (client and id), oldest first, and the same as a set.
    private var recent = CircularBuffer<QueryKey>(initialCapacity: 64)
    private var recentSet = Set<QueryKey>()

    private struct QueryKey: Hashable {
        var client: SocketAddress
        var id: UInt16
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        if let id = envelope.data.getInteger(at: envelope.data.readerIndex, as: UInt16.self) {
            let key = QueryKey(client: envelope.remoteAddress, id: id)
            if recentSet.insert(key).inserted {
                counters.withLockedValue { $0.udp += 1 }
                recent.append(key)
                if recent.count > 64 { recentSet.remove(recent.removeFirst()) }
            }
        }
        guard
            let reply = DNSServer.respond(
                to: Array(envelope.data.readableBytesView),
                responder: responder,
                truncate: truncate
            )
        else { return }
        context.writeAndFlush(
            wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: ByteBuffer(bytes: reply))),
            promise: nil
        )
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A client's ICMP error must not take the server down.
    }
}

/// Answers each query of a TCP connection, in order (the frame decoder before it hands over one whole
/// message at a time); closes the connection at the first one it cannot read at all.
final class TCPQueryHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let responder: DNSServer.Responder
    let counters: NIOLockedValueBox<(udp: Int, tcp: Int)>
    var closing = false

    init(responder: @escaping DNSServer.Responder, counters: NIOLockedValueBox<(udp: Int, tcp: Int)>) {
        self.responder = responder
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        counters.withLockedValue { $0.tcp += 1 }
        let query = Array(unwrapInboundIn(data).readableBytesView)
        guard let reply = DNSServer.respond(to: query, responder: responder, truncate: false) else {
            closing = true
            context.close(promise: nil)
            return
        }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply)), promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
