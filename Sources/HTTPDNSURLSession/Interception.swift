// One app object's URLSession interception: the setup its sessions' loads use, the protocol classes its
// configurations carry, and what those sessions share (the pool partitions their delegates decide trust
// on; on Apple platforms the configuration slots). Two `HTTPDNS` instances have two interceptions: each
// session is served by the one whose configuration it was made from, with that one's resolver, engine,
// HSTS store, policy and metrics handler, and one ending leaves the other's sessions intercepted.
//
// The loading system instantiates a class, never an object, so a load finds its interception through the
// class it was instantiated as (`ProtocolBindings`, the one table of the process): on swift-corelibs-
// foundation each interception has a class of its own (a load sees its session there, so one class per
// interception is enough); on Apple platforms each configuration slot has one (ConfigurationSlots.swift).
// `URLSession.shared` and the other sessions made without a configuration of ours go through the base
// class, registered process-wide: the interception that registered it last serves them.

import Foundation
import HTTPDNSEngine
import Logging
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One app object's URLSession interception (see the file comment).
package final class Interception: Sendable {
    private let current: NIOLockedValueBox<HTTPDNSURLProtocol.Setup?>
    /// The connections its sessions' delegates decide trust on, per session (Linux) or per slot.
    let partitions: TrustPartitions
    /// Its configuration slots (Apple platforms; the rule is tested on Linux).
    let slots: ConfigurationSlots
    /// The class its configurations carry where a load can see its session (swift-corelibs-foundation);
    /// on Apple platforms each configuration gets a slot's class instead.
    let protocolClass: HTTPDNSURLProtocol.Type

    /// Serves the sessions enabled through it with `setup`, until ``end()``.
    package init(_ setup: HTTPDNSURLProtocol.Setup) {
        current = NIOLockedValueBox(setup)
        let number = ProtocolBindings.number()
        partitions = TrustPartitions(number: number)
        slots = ConfigurationSlots(number: number, partitions: partitions)
        #if canImport(ObjectiveC)
            protocolClass = HTTPDNSURLProtocol.self
        #else
            protocolClass = NumberedProtocolClasses.make(number)
            ProtocolBindings.bind(protocolClass, to: self, slot: nil)
        #endif
    }

    /// The setup its loads use now; nil once it has ended.
    var setup: HTTPDNSURLProtocol.Setup? { current.withLockedValue { $0 } }

    /// Changes the setup for the loads that start from now on (a load keeps the one it started with).
    package func update(_ change: (inout HTTPDNSURLProtocol.Setup) -> Void) {
        current.withLockedValue { setup in
            if setup != nil { change(&setup!) }
        }
    }

    /// Stops intercepting: its classes answer `canInit` with false from now on, so its sessions' requests
    /// go to the system's own loading. Loads already running finish.
    package func end() {
        current.withLockedValue { $0 = nil }
    }

    /// Puts its protocol first in `configuration`'s `protocolClasses` (see `enableHTTPDNS(_:)`).
    package func enable(on configuration: URLSessionConfiguration) {
        configuration.enableHTTPDNS(self)
    }

    /// A copy of `configuration` with its protocol first.
    package func enabled(_ configuration: URLSessionConfiguration) -> URLSessionConfiguration {
        let copy = configuration.copy() as! URLSessionConfiguration
        copy.enableHTTPDNS(self)
        return copy
    }

    /// Serves the sessions made without a configuration of ours where the platform consults globally
    /// registered protocols (`URLSession.shared` on Apple platforms): registers the base class, which
    /// from now on leads to this interception. On swift-corelibs-foundation registered classes come after
    /// the built-in http(s) protocol, which registers itself with the first URLSession made: call this
    /// before creating any session, or it never sees an http(s) request there.
    package func registerGlobally() {
        ProtocolBindings.bind(HTTPDNSURLProtocol.self, to: self, slot: nil)
        _ = URLProtocol.registerClass(HTTPDNSURLProtocol.self)
    }

    /// The logger of its setup, for what enabling a configuration tells.
    var logger: Logger? { setup?.logger }
}

/// The one process-wide table a URLProtocol needs: the class the loading system instantiated leads to
/// its interception (held weakly: an interception no app object holds serves nobody) and, on Apple
/// platforms, its configuration slot.
enum ProtocolBindings {
    private struct Binding {
        weak var interception: Interception?
        var slot: Int?
    }
    private struct Table {
        var byClass: [ObjectIdentifier: Binding] = [:]
        var made = 0
        /// Apple platforms: the interception that enables every session made (`enableForAllSessions()`).
        weak var allSessions: Interception?
    }
    private static let table = NIOLockedValueBox(Table())

    /// A number no other interception of this process has.
    static func number() -> Int {
        table.withLockedValue {
            $0.made += 1
            return $0.made
        }
    }

    static func bind(_ protocolClass: AnyClass, to interception: Interception, slot: Int?) {
        table.withLockedValue { table in
            // Classes of interceptions gone lead nowhere: dropped as the table doubles, so it stays
            // within twice the classes alive.
            if table.byClass.count >= 64, table.byClass.count & (table.byClass.count - 1) == 0 {
                table.byClass = table.byClass.filter { $0.value.interception != nil }
            }
            table.byClass[ObjectIdentifier(protocolClass)] = Binding(interception: interception, slot: slot)
        }
    }

    /// Classes bound (alive or not yet dropped).
    static var count: Int { table.withLockedValue { $0.byClass.count } }

    /// The interception (and slot) `protocolClass` leads to; nil for a class bound to none, or to one
    /// that is gone.
    static func binding(of protocolClass: AnyClass) -> (interception: Interception, slot: Int?)? {
        table.withLockedValue { table in
            table.byClass[ObjectIdentifier(protocolClass)].flatMap { binding in
                binding.interception.map { ($0, binding.slot) }
            }
        }
    }

    /// The interception that enables every session made from now on (Apple platforms, SessionSwizzle.swift).
    static var allSessions: Interception? {
        get { table.withLockedValue { $0.allSessions } }
        set { table.withLockedValue { $0.allSessions = newValue } }
    }
}

#if !canImport(ObjectiveC)
    /// Classes of the protocol, one per number, made without the Objective-C runtime: a generic subclass
    /// has metadata of its own for each type argument, and the argument spells the number in binary
    /// (`One<Zero<One<Bits>>>` is 0b101), so making the class of n takes log2(n) steps.
    enum NumberedProtocolClasses {
        protocol Bits {}
        enum Empty: Bits {}
        enum Zero<Higher: Bits>: Bits {}
        enum One<Higher: Bits>: Bits {}
        final class Numbered<Number: Bits>: HTTPDNSURLProtocol {}

        /// The class of `number` (the same class for the same number; a number is at least 1).
        static func make(_ number: Int) -> HTTPDNSURLProtocol.Type {
            func make<Higher: Bits>(_: Higher.Type, _ bits: ArraySlice<Bool>) -> HTTPDNSURLProtocol.Type {
                guard let bit = bits.first else { return Numbered<Higher>.self }
                return bit ? make(One<Higher>.self, bits.dropFirst()) : make(Zero<Higher>.self, bits.dropFirst())
            }
            let width = Int.bitWidth - number.leadingZeroBitCount
            return make(Empty.self, ArraySlice((0..<width).reversed().map { number >> $0 & 1 == 1 }))
        }
    }
#endif
