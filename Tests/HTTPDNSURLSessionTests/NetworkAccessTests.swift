// The network rules of a load (NetworkAccess): what a session configuration and a request allow,
// combined as the system combines them (each may only forbid), and the engine's own rules narrowed by
// them. Network.framework applies the result on Apple platforms; here the mapping itself is proven.

import Foundation
@testable import HTTPDNSEngine
import Testing

@testable import HTTPDNSURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct NetworkAccessTests {
    @Test func nothingForbiddenSharesTheEnginesConnections() {
        let request = URLRequest(url: URL(string: "https://a.test/")!)
        #expect(NetworkAccess.forLoad(session: .default, request: request) == nil)
        #expect(NetworkAccess.forLoad(session: nil, request: request) == nil)
    }

    @Test func aSessionThatForbidsCellularIsNotOverruledByItsRequest() {
        let session = URLSessionConfiguration.default
        session.allowsCellularAccess = false
        var request = URLRequest(url: URL(string: "https://a.test/")!)
        request.allowsCellularAccess = true
        let access = NetworkAccess.forLoad(session: session, request: request)
        #expect(access == NetworkAccess(allowsCellular: false))
        #expect(access?.description == "no cellular")
    }

    @Test func aRequestMayForbidWhatItsSessionAllows() {
        var request = URLRequest(url: URL(string: "https://a.test/")!)
        request.allowsCellularAccess = false
        #expect(NetworkAccess.forLoad(session: .default, request: request) == NetworkAccess(allowsCellular: false))
        #expect(NetworkAccess.forLoad(session: nil, request: request) == NetworkAccess(allowsCellular: false))
    }

    @Test func rulesOnlyNarrow() {
        let engine = NetworkAccess(allowsExpensive: false)
        let load = NetworkAccess(allowsCellular: false)
        let both = engine.narrowed(by: load)
        #expect(both == NetworkAccess(allowsCellular: false, allowsExpensive: false, allowsConstrained: true))
        #expect(both.description == "no cellular, no expensive")
        #expect(NetworkAccess.unrestricted.narrowed(by: .unrestricted) == .unrestricted)
        #expect(NetworkAccess.unrestricted.description == "any network")
        // Nothing widens a rule once narrowed.
        #expect(both.narrowed(by: .unrestricted) == both)
    }

    @Test func theServiceTypeMultipathAndTLSVersionsGoToTheConnectionAndKeepItApart() {
        var request = URLRequest(url: URL(string: "https://a.test/")!)
        // The defaults ask for nothing: the load shares the engine's connections.
        #expect(ConnectionTuning.forLoad(session: .default, request: request) == nil)
        request.networkServiceType = .background
        #expect(ConnectionTuning.forLoad(session: .default, request: request)?.serviceClass == .background)
        // The session's service type where the request keeps the default.
        let session = URLSessionConfiguration.ephemeral
        session.networkServiceType = .voice
        #expect(
            ConnectionTuning.forLoad(session: session, request: URLRequest(url: request.url!))?.serviceClass
                == .interactiveVoice
        )
        #expect(ConnectionTuning.ServiceClass(networkServiceType: 1) == .interactiveVoice)
        #expect(ConnectionTuning.ServiceClass(networkServiceType: 9) == .interactiveVideo)
        #expect(ConnectionTuning.ServiceClass(networkServiceType: 11) == .signaling)
        #expect(ConnectionTuning.ServiceClass(networkServiceType: 99) == .bestEffort)
        // An app may raise the TLS floor, never lower it below 1.2.
        var tls = ConnectionTuning()
        tls.tlsMinimum = 0x0301
        #expect(tls.effectiveTLSMinimum == 0x0303)
        tls.tlsMinimum = 0x0304
        #expect(tls.effectiveTLSMinimum == 0x0304)
    }
}
