// A TCP relay on loopback in front of a real server, which misbehaves on its first connections the way
// mobile networks do: it resets them (RST before any TLS byte is answered), or holds them for a while
// before relaying. Later connections are relayed both ways, byte for byte.

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

    /// Listens on 127.0.0.1 (a port the OS picks) and relays to `target`; the i-th connection accepted
    /// (from 0) gets `faults[i]`, if there is one.
    static func start(to target: SocketAddress, faults: [Fault]) async throws -> FlakyRelay {
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
                let relay = RelayHandler()
                let delay: TimeAmount = if case .delay(let d) = fault { d } else { .zero }
                inbound.eventLoop.scheduleTask(in: delay) {
                    ClientBootstrap(group: inbound.eventLoop)
                        .channelInitializer { outbound in
                            outbound.pipeline.addHandler(RelayHandler(partner: inbound))
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
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return FlakyRelay(listener: listener, counter: counter)
    }

    func close() async {
        try? await listener.close()
    }
}

/// One side of a relayed connection: what it reads goes to the partner channel; bytes read before the
/// partner is connected are held; a close on either side closes both.
private final class RelayHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    // Touched only on the inbound channel's event loop (the outbound channel is bootstrapped on it).
    private var partner: (any Channel)?
    private var held: [ByteBuffer] = []
    private var closed = false

    init(partner: (any Channel)? = nil) { self.partner = partner }

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
        if let partner { partner.writeAndFlush(buffer, promise: nil) } else { held.append(buffer) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        partner?.close(promise: nil)
        context.fireChannelInactive()
    }
}
