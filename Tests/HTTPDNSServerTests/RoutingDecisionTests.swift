// The server's routing as a decision: which names a request needs before it can be answered,
// all of them in one pass, and the answer once they are at hand. No sockets, no upstream.

@testable import HTTPDNSCore
@testable import HTTPDNSLookup
@testable import HTTPDNSServer
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing

@Suite struct RoutingDecisionTests {
    func core(hosts: [String: [IPAddress]] = [:]) -> ServiceCore {
        ServiceCore(
            hosts: NIOLockedValueBox(HTTPDNSService.Hosts(table: hosts, stamp: "")),
            resolver: nil,
            subnetUpstream: nil,
            configuration: HTTPDNSService.Configuration(),
            logger: Logger(label: "test"),
            readiness: ServiceReadiness(hasUpstream: false),
            upstreamLookups: UpstreamLookups(limit: 8)
        )
    }

    func get(_ uri: String) -> ListenerRequest {
        ListenerRequest(
            method: .GET,
            uri: uri,
            headers: [:],
            body: ByteBuffer(),
            version: "http/1.1",
            isTLS: false,
            remote: "test"
        )
    }

    func found(_ ip: String) -> ServiceCore.Lookup {
        .found(ipv4: FamilyAnswer(addresses: [IPAddress(ip)!], ttl: 60), ipv6: FamilyAnswer(addresses: [], ttl: 60))
    }

    @Test func aBatchNamesEveryMissingNameInOnePassInTheOrderAsked() {
        let core = core(hosts: ["b.test": [IPAddress("192.0.2.2")!]])
        guard
            case .lookUp(let names) = core.decide(
                get("/d?dn=a.test,b.test,c.test"),
                known: { core.hostsLookup($0.name) }
            )
        else {
            Issue.record("answered without the names it lacks")
            return
        }
        #expect(names.map(\.name) == ["a.test", "c.test"])
    }

    @Test func withEveryNameAtHandTheAnswerIsGiven() throws {
        let core = core()
        let known = ["a.test": found("192.0.2.1"), "c.test": found("192.0.2.3")]
        guard case .respond(let response) = core.decide(get("/d?dn=a.test,c.test"), known: { known[$0.name] }) else {
            Issue.record("asked again for names it was given")
            return
        }
        #expect(response.status == .ok)
        #expect(String(buffer: response.body).contains("192.0.2.1"))
        #expect(String(buffer: response.body).contains("192.0.2.3"))
    }

    @Test func aRequestThatNeedsNoNameIsAnsweredAtOnce() {
        let core = core()
        guard case .respond(let response) = core.decide(get("/healthz"), known: { _ in nil }) else {
            Issue.record("/healthz waited for a lookup")
            return
        }
        #expect(response.status == .ok)
        guard case .respond(let bad) = core.decide(get("/d"), known: { _ in nil }) else {
            Issue.record("a request without a name waited for a lookup")
            return
        }
        #expect(bad.status == .badRequest)
    }
}
