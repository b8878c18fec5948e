// The header fields the system's URL loading adds to a request that lacks them, and whose Cookie
// header goes out. A URLProtocol sees the request before the system's HTTP stack adds these, so the
// protocol adds the same ones itself: an app that enables HTTPDNS sends what it sent before.
// Pure rules, tested on Linux; `SystemRequestDefaults.current` reads the platform's values.

import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#endif

struct SystemRequestDefaults: Sendable, Equatable {
    /// What the system sends as User-Agent when neither the request nor the session sets one.
    var userAgent: String
    /// The Accept-Language the system sends, nil when it sends none.
    var acceptLanguage: String?

    /// The fields to add to a request whose fields (the app's and the session's) are `present`:
    /// `Accept: */*`, Accept-Language, User-Agent, and for a POST with a body the form Content-Type.
    /// A field the request already has, in any case, is never added.
    func missingFields(present: [String], method: String, hasBody: Bool) -> [(name: String, value: String)] {
        let have = Set(present.map { $0.lowercased() })
        var fields: [(String, String)] = []
        if !have.contains("user-agent") { fields.append(("User-Agent", userAgent)) }
        if !have.contains("accept") { fields.append(("Accept", "*/*")) }
        if let acceptLanguage, !have.contains("accept-language") { fields.append(("Accept-Language", acceptLanguage)) }
        if method.uppercased() == "POST", hasBody, !have.contains("content-type") {
            fields.append(("Content-Type", "application/x-www-form-urlencoded"))
        }
        return fields.map { (name: $0.0, value: $0.1) }
    }

    /// The Cookie header that goes out: with cookie handling on, the stored cookies for the URL, or the
    /// app's own header when the store has none; with it off, the app's header as it is.
    static func cookieHeader(setByApp: String?, stored: String?, handlesCookies: Bool) -> String? {
        guard handlesCookies else { return setByApp }
        return stored ?? setByApp
    }

    /// swift-corelibs-foundation's User-Agent: `NAME (unknown version) curl/X.Y.Z`.
    static func corelibsUserAgent(processName: String, curlVersion: String) -> String {
        "\(processName) (unknown version) curl/\(curlVersion)"
    }

    /// Apple's: `NAME/BUILD CFNetwork/VERSION Darwin/RELEASE`, the bundle's name and version.
    static func appleUserAgent(bundleName: String, bundleVersion: String?, cfNetwork: String, darwin: String) -> String
    {
        let product = bundleVersion.map { "\(bundleName)/\($0)" } ?? bundleName
        return "\(product) CFNetwork/\(cfNetwork) Darwin/\(darwin)"
    }

    /// Apple's Accept-Language: the preferred languages, each later one weighted 0.1 lower (at most
    /// nine), `en-US,zh-Hans-CN;q=0.9`.
    static func appleAcceptLanguage(_ preferred: [String]) -> String? {
        let languages = preferred.prefix(9)
        guard !languages.isEmpty else { return nil }
        return languages.enumerated().map { index, language in
            index == 0 ? language : "\(language);q=0.\(10 - index)"
        }.joined(separator: ",")
    }

    /// The "X.Y.Z" of `curl_version()`'s text ("libcurl/7.88.1 OpenSSL/3.0.15 ..."), nil without one.
    static func curlVersion(fromVersionText text: String) -> String? {
        guard let word = text.split(separator: " ").first(where: { $0.hasPrefix("libcurl/") }) else { return nil }
        let version = word.dropFirst("libcurl/".count).prefix { $0.isNumber || $0 == "." }
        return version.isEmpty ? nil : String(version)
    }

    /// This platform's defaults, read once.
    static let current: SystemRequestDefaults = {
        #if canImport(Darwin)
            // COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN HERE.
            let info = Bundle.main.infoDictionary ?? [:]
            let name =
                (info["CFBundleName"] as? String) ?? (info["CFBundleExecutable"] as? String)
                ?? ProcessInfo.processInfo.processName
            let cfNetwork =
                Bundle(identifier: "com.apple.CFNetwork")?.infoDictionary?["CFBundleVersion"] as? String ?? "0"
            var system = utsname()
            uname(&system)
            let darwin = withUnsafeBytes(of: system.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            return SystemRequestDefaults(
                userAgent: appleUserAgent(
                    bundleName: name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? name,
                    bundleVersion: info["CFBundleVersion"] as? String,
                    cfNetwork: cfNetwork,
                    darwin: darwin
                ),
                acceptLanguage: appleAcceptLanguage(Locale.preferredLanguages)
            )
        #else
            // corelibs links libcurl: its version is asked for the same way corelibs asks.
            var version = "0.0.0"
            if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "curl_version") {
                typealias CurlVersion = @convention(c) () -> UnsafePointer<CChar>?
                if let text = unsafeBitCast(symbol, to: CurlVersion.self)() {
                    version = curlVersion(fromVersionText: String(cString: text)) ?? version
                }
            }
            return SystemRequestDefaults(
                userAgent: corelibsUserAgent(processName: ProcessInfo.processInfo.processName, curlVersion: version),
                acceptLanguage: Locale.current.language.languageCode?.identifier
            )
        #endif
    }()
}
