// The network path's owner, without sockets: NetworkMonitor with an injected route probe and an injected
// NAT64 discovery, publishing to a NetworkPath that readers wait on. The rules themselves
// (NetworkPathMachine) are tested in NetworkPathTests; this is the executor around them.

@testable import HTTPDNSCore
@testable import HTTPDNSEngine
import Logging
import NIOConcurrencyHelpers
import Testing

@Suite struct NetworkMonitorTests {
    static let dual = RouteProbe(ipv4Source: IPAddress("192.0.2.2"), ipv6Source: IPAddress("2001:db8:1:2::5"))
    static let v6Only = RouteProbe(ipv4Source: nil, ipv6Source: IPAddress("2001:db8:1:2::5"))
    static let v4Only = RouteProbe(ipv4Source: IPAddress("192.0.2.2"), ipv6Source: nil)

    /// A monitor that never watches the kernel: each probe reads `probe`, each discovery waits for
    /// `gate` to be opened with the prefixes to report.
    struct Rig {
        let path = NetworkPath()
        let probe: NIOLockedValueBox<RouteProbe>
        let gate = DiscoveryGate()
        let changes = NIOLockedValueBox<[(old: NetworkPathState, new: NetworkPathState)]>([])
        let monitor: NetworkMonitor

        init(_ first: RouteProbe, nat64: NAT64Mode = .discover) {
            let probe = NIOLockedValueBox(first)
            self.probe = probe
            var settings = NetworkMonitor.Settings()
            settings.watch = false
            settings.nat64 = nat64
            let gate = self.gate
            monitor = NetworkMonitor(
                path: path,
                settings: settings,
                discoverPrefixes: { await gate.wait() },
                probe: { probe.withLockedValue { $0 } },
                logger: Logger(label: "test")
            )
            let changes = self.changes
            monitor.start { old, new in changes.withLockedValue { $0.append((old, new)) } }
        }
    }

    /// Hands prefixes to the one discovery waiting (or about to wait) for them.
    final class DiscoveryGate: Sendable {
        private struct State {
            var waiter: CheckedContinuation<[NAT64Prefix], Never>?
            var answer: [NAT64Prefix]?
        }
        private let state = NIOLockedValueBox(State())

        func wait() async -> [NAT64Prefix] {
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { s -> [NAT64Prefix]? in
                    if let answer = s.answer { return answer }
                    s.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }

        func open(_ prefixes: [NAT64Prefix]) {
            let waiter = state.withLockedValue { s -> CheckedContinuation<[NAT64Prefix], Never>? in
                s.answer = prefixes
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: prefixes)
        }
    }

    @Test func theFirstProbeIsPublishedBeforeStartReturns() async {
        let rig = Rig(Self.dual)
        #expect(rig.path.state.stack == NetworkStack(ipv4: true, ipv6: true))
        #expect(rig.path.state.id == Self.dual.networkID)
        #expect(rig.path.query == .both)
        await rig.monitor.stop()
    }

    @Test func anIPv6OnlyPathWaitsForItsDiscoveryAndThenSynthesizes() async throws {
        let rig = Rig(Self.v6Only)
        #expect(rig.path.state.discovering)
        // A connect to an IPv4-only name waits for the discovery: the gate is still shut.
        let connecting = Task { await rig.path.connectable(ipv4: [IPAddress("203.0.113.7")!], ipv6: []) }
        rig.gate.open([NAT64Prefix.wellKnown])
        let addresses = await connecting.value
        #expect(addresses.ipv6 == [IPAddress("64:ff9b::cb00:7107")!])
        #expect(addresses.synthesized[IPAddress("64:ff9b::cb00:7107")!] == IPAddress("203.0.113.7"))
        let settled = await rig.path.settled()
        #expect(settled.nat64 == [NAT64Prefix.wellKnown])
        await rig.monitor.stop()
    }

    @Test func anotherStackIsAPathChangeThatSubscribersHear() async {
        let rig = Rig(Self.dual)
        let heard = NIOLockedValueBox(0)
        rig.path.onChange { heard.withLockedValue { $0 += 1 } }
        rig.probe.withLockedValue { $0 = Self.v4Only }
        rig.monitor.probeNow()
        #expect(rig.path.state.stack == NetworkStack(ipv4: true, ipv6: false))
        #expect(rig.path.query == .ipv4)
        let changes = rig.changes.withLockedValue { $0 }
        #expect(changes.count == 1)
        #expect(changes.first?.old.stack == NetworkStack(ipv4: true, ipv6: true))
        #expect(changes.first?.new.stack == NetworkStack(ipv4: true, ipv6: false))
        #expect(heard.withLockedValue { $0 } == 1)
        await rig.monitor.stop()
    }

    @Test func theSameProbeAgainChangesNothing() async {
        let rig = Rig(Self.dual)
        rig.monitor.probeNow()
        #expect(rig.changes.withLockedValue { $0.count } == 0)
        await rig.monitor.stop()
    }

    @Test func aNetworkTheAppNamedKeepsItsNameAcrossProbes() async {
        let rig = Rig(Self.dual)
        rig.monitor.appNamed("office-wifi")
        #expect(rig.path.state.id == "office-wifi")
        rig.probe.withLockedValue { $0 = Self.v4Only }
        rig.monitor.probeNow()
        #expect(rig.path.state.id == "office-wifi")
        #expect(rig.path.state.stack == NetworkStack(ipv4: true, ipv6: false))
        await rig.monitor.stop()
    }
}
