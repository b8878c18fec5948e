// What a URLSession load says about its connections (`ConnectionProfile.Terms`), made here alone: a new
// session option is a field of the terms and a line in `Terms.forLoad`. The delegate's say on
// certificates and a proxy's credentials after a 407 are added by the load as it learns them
// (Challenges.swift).
//
// The networks a load may use, read from the URLSession configuration and the request, as the system
// honours them: each may only forbid (a session that forbids cellular access is not overruled by a
// request that allows it). The engine narrows its own `HTTPDNS.Configuration.network.access` by the
// result, and on Apple platforms Network.framework applies it to the connection (NWParameters).
//
// Apple platforms: a URLProtocol does not see its session, but the request it is given already carries
// the session's rules (URLSession folds them in), and all three exist there. swift-corelibs-foundation
// has only `allowsCellularAccess`, on both, and libcurl ignores it: it is recorded, not enforced, on Linux.

import Foundation
import HTTPDNSEngine

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension ConnectionProfile.Terms {
    /// The terms of a load: the networks it may use, its tuning and the session's connection limit.
    static func forLoad(session: URLSessionConfiguration?, request: URLRequest) -> Self {
        Self(
            networkAccess: NetworkAccess.forLoad(session: session, request: request),
            tuning: ConnectionTuning.forLoad(session: session, request: request),
            connectionLimit: session?.httpMaximumConnectionsPerHost
        )
    }
}

extension NetworkAccess {
    /// The rules `request` carries.
    init(of request: URLRequest) {
        #if canImport(Darwin)
            self.init(
                allowsCellular: request.allowsCellularAccess,
                allowsExpensive: request.allowsExpensiveNetworkAccess,
                allowsConstrained: request.allowsConstrainedNetworkAccess
            )
        #else
            self.init(allowsCellular: request.allowsCellularAccess)
        #endif
    }

    /// The rules a session `configuration` sets for its requests.
    init(of configuration: URLSessionConfiguration) {
        #if canImport(Darwin)
            self.init(
                allowsCellular: configuration.allowsCellularAccess,
                allowsExpensive: configuration.allowsExpensiveNetworkAccess,
                allowsConstrained: configuration.allowsConstrainedNetworkAccess
            )
        #else
            self.init(allowsCellular: configuration.allowsCellularAccess)
        #endif
    }

    /// The rules of a load: the session's (nil where it is not seen) narrowed by the request's; nil when
    /// nothing is forbidden, so the load shares the engine's connections.
    static func forLoad(session: URLSessionConfiguration?, request: URLRequest) -> NetworkAccess? {
        let requested = NetworkAccess(of: request)
        let access = session.map { NetworkAccess(of: $0).narrowed(by: requested) } ?? requested
        return access == .unrestricted ? nil : access
    }
}

extension ConnectionTuning {
    /// The tuning of a load (nil: the engine's, so the load shares its connections): the request's
    /// service type, else the session's; the session's multipath mode and TLS versions, which
    /// Network.framework takes (where the platform has them: multipath is iOS's, the TLS versions
    /// Apple's).
    static func forLoad(session: URLSessionConfiguration?, request: URLRequest) -> ConnectionTuning? {
        var tuning = ConnectionTuning()
        let requested = request.networkServiceType.rawValue
        tuning.serviceClass = ServiceClass(
            networkServiceType: requested != 0 ? requested : (session?.networkServiceType.rawValue ?? 0)
        )
        #if canImport(Darwin)
            if let session {
                #if os(iOS)
                    tuning.multipath = Multipath(rawValue: session.multipathServiceType.rawValue) ?? .none
                #endif
                let minimum = session.tlsMinimumSupportedProtocolVersion.rawValue
                let maximum = session.tlsMaximumSupportedProtocolVersion.rawValue
                // The configuration's defaults (TLS 1.2, TLS 1.3) are the engine's own.
                if minimum > 0x0303 { tuning.tlsMinimum = minimum }
                if maximum > 0, maximum < 0x0304 { tuning.tlsMaximum = maximum }
            }
        #endif
        return tuning == .standard ? nil : tuning
    }
}
