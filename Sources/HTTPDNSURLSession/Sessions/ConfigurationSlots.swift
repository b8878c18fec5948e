// Ties a URLSession configuration to the loads of its sessions where the URL loading system does not
// say which session a load belongs to (Apple platforms: a URLProtocol sees its task and request, not
// the session). `enableHTTPDNS(_:)` gives each configuration a slot of its interception's, and the slot a protocol class of
// its own (made at run time with the Objective-C runtime, as KVO makes its subclasses); a load finds
// its slot from the class the system instantiated, and reads the session's settings from the slot:
// cookie and credential storage, cookie rules, extra headers, timeouts, connection limit, network rules.
// The slot is also the pool partition of the connections its sessions' delegates decide trust on
// (Challenges.swift), so requests of one session reuse them.
//
// The rule (`SlotTable`, pure, tested on Linux):
// - URLSession copies its configuration when the session is made; so does the slot. Its settings are a
//   copy taken when the configuration is enabled, taken again at the slot's first load if the app's
//   object is still alive (an app often sets headers after enabling, before making the session), and
//   never again: later changes to the app's object do not reach sessions already loading, as with
//   URLSession. Where sessions are seen made (`enableForAllSessions()`, which enables each
//   configuration as its session is made), the settings are fixed right then, exactly as URLSession
//   fixes its own, and every session gets a slot of its own. Without that hook, two sessions made from
//   one configuration object without enabling it again in between share a slot: enable (or
//   `HTTPDNS.urlSessionConfiguration()`) once per session.
// - A configuration enabled again after its slot has loaded gets a new slot (it is about to make
//   another session, maybe with other settings). A copy of a configuration (`copy()`) carries its
//   slot's class, so sessions made from a changed copy that was not enabled again read the original's
//   settings: enable each configuration before making a session from it (`HTTPDNS.configure`).
// - There is no fixed number of slots. Each is a class (a few hundred bytes, never freed: a session
//   made from it may live as long as the process) and a configuration copy; the count is logged at
//   each power of two from 64 on, for an app that makes a configuration per request.
//
// corelibs shows a load its session, so there loads read the session's configuration itself and
// `enableHTTPDNS(_:)` puts the interception's one class in; the slots are Apple-only executors of the
// same rule.

import Foundation
import HTTPDNSEngine
import NIOConcurrencyHelpers

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(ObjectiveC)
    import ObjectiveC
#endif

/// Which slot each configuration holds and what each slot's loads read (pure: identities and events in,
/// slot numbers and decisions out). `Settings` is what a load reads (a configuration copy).
struct SlotTable<Settings> {
    private struct Slot {
        var settings: Settings
        /// Whether a load has read the settings: they are fixed from then on.
        var loaded = false
    }
    private var slots: [Slot] = []
    /// The slot each configuration enabled last holds.
    private var latest: [ObjectIdentifier: Int] = [:]

    var count: Int { slots.count }

    /// What enabling a configuration decided.
    enum Enabled: Equatable {
        /// The configuration's slot, whose settings are taken again (no load has read them yet).
        case same(Int)
        /// A new slot for it.
        case new(Int)

        var slot: Int {
            switch self {
            case .same(let slot), .new(let slot): return slot
            }
        }
    }

    /// `configuration` is enabled with `settings` (a copy taken now). It keeps its slot while no load has
    /// read it, else gets a new one. `alive(slot)`: whether the object the slot was made for is still
    /// there (an identity can be reused once it is gone).
    mutating func enable(_ configuration: ObjectIdentifier, settings: Settings, alive: (Int) -> Bool) -> Enabled {
        if let slot = latest[configuration], !slots[slot].loaded, alive(slot) {
            slots[slot].settings = settings
            return .same(slot)
        }
        slots.append(Slot(settings: settings))
        latest[configuration] = slots.count - 1
        return .new(slots.count - 1)
    }

    /// The settings of `slot` once a load has fixed them; nil before (or for no such slot).
    func fixed(_ slot: Int) -> Settings? {
        slots.indices.contains(slot) && slots[slot].loaded ? slots[slot].settings : nil
    }

    /// The settings a load of `slot` reads. The first load may take them again from the configuration
    /// (`again`, nil when its object is gone); from then on they are fixed.
    mutating func load(_ slot: Int, again: () -> Settings?) -> Settings? {
        guard slots.indices.contains(slot) else { return nil }
        if !slots[slot].loaded {
            if let fresh = again() { slots[slot].settings = fresh }
            slots[slot].loaded = true
        }
        return slots[slot].settings
    }

    /// A session is being made from `configuration` (seen where sessions are: the all-sessions hook,
    /// SessionSwizzle.swift): its slot's settings, taken when it was enabled just now, are fixed, as
    /// URLSession copies its configuration when the session is made; a session made later from the same
    /// object, changed or not, gets a slot of its own when it is enabled again.
    mutating func sessionMade(from configuration: ObjectIdentifier) {
        guard let slot = latest[configuration], slots.indices.contains(slot) else { return }
        slots[slot].loaded = true
    }

    /// Whether a count of slots is one to log (each power of two from 64 on).
    static func isWorthLogging(_ count: Int) -> Bool { count >= 64 && count & (count - 1) == 0 }
}

/// The slots of one interception: the table, the app's configuration objects (held weakly) and, on Apple
/// platforms, each slot's protocol class, bound to the interception (`ProtocolBindings`).
final class ConfigurationSlots: Sendable {
    /// The interception's number, in its slot classes' names.
    private let number: Int
    private let partitions: TrustPartitions

    private struct Weak {
        weak var configuration: URLSessionConfiguration?
    }
    /// `@unchecked Sendable`: `URLSessionConfiguration` is not Sendable; the state lives only inside the
    /// locked box below, and the copies are never changed after they are taken.
    private struct State: @unchecked Sendable {
        var table = SlotTable<URLSessionConfiguration>()
        var objects: [Weak] = []
        /// Apple platforms: each slot's class, and the slot of each class.
        var classBySlot: [Int: AnyClass] = [:]
        var partitions: [UInt64] = []
    }
    private let state = NIOLockedValueBox(State())

    init(number: Int, partitions: TrustPartitions) {
        self.number = number
        self.partitions = partitions
    }

    /// Gives `configuration` its slot for the session about to be made from it: returns the slot, and
    /// whether it is new.
    func enable(_ configuration: URLSessionConfiguration) -> SlotTable<URLSessionConfiguration>.Enabled {
        let copy = Self.copy(of: configuration)
        return state.withLockedValue { state in
            let objects = state.objects
            let enabled = state.table.enable(ObjectIdentifier(configuration), settings: copy) {
                objects[$0].configuration === configuration
            }
            if case .new = enabled {
                state.objects.append(Weak(configuration: configuration))
                state.partitions.append(partitions.unique())
            }
            return enabled
        }
    }

    /// A session is being made from `configuration`, enabled just before (see `SlotTable.sessionMade`).
    func sessionMade(from configuration: URLSessionConfiguration) {
        state.withLockedValue { $0.table.sessionMade(from: ObjectIdentifier(configuration)) }
    }

    /// The settings loads of `slot` read (see `SlotTable.load`).
    func settings(of slot: Int) -> URLSessionConfiguration? {
        // Every load but a slot's first finds them fixed: no copy.
        let (fixed, object) = state.withLockedValue { state in
            (state.table.fixed(slot), state.objects.indices.contains(slot) ? state.objects[slot].configuration : nil)
        }
        if let fixed { return fixed }
        // The copy is taken outside the lock (copying calls into Foundation).
        let fresh = object.map(Self.copy(of:))
        return state.withLockedValue { $0.table.load(slot) { fresh } }
    }

    /// The pool partition of the connections `slot`'s delegates decide trust on.
    func partition(of slot: Int) -> UInt64? {
        state.withLockedValue { $0.partitions.indices.contains(slot) ? $0.partitions[slot] : nil }
    }

    var count: Int { state.withLockedValue { $0.table.count } }

    /// Whether loads of `protocolClass`'s sessions find no network while their session waits for
    /// connectivity (`waitsForConnectivity`): then the system's loading takes them, which waits and
    /// tells the delegate (`taskIsWaitingForConnectivity`), as a URLProtocol cannot. Apple platforms;
    /// corelibs does not wait.
    static func waitsWhileOffline(protocolClass: AnyClass) -> Bool {
        #if canImport(ObjectiveC)
            guard platformPathFacts.withLockedValue({ $0?.satisfied == false }),
                let binding = ProtocolBindings.binding(of: protocolClass), let slot = binding.slot
            else { return false }
            return binding.interception.slots.settings(of: slot)?.waitsForConnectivity == true
        #else
            return false
        #endif
    }

    private static func copy(of configuration: URLSessionConfiguration) -> URLSessionConfiguration {
        // `copy()` of a URLSessionConfiguration is always one (NSCopying on the class itself).
        (configuration.copy() as? URLSessionConfiguration) ?? configuration
    }

    #if canImport(ObjectiveC)
        // COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.

        /// The protocol class for the sessions about to be made from `configuration` through
        /// `interception`: its slot's, bound to the interception. nil only when the runtime refuses to
        /// make a class (then the base class serves, with the shared storages, and that is logged).
        func protocolClass(for configuration: URLSessionConfiguration, of interception: Interception) -> AnyClass? {
            let slot = enable(configuration).slot
            let name = "HTTPDNSSessionSlot\(number)_\(slot)"
            return state.withLockedValue { state in
                if let existing = state.classBySlot[slot] { return existing }
                guard let made = Self.makeClass(name) else { return nil }
                state.classBySlot[slot] = made
                ProtocolBindings.bind(made, to: interception, slot: slot)
                return made
            }
        }

        /// A subclass of the protocol, registered with the Objective-C runtime under a name of its own.
        /// The runtime copies a Swift superclass's metadata into the subclass (what KVO relies on), so it
        /// is the protocol, unchanged.
        private static func makeClass(_ name: String) -> AnyClass? {
            if let existing = NSClassFromString(name) { return existing }
            guard let made = objc_allocateClassPair(HTTPDNSURLProtocol.self, name, 0) else { return nil }
            objc_registerClassPair(made)
            return made
        }
    #endif
}
