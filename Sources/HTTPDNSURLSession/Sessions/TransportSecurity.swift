// App Transport Security, as Apple's URL loading applies it to cleartext http:// loads, read from the
// app's Info.plist (NSAppTransportSecurity). An intercepted http:// request that ATS forbids goes back
// to the system (HandBack.swift), which refuses it as the app expects, instead of going out in the
// clear. Pure: the Info.plist dictionary in, a verdict per host out. Linux has no ATS: there is no
// Info.plist entry, so nothing is forbidden.

import Foundation

struct TransportSecurity: Equatable {
    struct Exception: Equatable {
        var allowsInsecureHTTPLoads: Bool?
        var includesSubdomains: Bool
    }

    /// Whether ATS is in force at all: in an app bundle, always (its defaults forbid cleartext).
    var inForce: Bool
    var allowsArbitraryLoads = false
    var allowsLocalNetworking = false
    /// By lowercased domain.
    var exceptions: [String: Exception] = [:]

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
            exceptions[domain.lowercased()] = Exception(
                allowsInsecureHTTPLoads: settings["NSExceptionAllowsInsecureHTTPLoads"] as? Bool,
                includesSubdomains: settings["NSIncludesSubdomains"] as? Bool ?? false
            )
        }
    }

    /// Whether a cleartext load to `host` is allowed: an exception domain's own setting (the most
    /// specific domain wins) over the top-level ones; local names with NSAllowsLocalNetworking.
    func allowsCleartext(to host: String) -> Bool {
        guard inForce else { return true }
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
        var labels = name.split(separator: ".").map(String.init)
        var exact = true
        while !labels.isEmpty {
            let domain = labels.joined(separator: ".")
            if let exception = exceptions[domain], exact || exception.includesSubdomains,
                let allowed = exception.allowsInsecureHTTPLoads
            {
                return allowed
            }
            labels.removeFirst()
            exact = false
        }
        if allowsLocalNetworking, !name.contains(".") || name.hasSuffix(".local") { return true }
        return allowsArbitraryLoads
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
