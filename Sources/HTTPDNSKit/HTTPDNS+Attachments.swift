// What a module an app opts into keeps per HTTPDNS instance (HTTPDNSLoopbackProxy: the keeper of the
// one loopback proxy), so the front door needs no knowledge of it: the instance makes it on first use,
// tells it of the app's background and foreground, and shuts it down with itself. One of each type.

import NIOConcurrencyHelpers

/// State an opt-in route module keeps for one `HTTPDNS`: it follows the app's lifecycle and the
/// instance's shutdown.
package protocol HTTPDNSAttachment: AnyObject, Sendable {
    /// The app went to the background.
    func enteredBackground()
    /// The app came back to the foreground.
    func enteredForeground() async
    /// The instance is shutting down: release what is held; later uses fail.
    func shutdown() async
}

/// The attachments of one instance, by type; none is made once the instance has shut down.
struct Attachments {
    private var made: [ObjectIdentifier: any HTTPDNSAttachment] = [:]
    private var closed = false

    /// Every attachment made so far.
    var all: [any HTTPDNSAttachment] { Array(made.values) }

    /// The attachment of type `A`, made by `make` the first time; nil after `close()`.
    mutating func attachment<A: HTTPDNSAttachment>(_ type: A.Type, make: () -> A) -> A? {
        guard !closed else { return nil }
        if let found = made[ObjectIdentifier(type)] as? A { return found }
        let new = make()
        made[ObjectIdentifier(type)] = new
        return new
    }

    /// Ends making attachments; returns those to shut down.
    mutating func close() -> [any HTTPDNSAttachment] {
        closed = true
        return all
    }
}

extension HTTPDNS {
    /// The attachment of type `A` for this instance, made by `make` on first use (and the app's
    /// background and foreground notices followed from then on); nil once ``shutdown()`` has begun.
    package func attachment<A: HTTPDNSAttachment>(_ type: A.Type, make: () -> A) -> A? {
        let found = attachments.withLockedValue { $0.attachment(type, make: make) }
        if found != nil { observeAppLifecycle() }
        return found
    }
}
