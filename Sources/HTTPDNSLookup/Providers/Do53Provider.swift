// Classic DNS (RFC 1035) to one server: a UDP query with a random id (resent once if nothing came back
// within a second), matched on id, source address and question; retried over TCP when the answer is
// truncated (TC bit). Over TCP every message goes with its length in two bytes (RFC 1035 §4.2.2): the
// query is written with it, and `TCPAnswerHandler` reads the first whole message off the stream.

import HTTPDNSCore
import HTTPDNSEngine
import NIOCore
import NIOPosix

struct Do53Provider: SubnetQuerying {
    let ip: IPAddress
    let port: Int
    let group: any EventLoopGroup
    /// On an IPv6-only network with NAT64, an IPv4 server is reached through its synthesized address.
    let path: NetworkPath?
    /// Sent as an EDNS Client Subnet option in every query (RFC 7871), when given.
    let clientSubnet: ClientSubnet?
    let name: String

    init(
        server ip: IPAddress,
        port: Int,
        path: NetworkPath? = nil,
        clientSubnet: ClientSubnet? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        _ = try SocketAddress(ip, port: port)
        self.ip = ip
        self.port = port
        self.path = path
        self.clientSubnet = clientSubnet
        self.group = group
        self.name = ResolverSpec.dns(ip, port: port).description
    }

    /// The server's address as this network reaches it.
    var server: SocketAddress {
        get throws {
            let state = path?.state
            let target = state?.connectable(ipv4: ip.isIPv6 ? [] : [ip], ipv6: []).ipv6.first ?? ip
            return try SocketAddress(target, port: port)
        }
    }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        try await resolve(name, family: family, deadline: deadline, clientSubnet: clientSubnet)
    }

    /// One query, with `clientSubnet` as its ECS option (the server passing its client's on).
    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline, clientSubnet: ClientSubnet?)
        async throws -> FamilyAnswer
    {
        let (bytes, id) = try await exchange(
            name,
            type: family.recordType,
            clientSubnet: clientSubnet,
            deadline: deadline
        )
        return try interpretWireAnswer(bytes, name: name, family: family, expectedID: id)
    }

    var answersServiceBindings: Bool { true }

    func serviceBindings(_ name: String, deadline: NIODeadline) async throws -> ServiceBindingAnswer {
        let (bytes, id) = try await exchange(name, type: .https, clientSubnet: clientSubnet, deadline: deadline)
        return try interpretWireBindings(bytes, name: name, expectedID: id)
    }

    /// One query over UDP, again over TCP when the answer was truncated: the answer's bytes and the
    /// query's id.
    private func exchange(_ name: String, type: DNSRecordType, clientSubnet: ClientSubnet?, deadline: NIODeadline)
        async throws -> ([UInt8], UInt16)
    {
        let id = UInt16.random(in: 1...UInt16.max)
        let query = try DNSMessage.query(name: name, type: type, id: id, clientSubnet: clientSubnet)
        let bytes = try await udpExchange(
            query,
            expecting: ExpectedAnswer(id: id, name: name, type: type),
            deadline: deadline
        )
        if (try? DNSMessage(parsing: bytes))?.truncated == true {
            return (try await tcpExchange(query, deadline: deadline), id)
        }
        return (bytes, id)
    }

    private func udpExchange(_ query: [UInt8], expecting expected: ExpectedAnswer, deadline: NIODeadline) async throws
        -> [UInt8]
    {
        let server = try self.server
        let eventLoop = group.next()
        let promise = eventLoop.makePromise(of: [UInt8].self)
        let channel: any Channel
        do {
            channel = try await DatagramBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            UDPAnswerHandler(server: server, expected: expected, promise: promise)
                        )
                    }
                }
                .connect(to: server).get()  // connected: ICMP "port unreachable" fails the query at once
        } catch {
            // Out of descriptors (EMFILE, ENFILE), buffers (ENOBUFS) or anything else: the promise the
            // handler would have completed is completed here, or NIO reports it leaked.
            let failure = ProviderError("could not open a UDP socket: \(error)", underlying: error)
            promise.fail(failure)
            throw failure
        }
        defer { channel.close(promise: nil) }
        let envelope = AddressedEnvelope(remoteAddress: server, data: ByteBuffer(bytes: query))
        channel.writeAndFlush(envelope).whenFailure { promise.fail($0) }
        let resend = eventLoop.scheduleTask(in: .seconds(1)) {
            channel.writeAndFlush(envelope, promise: nil)
        }
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            promise.fail(ProviderError("no answer (UDP) before the timeout"))
        }
        defer {
            resend.cancel()
            timeout.cancel()
        }
        return try await answer(promise)
    }

    /// The answer the handler delivers; any failure becomes a ProviderError. A cancelled lookup (its
    /// asker went away) stops waiting at once, and its socket closes with it.
    private func answer(_ promise: EventLoopPromise<[UInt8]>) async throws -> [UInt8] {
        do {
            return try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                promise.fail(CancellationError())
            }
        } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError("\(error)", underlying: error)
        }
    }

    private func tcpExchange(_ query: [UInt8], deadline: NIODeadline) async throws -> [UInt8] {
        guard let length = UInt16(exactly: query.count) else {
            throw ProviderError("the query (\(query.count) bytes) is longer than DNS over TCP carries (65,535)")
        }
        let server = try self.server
        let eventLoop = group.next()
        let promise = eventLoop.makePromise(of: [UInt8].self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(max(deadline - .now(), .milliseconds(1)))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(TCPAnswerHandler(promise: promise))
                    }
                }
                .connect(to: server).get()
        } catch {
            let failure = ProviderError(
                "TCP retry after a truncated answer failed to connect: \(error)",
                underlying: error
            )
            promise.fail(failure)
            throw failure
        }
        defer { channel.close(promise: nil) }
        var framed = ByteBuffer()
        framed.writeInteger(length)
        framed.writeBytes(query)
        channel.writeAndFlush(framed).whenFailure { promise.fail($0) }
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            promise.fail(ProviderError("no answer (TCP) before the timeout"))
        }
        defer { timeout.cancel() }
        return try await answer(promise)
    }
}

/// What an answer to our query must carry: our id and our question.
struct ExpectedAnswer: Sendable {
    var id: UInt16
    var name: String
    var type: DNSRecordType
}

/// Takes the first datagram from the server that is a response with our id and our question; ignores
/// everything else (spoofing attempts from other addresses, stray answers, a right id with another
/// question: RFC 5452 §9.1), so a forged datagram cannot abort the lookup.
final class UDPAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let server: SocketAddress
    let expected: ExpectedAnswer
    let promise: EventLoopPromise<[UInt8]>

    init(server: SocketAddress, expected: ExpectedAnswer, promise: EventLoopPromise<[UInt8]>) {
        self.server = server
        self.expected = expected
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard envelope.remoteAddress == server else { return }
        let bytes = Array(envelope.data.readableBytesView)
        guard let message = try? DNSMessage(parsing: bytes), message.isResponse, message.id == expected.id,
            normalizeHostname(message.questionName) == normalizeHostname(expected.name),
            message.questionType == expected.type
        else { return }
        promise.succeed(bytes)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // ICMP port unreachable shows up here as ECONNREFUSED: the server is not there.
        promise.fail(ProviderError(describeUDPError(error), underlying: error))
    }
}

/// Takes the first DNS message off a TCP stream: its length in two bytes, then the message. What comes
/// before a whole message is kept (at most the 64 KiB a length can name, plus one read).
final class TCPAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let promise: EventLoopPromise<[UInt8]>
    private var received = ByteBuffer()

    init(promise: EventLoopPromise<[UInt8]>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var chunk = unwrapInboundIn(data)
        received.writeBuffer(&chunk)
        guard let length = received.getInteger(at: received.readerIndex, as: UInt16.self),
            let message = received.getBytes(at: received.readerIndex + 2, length: Int(length))
        else { return }
        promise.succeed(message)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ProviderError("DNS server closed the TCP connection before a whole answer"))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
    }
}

func describeUDPError(_ error: any Error) -> String {
    if let e = error as? IOError, e.errnoCode == ECONNREFUSED { return "connection refused (nothing listens there)" }
    return "UDP error: \(error)"
}
