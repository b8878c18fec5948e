// A TCP relay on loopback in front of a real server, which misbehaves on its first connections the way
// mobile networks do: it resets them (RST before any TLS byte is answered), or holds them for a while
// before relaying. Later connections are relayed both ways, byte for byte, each chunk held `latency` in
// each direction (a long path, as Fixtures/peers/delay_relay.py models it: the TCP handshake with the
// relay completes at once, every flight after it costs the round trip).

import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

final class FlakyRelay: Sendable {
    enum Fault: Sendable {
        /// Reset the connection as soon as it is accepted.
        case reset
        /// Relay it, but only after this long.
        case delay(TimeAmount)
    }

    let port: Int
    private let listener: any Channel
    private let counter: NIOLockedValueBox<Int>

    /// Connections accepted so far.
    var accepted: Int { counter.withLockedValue { $0 } }

    private init(listener: any Channel, counter: NIOLockedValueBox<Int>) {
        self.listener = listener
        self.counter = counter
        self.port = listener.localAddress?.port ?? 0
    }

    /// Listens on `host` at `port` (0: one the OS picks) and relays to `target`; the i-th connection
    /// accepted (from 0) gets `faults[i]`, if there is one. Every chunk is held `latency` each way.
    static func start(
        to target: SocketAddress,
        faults: [Fault],
        latency: TimeAmount = .zero,
        host: String = "127.0.0.1",
        port: Int = 0
    ) async throws -> FlakyRelay {
        let counter = NIOLockedValueBox(0)
        let group = MultiThreadedEventLoopGroup.singleton
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                let index = counter.withLockedValue { n -> Int in
                    defer { n += 1 }
                    return n
                }
                let fault = index < faults.count ? faults[index] : nil
                if case .reset = fault {
                    // SO_LINGER 0: close sends RST, not FIN.
                    let provider = inbound as? any SocketOptionProvider
                    let lingered =
                        provider?.setSoLinger(linger(l_onoff: 1, l_linger: 0))
                        ?? inbound.eventLoop.makeSucceededVoidFuture()
                    return lingered.flatMap { inbound.close() }
                }
                let relay = RelayHandler(latency: latency)
                let delay: TimeAmount = if case .delay(let d) = fault { d } else { .zero }
                inbound.eventLoop.scheduleTask(in: delay) {
                    ClientBootstrap(group: inbound.eventLoop)
                        .channelInitializer { outbound in
                            outbound.pipeline.addHandler(RelayHandler(partner: inbound, latency: latency))
                        }
                        .connect(to: target)
                        .whenComplete { result in
                            switch result {
                            case .success(let outbound): relay.attach(outbound)
                            case .failure: inbound.close(promise: nil)
                            }
                        }
                }
                return inbound.pipeline.addHandler(relay)
            }
            .bind(host: host, port: port)
            .get()
        return FlakyRelay(listener: listener, counter: counter)
    }

    func close() async {
        try? await listener.close()
    }
}

/// One side of a relayed connection: what it reads goes to the partner channel `latency` later, in
/// order; bytes due before the partner is connected are held; a close on either side closes both, after
/// the bytes read before it.
private final class RelayHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    // Touched only on the inbound channel's event loop (the outbound channel is bootstrapped on it).
    private var partner: (any Channel)?
    private var held: [ByteBuffer] = []
    private var closed = false
    private let latency: TimeAmount
    /// Chunks read and not yet due, oldest first; `close` marks the end of the connection.
    private var due: [(at: NIODeadline, buffer: ByteBuffer?)] = []
    private var drainScheduled = false

    init(partner: (any Channel)? = nil, latency: TimeAmount = .zero) {
        self.partner = partner
        self.latency = latency
    }

    func attach(_ channel: any Channel) {
        guard !closed else {
            channel.close(promise: nil)
            return
        }
        partner = channel
        for buffer in held { channel.write(buffer, promise: nil) }
        held = []
        channel.flush()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard latency > .zero else { return forward(buffer) }
        hold(buffer, on: context.eventLoop)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        if latency > .zero {
            hold(nil, on: context.eventLoop)
        } else {
            partner?.close(promise: nil)
        }
        context.fireChannelInactive()
    }

    private func forward(_ buffer: ByteBuffer) {
        if let partner { partner.writeAndFlush(buffer, promise: nil) } else { held.append(buffer) }
    }

    private func hold(_ buffer: ByteBuffer?, on loop: any EventLoop) {
        due.append((.now() + latency, buffer))
        scheduleDrain(on: loop)
    }

    private func scheduleDrain(on loop: any EventLoop) {
        guard !drainScheduled, let next = due.first else { return }
        drainScheduled = true
        loop.scheduleTask(deadline: next.at) {
            self.drainScheduled = false
            let now = NIODeadline.now()
            while let first = self.due.first, first.at <= now {
                self.due.removeFirst()
                guard let buffer = first.buffer else {
                    self.partner?.close(promise: nil)
                    continue
                }
                self.forward(buffer)
            }
            self.scheduleDrain(on: loop)
        }
    }
}
