// App Transport Security, as Apple's URL loading applies it, read from the app's Info.plist
// (NSAppTransportSecurity). An intercepted http:// request that ATS forbids goes back to the system
// (HandBack.swift), which refuses it as the app expects, instead of going out in the clear. So does an
// https request to a host whose ATS settings the system enforces in ways our connection would not:
// pins in `NSPinnedDomains` (CA or leaf identities), or an exception that lowers the TLS floor or
// drops forward secrecy (our connections keep TLS 1.2 and the ATS cipher suites, which the app
// asked to relax). Pure: the Info.plist dictionary in, a verdict per host out. Linux has no ATS: there
// is no Info.plist entry, so nothing is forbidden.

import Foundation

struct TransportSecurity: Equatable {
    struct Exception: Equatable {
        var allowsInsecureHTTPLoads: Bool?
        var includesSubdomains: Bool
        /// `NSExceptionMinimumTLSVersion` below TLSv1.2, or `NSExceptionRequiresForwardSecrecy` off: the
        /// app relaxed TLS for this domain, which only the system's loading does.
        var relaxesTLS = false
    }

    /// A domain of `NSPinnedDomains`.
    struct Pinned: Equatable {
        var includesSubdomains: Bool
    }

    /// Whether ATS is in force at all: in an app bundle, always (its defaults forbid cleartext).
    var inForce: Bool
    var allowsArbitraryLoads = false
    var allowsLocalNetworking = false
    /// By lowercased domain.
    var exceptions: [String: Exception] = [:]
    /// `NSPinnedDomains`, by lowercased domain.
    var pinned: [String: Pinned] = [:]

    /// From an Info.plist; `isAppBundle` false (a command-line tool, Linux): not in force.
    init(infoDictionary: [String: Any]?, isAppBundle: Bool) {
        inForce = isAppBundle
        guard let ats = infoDictionary?["NSAppTransportSecurity"] as? [String: Any] else { return }
        allowsLocalNetworking = ats["NSAllowsLocalNetworking"] as? Bool ?? false
        // Apple: NSAllowsArbitraryLoads is ignored (NO) when any of the finer keys is present.
        let finer = ["NSAllowsLocalNetworking", "NSAllowsArbitraryLoadsForMedia", "NSAllowsArbitraryLoadsInWebContent"]
        allowsArbitraryLoads =
            finer.contains { ats[$0] != nil } ? false : ats["NSAllowsArbitraryLoads"] as? Bool ?? false
        for (domain, value) in ats["NSExceptionDomains"] as? [String: Any] ?? [:] {
            guard let settings = value as? [String: Any] else { continue }
            let minimum = settings["NSExceptionMinimumTLSVersion"] as? String
            exceptions[domain.lowercased()] = Exception(
                allowsInsecureHTTPLoads: settings["NSExceptionAllowsInsecureHTTPLoads"] as? Bool,
                includesSubdomains: settings["NSIncludesSubdomains"] as? Bool ?? false,
                relaxesTLS: ["TLSv1.0", "TLSv1.1"].contains(minimum ?? "")
                    || settings["NSExceptionRequiresForwardSecrecy"] as? Bool == false
            )
        }
        for (domain, value) in ats["NSPinnedDomains"] as? [String: Any] ?? [:] {
            guard let settings = value as? [String: Any] else { continue }
            pinned[domain.lowercased()] = Pinned(includesSubdomains: settings["NSIncludesSubdomains"] as? Bool ?? false)
        }
    }

    /// Whether a cleartext load to `host` is allowed: an exception domain's own setting (the most
    /// specific domain wins) over the top-level ones; local names with NSAllowsLocalNetworking.
    func allowsCleartext(to host: String) -> Bool {
        guard inForce else { return true }
        let (name, domains) = Self.domains(of: host)
        for (domain, exact) in domains {
            if let exception = exceptions[domain], exact || exception.includesSubdomains,
                let allowed = exception.allowsInsecureHTTPLoads
            {
                return allowed
            }
        }
        if allowsLocalNetworking, !name.contains(".") || name.hasSuffix(".local") { return true }
        return allowsArbitraryLoads
    }

    /// Why an https load to `host` must be the system's (nil: ours may serve it): a domain pinned in
    /// `NSPinnedDomains`, or one whose exception relaxes TLS. The most specific domain decides, as for
    /// cleartext.
    func systemOnlyReason(forHTTPSTo host: String) -> String? {
        guard inForce else { return nil }
        for (domain, exact) in Self.domains(of: host).domains {
            if let pin = pinned[domain], exact || pin.includesSubdomains {
                return "NSPinnedDomains pins \(domain): the system enforces the pins"
            }
            if let exception = exceptions[domain], exact || exception.includesSubdomains, exception.relaxesTLS {
                return "App Transport Security relaxes TLS for \(domain) (an older TLS version or no forward secrecy)"
            }
        }
        return nil
    }

    /// `host` lowercased without outer dots, and the domains ATS settings are looked up under, the most
    /// specific first (`a.b.c` exactly, then `b.c` and `c` as parents).
    private static func domains(of host: String) -> (name: String, domains: [(domain: String, exact: Bool)]) {
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
        let labels = name.split(separator: ".")
        let domains = labels.indices.map { (domain: labels[$0...].joined(separator: "."), exact: $0 == 0) }
        return (name, domains)
    }

    /// The app's, read once.
    static let current: TransportSecurity = {
        #if canImport(Darwin)
            return TransportSecurity(
                infoDictionary: Bundle.main.infoDictionary,
                // An app extension is an app for ATS too.
                isAppBundle: ["app", "appex"].contains(Bundle.main.bundleURL.pathExtension)
            )
        #else
            return TransportSecurity(infoDictionary: nil, isAppBundle: false)
        #endif
    }()
}
