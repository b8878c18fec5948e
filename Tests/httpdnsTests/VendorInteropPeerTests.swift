// The client's side of the vendor formats, against the vendor-style peer this project did not write
// (Tests/Fixtures/vendors/ecs_peer.py): `httpdns resolve` with several names sends each vendor's batch
// form with both families in one request, a v2 answer's `mode` as a string and `no_ip_code` are read,
// and a scheduling list's per-address ports are used.

import Foundation
@testable import HTTPDNSCore
import HTTPDNSEngine
@testable import HTTPDNSLookup
@testable import HTTPDNSTestSupport
@testable import HTTPDNSTestTools
import Testing

@Suite(.serialized) struct VendorInteropPeerTests {
    typealias Peer = ClientSubnetTests.Peer

    /// Each vendor form, and the words around the names in the line the peer logs for a batch asking
    /// both families.
    static let forms: [(kind: String, before: String, after: String)] = [
        ("dnspod", "dnspod", "type=addrs subnet=none"),
        ("dnspod-aes", "dnspod-aes", "type=addrs subnet=none"),
        ("alibaba", "alibaba-batch", "query=4,6 subnet=none"),
        ("alibaba-v2", "alibaba-v2 m=0", "q=4,6 subnet=none"),
    ]

    @Test(arguments: 0..<forms.count)
    func severalNamesGoInTheVendorsBatchFormWithBothFamiliesInOneRequest(_ form: Int) async throws {
        let (kind, before, after) = Self.forms[form]
        let peer = try await Peer.start()
        defer { peer.stop() }
        let names = ["a.test", "b.test", "c.test"]
        let r = try await runCLI(
            ["resolve"] + names + ["--type", "both", "--no-fallback", "--timeout", "5", "--json"] + peer.flags(kind)
        )
        #expect(r.status == 0, "\(kind): \(r.stderr)")
        let outputs = try #require(
            try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]],
            "\(r.stdout)"
        )
        #expect(outputs.map { $0["name"] as? String } == names, "\(r.stdout)")
        for output in outputs {
            #expect(output["addresses"] as? [String] == ["192.0.2.1"], "\(kind): \(output)")
            // Straight from the provider's batch, not reported as a cache hit.
            let source = output["source"] as? String ?? ""
            #expect(!source.hasPrefix("cache("), "\(kind): \(output)")
        }
        // One request for the three names and both families; nothing asked again per name.
        let queries = peer.seen.filter { !$0.hasPrefix("at=") && !$0.contains("-signed ") }
        #expect(queries == ["\(before) \(names.joined(separator: ",")) \(after)"], "\(kind): \(queries)")
    }

    @Test func alibabasFiveNameLimitSplitsAndDNSPodTakesEight() async throws {
        let peer = try await Peer.start()
        defer { peer.stop() }
        let names = (1...7).map { "n\($0).test" }
        for kind in ["alibaba-v2", "dnspod"] {
            let r = try await runCLI(["resolve"] + names + ["--type", "a", "--no-fallback"] + peer.flags(kind))
            #expect(r.status == 0, "\(kind): \(r.stderr)")
            #expect(r.stdout.components(separatedBy: "192.0.2.1").count - 1 == 7, "\(r.stdout)")
        }
        // Alibaba's two batches go out together, in either order.
        let queries = peer.seen.filter { !$0.hasPrefix("at=") && !$0.contains("-signed ") }
        #expect(
            queries.sorted() == [
                "alibaba-v2 m=0 n1.test,n2.test,n3.test,n4.test,n5.test q=4 subnet=none",
                "alibaba-v2 m=0 n6.test,n7.test q=4 subnet=none",
                "dnspod \(names.joined(separator: ",")) type=a subnet=none",
            ],
            "\(queries)"
        )
    }

    /// Port i of `service_ip_port` goes with address i (the Android SDK's reading); an address without
    /// one is asked on the endpoint's port.
    @Test func aListedAddressIsAskedOnItsOwnPort() async throws {
        // 127.0.0.4 refuses; 127.0.0.3 listens at the peer's second port only.
        let peer = try await Peer.start(serviceIPs: "127.0.0.4,127.0.0.3:alt")
        defer { peer.stop() }
        let resolver = try peer.alibabaResolver("/139450/d") { $0.serviceLists = ServiceListSettings() }
        await resolver.refreshServiceLists()
        let list = try #require(resolver.serviceAddresses(0)?.list)
        #expect(list.ipv4 == [IPAddress("127.0.0.4")!, IPAddress("127.0.0.3")!])
        #expect(list.port(of: IPAddress("127.0.0.4")!) == nil && list.port(of: IPAddress("127.0.0.3")!) != nil)
        let answer = try await resolver.resolve("a.test", .ipv4)
        #expect(answer.ipv4 == [IPAddress("192.0.2.1")!])
        #expect(peer.seen.contains("at=alt /139450/sign_d"), "\(peer.seen)")
        #expect(!peer.seen.contains("at=127.0.0.1 /139450/sign_d"), "the bootstrap address was not needed")
        #expect(resolver.serviceAddresses(0)?.preferred == IPAddress("127.0.0.3")!)
        await resolver.shutdown()
    }
}
