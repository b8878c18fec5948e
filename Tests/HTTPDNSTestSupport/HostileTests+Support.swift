// Attacks by hostile peers, each against the real binary or the real handler, each asserting the bound
// that now holds: exit code, time, bytes delivered, memory (RSS from /proc). Hermetic: the hostile peers
// are written in HostilePeers.swift and run on loopback; no external peer is needed.
// MARK: - A hostile HTTP/2 origin against `httpdns fetch`
/// What a raw-frame origin sends once the client has opened stream 1.

import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSKit
import HTTPDNSLookup
import HTTPDNSServer
@testable import HTTPDNSTestTools
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

struct OriginAttack: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    /// Keep sending this after `bytes` until the client closes (a flood).
    var flood: [UInt8] = []
    var testDescription: String { name }
}

let originAttacks: [OriginAttack] = [
    OriginAttack(name: "INITIAL_WINDOW_SIZE over 2^31-1", bytes: H2.settings([(4, 0x8000_0000)])),
    OriginAttack(name: "MAX_FRAME_SIZE below 16384", bytes: H2.settings([(5, 1)])),
    OriginAttack(name: "DATA on stream 0", bytes: H2.settings() + H2.data(stream: 0, [1, 2, 3])),
    OriginAttack(
        name: "connection window overflow",
        bytes: H2.settings() + H2.windowUpdate(0x7FFF_FFFF) + H2.windowUpdate(0x7FFF_FFFF)
    ),
    OriginAttack(
        name: "header block over the frame size",
        bytes: H2.settings() + H2.frame(type: 1, flags: 4, stream: 1, [0x88] + [UInt8](repeating: 0x41, count: 100_000))
    ),
    OriginAttack(
        name: "PUSH_PROMISE with push disabled",
        // Push is disabled once our SETTINGS are acknowledged (RFC 9113 §6.5.3).
        bytes: H2.settings() + H2.settingsAck + H2.pushPromise(stream: 1)
    ),
    OriginAttack(
        name: "CONTINUATION flood",
        bytes: H2.settings() + H2.responseHeaders(stream: 1, endHeaders: false),
        flood: Array((0..<4096).map { _ in H2.continuation(stream: 1) }.joined())
    ),
    // Hostile round 2: control-frame floods against the engine, each of which costs it work
    // (a PING answered, SETTINGS acknowledged, a window added up) while no response comes.
    OriginAttack(
        name: "PING flood",
        bytes: H2.settings(),
        flood: Array((0..<4096).map { H2.ping(UInt8($0 & 0xFF)) }.joined())
    ),
    OriginAttack(
        name: "SETTINGS flood",
        bytes: H2.settings(),
        flood: Array((0..<4096).map { _ in H2.settings() }.joined())
    ),
    OriginAttack(
        name: "WINDOW_UPDATE flood",
        bytes: H2.settings(),
        flood: Array((0..<4096).map { _ in H2.windowUpdate(1) }.joined())
    ),
]

/// A raw HTTP/2 (h2c prior knowledge) origin: waits for the client's HEADERS, then attacks.
func startHostileH2Origin(_ attack: OriginAttack) async throws -> ScriptedServer {
    try await ScriptedServer.start { inbound, outbound in
        var iterator = inbound.makeAsyncIterator()
        var seen: [UInt8] = []
        // The client's preface, SETTINGS and first HEADERS (frame type 1).
        while !containsFrame(seen, type: 1) {
            guard let chunk = try await iterator.next() else { return }
            seen += chunk.readableBytesView
        }
        try await outbound.write(ByteBuffer(bytes: attack.bytes))
        if !attack.flood.isEmpty {
            // Until the client goes; bounded (about 360 MB) in case it never does.
            for _ in 0..<10_000 { try await outbound.write(ByteBuffer(bytes: attack.flood)) }
        }
        while try await iterator.next() != nil {}
    }
}

/// True when the client bytes (preface first) hold a frame of `type`.
func containsFrame(_ bytes: [UInt8], type: UInt8) -> Bool {
    var at = H2.preface.count
    while at + 9 <= bytes.count {
        if bytes[at + 3] == type { return true }
        at += 9 + (Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]))
    }
    return false
}

// MARK: - Hostile clients against `httpdns serve`

/// What a raw HTTP/2 client sends after its preface and SETTINGS, then keeps sending.
struct ClientAttack: Sendable, CustomTestStringConvertible {
    var name: String
    var first: [UInt8]
    var flood: [UInt8]
    var testDescription: String { name }
}

let clientAttacks: [ClientAttack] = [
    ClientAttack(
        name: "frame error then plain bytes",
        first: H2.data(stream: 0, [1, 2, 3]),
        flood: [UInt8](repeating: 0x61, count: 1 << 16)
    ),
    ClientAttack(name: "PING flood", first: [], flood: Array((0..<4096).map { H2.ping(UInt8($0 & 0xFF)) }.joined())),
    ClientAttack(name: "SETTINGS flood", first: [], flood: Array((0..<4096).map { _ in H2.settings() }.joined())),
    ClientAttack(
        name: "WINDOW_UPDATE flood",
        first: [],
        flood: Array((0..<4096).map { _ in H2.windowUpdate(1) }.joined())
    ),
    ClientAttack(
        name: "empty CONTINUATION flood",
        first: H2.frame(type: 1, flags: 0, stream: 1, [0x82, 0x84, 0x86]),
        flood: Array((0..<4096).map { _ in H2.continuation(stream: 1) }.joined())
    ),
]

// MARK: - Hostile resolvers

/// A UDP socket on loopback with the handler `make` builds in its pipeline: a scripted DNS peer
/// (ForgingDNSHandler, BrokenADNSHandler).
func startUDPPeer(_ make: @escaping @Sendable () -> any ChannelHandler) async throws -> any Channel {
    try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(make()) }
        }
        .bind(host: "127.0.0.1", port: 0).get()
}

/// For each query: a response with the query's id for another name (6.6.6.6), then the real one.
final class ForgingDNSHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard let query = try? DNSMessage(parsing: Array(envelope.data.readableBytesView)),
            let forgedQuery = try? DNSMessage(
                parsing: DNSMessage.query(name: "evil.example.com", type: .a, id: query.id)
            ),
            let forged = try? DNSMessage.response(to: forgedQuery, addresses: [IPAddress("6.6.6.6")!]),
            let real = try? DNSMessage.response(to: query, addresses: [IPAddress("198.51.0.1")!])
        else { return }
        for bytes in [forged, real] {
            context.write(
                wrapOutboundOut(
                    AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: ByteBuffer(bytes: bytes))
                ),
                promise: nil
            )
        }
        context.flush()
    }
}

// MARK: - Hostile clients of the proxy

/// Answers A with a record whose name is a compression pointer to itself (a loop no reader can follow)
/// and AAAA with no address (NODATA): an upstream whose A answer is broken.
final class BrokenADNSHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let bytes = Array(envelope.data.readableBytesView)
        guard let query = try? DNSMessage(parsing: bytes), let question = Self.question(of: bytes) else { return }
        let reply: [UInt8]
        if question.type == 1 {
            // Header: the query's id, a response (RD, RA, NOERROR), one question, one answer.
            var loop: [UInt8] = [bytes[0], bytes[1], 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0] + question.bytes
            let offset = loop.count
            loop += [0xC0 | UInt8(offset >> 8), UInt8(offset & 0xFF)]  // the name points at itself
            loop += [0, 1, 0, 1, 0, 0, 0x0E, 0x10, 0, 4, 198, 51, 0, 9]
            reply = loop
        } else {
            guard let nodata = try? DNSMessage.response(to: query, addresses: []) else { return }
            reply = nodata
        }
        context.writeAndFlush(
            wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: ByteBuffer(bytes: reply))),
            promise: nil
        )
    }

    /// The question section's bytes (name, type, class) and its type.
    static func question(of message: [UInt8]) -> (bytes: [UInt8], type: UInt16)? {
        var i = 12
        while i < message.count, message[i] != 0 { i += Int(message[i]) + 1 }
        guard i + 4 < message.count else { return nil }
        return (Array(message[12...(i + 4)]), UInt16(message[i + 1]) << 8 | UInt16(message[i + 2]))
    }
}
