// NAT64 prefixes (RFC 6052 address layout at every prefix length, RFC 7050 discovery) and the
// network-path rules, without sockets.

@testable import HTTPDNSCore
@testable import HTTPDNSEngine
import Testing

@Suite struct NAT64PrefixTests {
    /// RFC 6052 section 2.4's table: 192.0.2.33 under 2001:db8:122:344::/n for every n.
    static let rfc6052Examples: [(String, Int, String)] = [
        ("2001:db8::", 32, "2001:db8:c000:221::"),
        ("2001:db8:100::", 40, "2001:db8:1c0:2:21::"),
        ("2001:db8:122::", 48, "2001:db8:122:c000:2:2100::"),
        ("2001:db8:122:300::", 56, "2001:db8:122:3c0:0:221::"),
        ("2001:db8:122:344::", 64, "2001:db8:122:344:c0:2:2100:0"),
        ("2001:db8:122:344::", 96, "2001:db8:122:344::c000:221"),
        ("64:ff9b::", 96, "64:ff9b::c000:221"),
    ]

    @Test(arguments: rfc6052Examples)
    func synthesisAndExtractionFollowRFC6052(_ prefix: String, _ length: Int, _ expected: String) throws {
        let p = try #require(NAT64Prefix(IPAddress(prefix)!, length: length))
        let ipv4 = IPAddress("192.0.2.33")!
        #expect(p.synthesize(ipv4) == IPAddress(expected)!)
        #expect(p.extract(IPAddress(expected)!) == ipv4)
        #expect(p.synthesize(IPAddress("::1")!) == nil)
        // An address under another prefix is not this translator's.
        #expect(p.extract(IPAddress("2001:db9::c000:221")!) == nil)
    }

    @Test(arguments: NAT64Prefix.lengths)
    func discoveryFindsThePrefixAtEveryLength(_ length: Int) throws {
        let prefix = try #require(NAT64Prefix(IPAddress("2001:db8:122:344::")!, length: length))
        let answers = NAT64Prefix.wellKnownIPv4.map { prefix.synthesize($0)! }
        #expect(NAT64Prefix.discover(fromAAAA: answers) == [prefix])
    }

    @Test func theReservedOctetMustBeZero() throws {
        // Bits 64-71 ("u") are part of a /96 prefix, and must be zero there; shorter prefixes end before
        // them.
        #expect(NAT64Prefix(IPAddress("2001:db8:0:0:ff00::")!, length: 96) == nil)
        #expect(NAT64Prefix(IPAddress("2001:db8:0:0:ff00::")!, length: 64) != nil)
        // An address with u set is not an RFC 6052 address at /32 to /64.
        let p = try #require(NAT64Prefix(IPAddress("2001:db8::")!, length: 64))
        #expect(p.extract(IPAddress("2001:db8::ffc0:2:2100:0")!) == nil)
        #expect(p.extract(IPAddress("2001:db8::c0:2:2100:0")!) == IPAddress("192.0.2.33")!)
        // A DNS64 answer with 192.0.0.170 at the /40 place but u set reveals nothing.
        #expect(NAT64Prefix.discover(fromAAAA: [IPAddress("2001:db8:c0:0:ffaa::")!]) == [])
        #expect(
            NAT64Prefix.discover(fromAAAA: [IPAddress("2001:db8:c0:0:aa::")!]).map(\.description) == ["2001:db8::/40"]
        )
    }

    @Test func noPrefixIsEverAssumed() {
        // An ordinary AAAA answer (no DNS64), IPv4 answers, nothing.
        #expect(NAT64Prefix.discover(fromAAAA: [IPAddress("2001:4860:4860::8888")!]) == [])
        #expect(NAT64Prefix.discover(fromAAAA: [IPAddress("192.0.0.170")!]) == [])
        #expect(NAT64Prefix.discover(fromAAAA: []) == [])
        // 192.0.0.172 is not a well-known address.
        #expect(NAT64Prefix.discover(fromAAAA: [IPAddress("64:ff9b::c000:ac")!]) == [])
    }

    @Test func twoPrefixesAreBothKeptInAnswerOrder() {
        let answers = ["fd00:64:64::c000:aa", "fd00:64:64::c000:ab", "64:ff9b::c000:aa"].map { IPAddress($0)! }
        #expect(NAT64Prefix.discover(fromAAAA: answers).map(\.description) == ["fd00:64:64::/96", "64:ff9b::/96"])
    }

    @Test(arguments: ["64:ff9b::/96", "2001:db8::/32", "2001:db8:100::/40"])
    func prefixesParse(_ text: String) throws {
        #expect(try #require(NAT64Prefix(parsing: text)).description == text)
    }

    @Test(arguments: ["64:ff9b::", "64:ff9b::/95", "64:ff9b::/", "192.0.2.0/24", "64:ff9b::/0096", "x/96", "/96"])
    func badPrefixesDoNotParse(_ text: String) {
        #expect(NAT64Prefix(parsing: text) == nil)
    }
}

@Suite struct NetworkPathTests {
    static let dual = RouteProbe(ipv4Source: IPAddress("192.0.2.2"), ipv6Source: IPAddress("2001:db8:1:2::5"))
    static let v6Only = RouteProbe(ipv4Source: nil, ipv6Source: IPAddress("2001:db8:1:2::5"))
    static let v4Only = RouteProbe(ipv4Source: IPAddress("192.0.2.2"), ipv6Source: nil)
    static let prefix = NAT64Prefix(parsing: "fd00:64:64::/96")!

    @Test func theFamiliesAskedFollowTheStack() {
        func query(_ stack: NetworkStack?, _ nat64: [NAT64Prefix]?) -> AddressQuery {
            NetworkPathState(id: "n", stack: stack, nat64: nat64).query
        }
        #expect(query(nil, []) == .both)  // not probed yet
        #expect(query(NetworkStack(ipv4: true, ipv6: true), []) == .both)
        #expect(query(NetworkStack(ipv4: false, ipv6: false), []) == .both)  // loopback only: unsure
        #expect(query(NetworkStack(ipv4: true, ipv6: false), []) == .ipv4)
        #expect(query(NetworkStack(ipv4: false, ipv6: true), []) == .ipv6)  // no NAT64: A is useless
        #expect(query(NetworkStack(ipv4: false, ipv6: true), [Self.prefix]) == .both)  // A via NAT64
        #expect(query(NetworkStack(ipv4: false, ipv6: true), nil) == .both)  // discovery running
    }

    @Test func ipv4IsSynthesizedOnlyWithoutAnIPv4RouteAndWithAPrefix() {
        let v4 = [IPAddress("198.18.0.2")!, IPAddress("127.0.0.1")!, IPAddress("203.0.113.9")!]
        let v6 = [IPAddress("2001:db8::1")!]
        let ipv6Only = NetworkPathState(id: "n", stack: NetworkStack(ipv4: false, ipv6: true), nat64: [Self.prefix])
        let out = ipv6Only.connectable(ipv4: v4, ipv6: v6)
        // Native IPv6 first, then the synthesized ones in the answer's order; loopback stays as it is.
        #expect(out.ipv6 == ["2001:db8::1", "fd00:64:64::c612:2", "fd00:64:64::cb00:7109"].map { IPAddress($0)! })
        #expect(out.ipv4 == [IPAddress("127.0.0.1")!])
        #expect(out.synthesized[IPAddress("fd00:64:64::c612:2")!] == IPAddress("198.18.0.2")!)
        let dual = NetworkPathState(id: "n", stack: NetworkStack(ipv4: true, ipv6: true), nat64: [Self.prefix])
        #expect(dual.connectable(ipv4: v4, ipv6: v6).ipv4 == v4)
        let noPrefix = NetworkPathState(id: "n", stack: NetworkStack(ipv4: false, ipv6: true), nat64: [])
        #expect(noPrefix.connectable(ipv4: v4, ipv6: v6).synthesized.isEmpty)
    }

    @Test func theNetworkIDComesFromTheSourcesAndIgnoresTheInterfaceID() {
        let a = Self.dual.networkID
        #expect(a.hasPrefix("net-") && a.count == 20)
        // Another IPv6 address in the same /64 (privacy addresses rotate): the same network.
        #expect(
            RouteProbe(ipv4Source: IPAddress("192.0.2.2"), ipv6Source: IPAddress("2001:db8:1:2::99")).networkID == a
        )
        #expect(RouteProbe(ipv4Source: IPAddress("192.0.2.3"), ipv6Source: IPAddress("2001:db8:1:2::5")).networkID != a)
        #expect(Self.v6Only.networkID != a)
        #expect(RouteProbe(ipv4Source: nil, ipv6Source: nil).networkID == "local")
    }

    @Test func theFirstProbeIsNoChangeAndABurstOfNoticesIsOneProbe() {
        var m = NetworkPathMachine(networkID: nil, nat64: .discover)
        #expect(
            m.handle(.probed(Self.dual)) == [.update(NetworkPathState(id: Self.dual.networkID, stack: Self.dual.stack))]
        )
        #expect(m.handle(.kernelNotice) == [.scheduleDebounce])
        #expect(m.handle(.kernelNotice) == [])
        #expect(m.handle(.kernelNotice) == [])
        #expect(m.handle(.debounceElapsed) == [.probe])
        // Nothing changed (a notice about an unrelated interface).
        #expect(m.handle(.probed(Self.dual)) == [])
        #expect(m.handle(.kernelNotice) == [.scheduleDebounce])
    }

    @Test func losingIPv4IsAPathChangeThatLooksForAPrefix() {
        var m = NetworkPathMachine(networkID: nil, nat64: .discover)
        _ = m.handle(.probed(Self.dual))
        let before = m.state
        let id = Self.v6Only.networkID
        let pending = NetworkPathState(id: id, stack: Self.v6Only.stack, nat64: nil)
        #expect(
            m.handle(.probed(Self.v6Only)) == [
                .update(pending), .pathChanged(from: before), .discoverPrefixes(network: id),
            ]
        )
        #expect(m.state.query == .both)
        // A discovery for a network the device has already left is remembered, not applied.
        #expect(m.handle(.discovered([Self.prefix], network: "elsewhere")) == [])
        let found = NetworkPathState(id: id, stack: Self.v6Only.stack, nat64: [Self.prefix])
        #expect(m.handle(.discovered([Self.prefix], network: id)) == [.update(found)])
        #expect(m.state.synthesizes)
        // Back on the dual-stack network: no prefix needed; then IPv6-only again: the remembered prefix
        // is used at once while a new discovery runs.
        _ = m.handle(.probed(Self.dual))
        #expect(m.state.nat64 == [])
        let again = m.handle(.probed(Self.v6Only))
        #expect(again.contains(.discoverPrefixes(network: id)))
        #expect(m.state.nat64 == [Self.prefix])
    }

    @Test func aDiscoveryWithoutAnswerMeansNoPrefix() {
        var m = NetworkPathMachine(networkID: nil, nat64: .discover)
        _ = m.handle(.probed(Self.v6Only))
        #expect(m.state.discovering)
        _ = m.handle(.discovered([], network: Self.v6Only.networkID))
        #expect(!m.state.discovering && !m.state.synthesizes)
        #expect(m.state.query == .ipv6)
    }

    @Test func aConfiguredPrefixOrOffNeedsNoDiscovery() {
        var configured = NetworkPathMachine(networkID: nil, nat64: .prefix(.wellKnown))
        #expect(
            !configured.handle(.probed(Self.v6Only)).contains { if case .discoverPrefixes = $0 { true } else { false } }
        )
        #expect(configured.state.nat64 == [.wellKnown])
        var off = NetworkPathMachine(networkID: nil, nat64: .off)
        _ = off.handle(.probed(Self.v6Only))
        #expect(off.state.nat64 == [] && !off.state.synthesizes)
        // An IPv4-only network never looks for a prefix.
        var v4 = NetworkPathMachine(networkID: nil, nat64: .discover)
        #expect(v4.handle(.probed(Self.v4Only)).count == 1)
        #expect(v4.state.query == .ipv4)
    }

    @Test func theAppsOwnNamesWin() {
        var m = NetworkPathMachine(networkID: "home-wifi", nat64: .discover)
        _ = m.handle(.probed(Self.dual))
        #expect(m.state.id == "home-wifi")
        let before = m.state
        #expect(
            m.handle(.appNamed("cellular")) == [
                .update(NetworkPathState(id: "cellular")), .pathChanged(from: before), .probe,
            ]
        )
        _ = m.handle(.probed(Self.dual))
        #expect(m.state.id == "cellular" && m.state.stack == Self.dual.stack)
        // The kernel's changes still change the path, under the app's name.
        let changed = m.handle(.probed(Self.v4Only))
        #expect(m.state.id == "cellular")
        #expect(changed.contains(.pathChanged(from: NetworkPathState(id: "cellular", stack: Self.dual.stack))))
        #expect(m.handle(.appNamed("cellular")) == [])
    }
}
