// The client gate lets go of its protocol and client once the load has finished or been stopped
// (the soak found the cycle protocol -> gate -> protocol keeping every finished URLSession load,
// its request body and its client alive: corelibs never calls stopLoading after a finished load).

@testable import HTTPDNSURLSession
import Foundation
import NIOConcurrencyHelpers
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct ClientGateTests {
    final class Client: NSObject, URLProtocolClient, Sendable {
        func urlProtocol(_ p: URLProtocol, wasRedirectedTo r: URLRequest, redirectResponse: URLResponse) {}
        func urlProtocol(_ p: URLProtocol, cachedResponseIsValid r: CachedURLResponse) {}
        func urlProtocol(_ p: URLProtocol, didReceive r: URLResponse, cacheStoragePolicy: URLCache.StoragePolicy) {}
        func urlProtocol(_ p: URLProtocol, didLoad data: Data) {}
        func urlProtocolDidFinishLoading(_ p: URLProtocol) {}
        func urlProtocol(_ p: URLProtocol, didFailWithError error: any Error) {}
        func urlProtocol(_ p: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {}
        func urlProtocol(_ p: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {}
    }

    /// A gate whose protocol and client are referenced only by the gate itself.
    func gate() -> (ClientGate, () -> URLProtocol?, () -> Client?) {
        var owner: URLProtocol? = URLProtocol(
            request: URLRequest(url: URL(string: "https://a.test/")!),
            cachedResponse: nil,
            client: nil
        )
        var client: Client? = Client()
        let gate = ClientGate(client: client!, owner: owner!, schedule: nil)
        weak let weakOwner = owner
        weak let weakClient = client
        owner = nil
        client = nil
        return (gate, { weakOwner }, { weakClient })
    }

    @Test func aFinishedGateLetsGoOfItsProtocolAndClient() {
        let (gate, owner, client) = gate()
        #expect(owner() != nil && client() != nil, "held while the load runs")
        #expect(gate.send { _, _ in })
        let finished = NIOLockedValueBox(0)
        gate.finish { client, owner in
            client.urlProtocolDidFinishLoading(owner)
            finished.withLockedValue { $0 += 1 }
        }
        #expect(finished.withLockedValue { $0 } == 1)
        #expect(owner() == nil, "the finished gate still holds its protocol")
        #expect(client() == nil, "the finished gate still holds its client")
        #expect(!gate.send { _, _ in Issue.record("a call after the finish") })
    }

    @Test func aClosedGateLetsGoOfItsProtocolAndClient() {
        let (gate, owner, client) = gate()
        gate.close()
        #expect(owner() == nil && client() == nil)
        gate.finish { _, _ in Issue.record("a finish after the close") }
    }

    @Test func aClientCallMayReenterTheGate() {
        // The loading system may call stopLoading from inside a client call: the gate's lock is not
        // held then (a held lock trapped in debug builds and deadlocked in release ones).
        let (gate, _, _) = gate()
        let reentered = NIOLockedValueBox(false)
        #expect(
            gate.send { _, _ in
                gate.close()
                reentered.withLockedValue { $0 = true }
            }
        )
        #expect(reentered.withLockedValue { $0 })
        #expect(!gate.isOpen)
        let (other, _, _) = self.gate()
        other.finish { _, _ in
            _ = other.isOpen; other.close()
        }
        #expect(!other.isOpen)
    }

    @Test func aSuspendedGateHoldsItsCallsInOrderUntilResumed() async {
        // corelibs suspends a task with stopLoading and resumes it with startLoading: the load goes on,
        // its client calls wait for the resume and are then made in order; the finish too.
        let (gate, _, _) = gate()
        let made = NIOLockedValueBox<[String]>([])
        gate.suspend()
        #expect(gate.isSuspended)
        gate.send { _, _ in made.withLockedValue { $0.append("response") } }
        gate.send { _, _ in made.withLockedValue { $0.append("data") } }
        gate.finish { _, _ in made.withLockedValue { $0.append("finished") } }
        #expect(made.withLockedValue { $0 }.isEmpty, "a call was made while the task was suspended")
        let reader = Task { await gate.waitWhileSuspended() }
        gate.resume()
        await reader.value
        #expect(made.withLockedValue { $0 } == ["response", "data", "finished"])
        #expect(!gate.isSuspended && !gate.isOpen)
    }

    @Test func closingASuspendedGateDropsItsHeldCallsAndLetsTheLoadEnd() async {
        let (gate, owner, _) = gate()
        gate.suspend()
        gate.send { _, _ in Issue.record("a held call made after the close") }
        let reader = Task { await gate.waitWhileSuspended() }
        gate.close()
        await reader.value
        gate.resume()
        #expect(owner() == nil && !gate.isOpen)
    }

    @Test func aQuestionWaitingOnAGateIsToldOnceWhenTheGateCloses() {
        // A delegate question put through a load's gate: when the load stops first (cancelled), the
        // question is answered "nobody" at once, so a connect waiting on it ends instead of stalling.
        let (gate, _, _) = gate()
        let told = NIOLockedValueBox(0)
        gate.whenClosed { told.withLockedValue { $0 += 1 } }
        #expect(told.withLockedValue { $0 } == 0)
        gate.close()
        gate.close()
        #expect(told.withLockedValue { $0 } == 1)
        // Asked after the close: told at once.
        gate.whenClosed { told.withLockedValue { $0 += 1 } }
        #expect(told.withLockedValue { $0 } == 2)
    }
}
