// Ties a URLSession configuration to the loads of its sessions where the URL loading system does not
// say which session a load belongs to (Apple platforms: a URLProtocol sees its task and request, not
// the session). `enableHTTPDNS()` puts one of a fixed set of protocol classes into each configuration's
// `protocolClasses`; a load finds its configuration from the class the system instantiated, and reads
// the session's settings from it: cookie and credential storage, cookie rules, extra headers, timeouts,
// connection limit, network rules.
//
// The set is fixed (`slotCount` classes): a class is a type, and types cannot be made at run time from
// Swift. A configuration keeps its class for the life of the process (the configuration is held, so its
// identity is never reused); once every class is taken, later configurations get the base class, whose
// loads use the shared storages and no session settings, and that is logged. Apps make a handful of
// configurations; one made per request would use the set up, which is why the count is logged.

import Foundation
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Which slot each configuration holds (pure: identities in, slot numbers out).
struct SlotTable {
    let capacity: Int
    private(set) var slots: [ObjectIdentifier: Int] = [:]

    init(capacity: Int) { self.capacity = capacity }

    /// The slot `configuration` holds, a new one for it, or nil when every slot is taken.
    mutating func slot(for configuration: ObjectIdentifier) -> Int? {
        if let slot = slots[configuration] { return slot }
        guard slots.count < capacity else { return nil }
        let slot = slots.count
        slots[configuration] = slot
        return slot
    }
}

final class ConfigurationSlots: Sendable {
    static let shared = ConfigurationSlots(classes: HTTPDNSURLProtocol.slotClasses)

    /// `@unchecked Sendable`: `URLSessionConfiguration` is not Sendable; the state lives only inside
    /// the locked box below and the configurations are only held, never read.
    private struct State: @unchecked Sendable {
        var table: SlotTable
        /// The configurations, by slot: held, so an identity is never reused while it names a slot.
        var configurations: [Int: URLSessionConfiguration] = [:]
    }
    private let classes: [HTTPDNSURLProtocol.Type]
    private let state: NIOLockedValueBox<State>

    init(classes: [HTTPDNSURLProtocol.Type]) {
        self.classes = classes
        state = NIOLockedValueBox(State(table: SlotTable(capacity: classes.count)))
    }

    /// The protocol class for `configuration`'s sessions; nil when every slot is taken.
    func protocolClass(for configuration: URLSessionConfiguration) -> HTTPDNSURLProtocol.Type? {
        state.withLockedValue { state in
            guard let slot = state.table.slot(for: ObjectIdentifier(configuration)) else { return nil }
            state.configurations[slot] = configuration
            return classes[slot]
        }
    }

    /// The configuration whose sessions load through `protocolClass`, if it is a slot's class.
    func configuration(for protocolClass: AnyClass) -> URLSessionConfiguration? {
        guard let slot = classes.firstIndex(where: { $0 == protocolClass }) else { return nil }
        return state.withLockedValue { $0.configurations[slot] }
    }
}

extension HTTPDNSURLProtocol {
    /// Configurations that can have settings of their own at once.
    static let slotCount = 16

    /// One class per slot; each is the protocol, unchanged.
    static let slotClasses: [HTTPDNSURLProtocol.Type] = [
        HTTPDNSSessionSlot0.self, HTTPDNSSessionSlot1.self, HTTPDNSSessionSlot2.self, HTTPDNSSessionSlot3.self,
        HTTPDNSSessionSlot4.self, HTTPDNSSessionSlot5.self, HTTPDNSSessionSlot6.self, HTTPDNSSessionSlot7.self,
        HTTPDNSSessionSlot8.self, HTTPDNSSessionSlot9.self, HTTPDNSSessionSlot10.self, HTTPDNSSessionSlot11.self,
        HTTPDNSSessionSlot12.self, HTTPDNSSessionSlot13.self, HTTPDNSSessionSlot14.self, HTTPDNSSessionSlot15.self,
    ]
}

final class HTTPDNSSessionSlot0: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot1: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot2: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot3: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot4: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot5: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot6: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot7: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot8: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot9: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot10: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot11: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot12: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot13: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot14: HTTPDNSURLProtocol {}
final class HTTPDNSSessionSlot15: HTTPDNSURLProtocol {}
