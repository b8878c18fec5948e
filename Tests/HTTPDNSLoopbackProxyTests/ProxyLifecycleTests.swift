// The rules that keep the loopback proxy running for proxy configurations (ProxyLifecycle), without
// I/O: started once on first use, again on the same port when its listener is lost, moved (and the move
// reported) only when that port is taken.

@testable import HTTPDNSKit
@testable import HTTPDNSLoopbackProxy
import Testing

@Suite struct ProxyLifecycleTests {
    @Test func theFirstUseStartsItOnceAndTheOthersWait() {
        var l = ProxyLifecycle()
        #expect(l.needed() == .start(port: 0))
        #expect(l.needed() == .wait)
        #expect(l.started(port: 4100) == [.deliver(port: 4100)])
        #expect(l.needed() == .deliver(port: 4100))
        #expect(l.state == .running(port: 4100))
    }

    @Test func aListenerLostInTheForegroundStartsAgainOnTheSamePortAtOnce() {
        var l = ProxyLifecycle()
        _ = l.needed()
        _ = l.started(port: 4100)
        #expect(l.listenerLost() == .start(port: 4100))
        #expect(l.needed() == .wait)
        #expect(l.started(port: 4100) == [.deliver(port: 4100)])
    }

    @Test func aListenerLostInTheBackgroundStartsAgainInTheForegroundOrAtTheNextUse() {
        var l = ProxyLifecycle()
        _ = l.needed()
        _ = l.started(port: 4100)
        l.enteredBackground()
        #expect(l.listenerLost() == nil)
        #expect(l.state == .lost(port: 4100))
        #expect(l.enteredForeground() == .start(port: 4100))
        #expect(l.started(port: 4100) == [.deliver(port: 4100)])
        // Lost again in the background, and used before the foreground notice.
        l.enteredBackground()
        _ = l.listenerLost()
        #expect(l.needed() == .start(port: 4100))
        #expect(l.enteredForeground() == nil)
        // A foreground with nothing lost does nothing.
        _ = l.started(port: 4100)
        #expect(l.enteredForeground() == nil)
    }

    @Test func aTakenPortMovesTheProxyAndTheMoveIsReported() {
        var l = ProxyLifecycle()
        _ = l.needed()
        _ = l.started(port: 4100)
        _ = l.listenerLost()
        #expect(l.startFailed() == .start(port: 0))
        #expect(l.started(port: 4200) == [.moved(from: 4100, to: 4200), .deliver(port: 4200)])
        // The new port is the one kept from now on.
        _ = l.listenerLost()
        #expect(l.started(port: 4200) == [.deliver(port: 4200)])
    }

    @Test func aStartThatFailsEverywhereFailsTheWaitersAndTheNextUseTriesAgain() {
        var l = ProxyLifecycle()
        _ = l.needed()
        #expect(l.startFailed() == .fail)
        #expect(l.state == .idle)
        #expect(l.needed() == .start(port: 0))
        _ = l.started(port: 4100)
        _ = l.listenerLost()
        #expect(l.startFailed() == .start(port: 0))
        #expect(l.startFailed() == .fail)
        // The configurations still name 4100: that is the port tried next.
        #expect(l.needed() == .start(port: 4100))
    }

    @Test func shutdownStopsItForGood() {
        var l = ProxyLifecycle()
        #expect(l.shutdown() == nil)
        #expect(l.needed() == .fail)
        var running = ProxyLifecycle()
        _ = running.needed()
        _ = running.started(port: 4100)
        #expect(running.shutdown() == .stop)
        #expect(running.listenerLost() == nil)
        #expect(running.enteredForeground() == nil)
        // A start that ends after the shutdown is stopped.
        var starting = ProxyLifecycle()
        _ = starting.needed()
        _ = starting.shutdown()
        #expect(starting.started(port: 4100) == [.stop])
    }
}
