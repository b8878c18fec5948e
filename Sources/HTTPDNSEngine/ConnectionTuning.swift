// What a URLSession configuration or request asks of its connections beyond which networks they may
// use: the traffic's service class (`networkServiceType`), Multipath TCP (`multipathServiceType`) and
// the TLS versions (`tlsMinimumSupportedProtocolVersion`, `tlsMaximumSupportedProtocolVersion`).
// Network.framework takes each (Apple platforms); Linux's sockets and NIOSSL are not told, and there
// they only keep connections apart in the pool, as the network rules do.

/// A connection's service class, multipath mode and TLS versions (see the file comment).
package struct ConnectionTuning: Hashable, Sendable {
    /// The traffic's kind, as `URLRequest.NetworkServiceType` names it.
    package enum ServiceClass: Hashable, Sendable {
        case bestEffort, background, interactiveVideo, interactiveVoice, responsiveData, signaling

        /// Network.framework's class for a `URLRequest.NetworkServiceType` raw value (what the system's
        /// own loading picks; an unknown value is best effort).
        package init(networkServiceType raw: UInt) {
            switch raw {
            case 1, 4: self = .interactiveVoice  // voip, voice
            case 2, 8, 9: self = .interactiveVideo  // video, avStreaming, responsiveAV
            case 3: self = .background
            case 6: self = .responsiveData
            case 11: self = .signaling  // callSignaling
            default: self = .bestEffort
            }
        }
    }

    /// Multipath TCP, as `URLSessionConfiguration.MultipathServiceType` names it.
    package enum Multipath: Int, Hashable, Sendable {
        case none = 0, handover = 1, interactive = 2, aggregate = 3
    }

    package var serviceClass = ServiceClass.bestEffort
    package var multipath = Multipath.none
    /// TLS versions as `tls_protocol_version_t` raw values (0x0303 is TLS 1.2, 0x0304 TLS 1.3); nil: the
    /// engine's (TLS 1.2 at least, the highest both sides speak).
    package var tlsMinimum: UInt16?
    package var tlsMaximum: UInt16?

    package init() {}

    /// The engine's defaults: best effort, no multipath, TLS 1.2 and up.
    package static let standard = ConnectionTuning()

    /// The TLS floor to ask for: never below TLS 1.2, whatever the app asks (1.0 and 1.1 are gone from
    /// every platform's defaults and from RFC 8996).
    var effectiveTLSMinimum: UInt16 { max(tlsMinimum ?? 0x0303, 0x0303) }
}
