// The rules that make an intercepted load behave as the system's own: the URL cache, the requests
// handed back to the system, the per-configuration protocol classes, challenge answers, body read-ahead.
// Pure or local: no sockets. (The conformance suite checks the whole against the system's loading.)

import Foundation
import HTTPDNSEngine
import HTTPDNSLookup
import NIOConcurrencyHelpers
import Testing

@testable import HTTPDNSURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct URLLoadingRulesTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    func cached(_ fields: [String: String], storedAt: Date? = nil) -> CacheUse.Cached {
        CacheUse.Cached(headers: fields, storedAt: storedAt)
    }

    func date(_ secondsBeforeNow: TimeInterval) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Self.now.addingTimeInterval(-secondsBeforeNow))
    }

    func decide(_ policy: URLRequest.CachePolicy, _ c: CacheUse.Cached?, request: [String: String] = [:]) -> CacheUse {
        CacheUse.decide(policy: policy, requestHeaders: request, cached: c, now: Self.now)
    }

    @Test func aFreshResponseIsTheAnswerAndAStaleOneIsRevalidated() {
        let fresh = cached(["Date": date(10), "Cache-Control": "max-age=600"])
        #expect(decide(.useProtocolCachePolicy, fresh) == .serveCached)
        let stale = cached(["Date": date(700), "Cache-Control": "max-age=600", "ETag": "\"v1\""])
        #expect(decide(.useProtocolCachePolicy, stale) == .revalidate(["If-None-Match": "\"v1\""]))
        let staleWithoutValidators = cached(["Date": date(700), "Cache-Control": "max-age=600"])
        #expect(decide(.useProtocolCachePolicy, staleWithoutValidators) == .load)
        #expect(decide(.useProtocolCachePolicy, nil) == .load)
    }

    @Test func a304RefreshesTheStoredResponseSoItIsFreshForAsLongAsTheRevalidationSaid() {
        // RFC 9111 §4.3.4: stored 700 s ago with max-age=0; the 304 says max-age=3600 with a new Date.
        let stored = [
            "Date": date(700), "cache-control": "max-age=0", "ETag": "\"v1\"", "Content-Length": "42",
            "Content-Type": "text/plain",
        ]
        let fields = CacheUse.refreshed(
            stored,
            by: [
                ("Date", date(1)), ("Cache-Control", "max-age=3600"), ("Cache-Control", "public"),
                ("Content-Length", "0"), ("Connection", "keep-alive"),
            ]
        )
        #expect(fields["Cache-Control"] == "max-age=3600, public" && fields["cache-control"] == nil, "\(fields)")
        #expect(fields["Date"] == date(1))
        // The stored body's own framing and type stay; what the 304 did not say stays too.
        #expect(fields["Content-Length"] == "42" && fields["Connection"] == nil)
        #expect(fields["Content-Type"] == "text/plain" && fields["ETag"] == "\"v1\"")
        #expect(decide(.useProtocolCachePolicy, cached(stored)) == .revalidate(["If-None-Match": "\"v1\""]))
        #expect(decide(.useProtocolCachePolicy, cached(fields)) == .serveCached)
    }

    @Test func noCacheAlwaysAsksAndTheAgeFieldCounts() {
        let noCache = cached(["Date": date(1), "Cache-Control": "no-cache, max-age=600", "Last-Modified": date(9999)])
        #expect(decide(.useProtocolCachePolicy, noCache) == .revalidate(["If-Modified-Since": date(9999)]))
        let aged = cached(["Date": date(10), "Cache-Control": "max-age=600", "Age": "595", "ETag": "e"])
        #expect(decide(.useProtocolCachePolicy, aged) == .revalidate(["If-None-Match": "e"]))
        let requestSaysNoCache = cached(["Date": date(10), "Cache-Control": "max-age=600"])
        #expect(decide(.useProtocolCachePolicy, requestSaysNoCache, request: ["cache-control": "no-cache"]) == .load)
    }

    @Test func expiresAndTheHeuristicGiveALifetimeWithoutMaxAge() {
        let expires = cached(["Date": date(100), "Expires": date(-100)])
        #expect(CacheUse.lifetime(of: expires, directives: [:]) == 200)
        #expect(decide(.useProtocolCachePolicy, expires) == .serveCached)
        let invalidExpires = cached(["Date": date(100), "Expires": "0"])
        #expect(CacheUse.lifetime(of: invalidExpires, directives: [:]) == 0)
        // A tenth of the time since Last-Modified.
        let heuristic = cached(["Date": date(0), "Last-Modified": date(1000)])
        #expect(CacheUse.lifetime(of: heuristic, directives: [:]) == 100)
        // Neither Date nor a stored time: stale.
        #expect(CacheUse.age(of: cached(["Cache-Control": "max-age=600"]), now: Self.now) == nil)
    }

    @Test func thePolicyDecidesBeforeFreshnessDoes() {
        let stale = cached(["Date": date(9999), "ETag": "e"])
        #expect(decide(.returnCacheDataElseLoad, stale) == .serveCached)
        #expect(decide(.returnCacheDataDontLoad, stale) == .serveCached)
        #expect(decide(.reloadIgnoringLocalCacheData, stale) == .load)
        #expect(decide(.reloadRevalidatingCacheData, stale) == .revalidate(["If-None-Match": "e"]))
        // The app's own conditional request: its 304 is its own.
        #expect(decide(.returnCacheDataElseLoad, stale, request: ["If-None-Match": "e"]) == .load)
    }

    @Test func aBodyIsKeptForTheCacheOnlyWhileItFitsATwentieth() {
        #expect(CacheUse.fits(size: 50, capacity: 1000))
        #expect(!CacheUse.fits(size: 51, capacity: 1000))
        #expect(!CacheUse.fits(size: 0, capacity: 0))
        var body = CacheableBody(capacity: 1000)
        body.append(Data(count: 40))
        #expect(body.data?.count == 40)
        body.append(Data(count: 20))
        #expect(body.data == nil)
        body.append(Data(count: 1))
        #expect(body.data == nil, "once dropped, it stays dropped")
    }

    @Test func cacheOnlyLoadsAndUnhonouredNetworkRulesGoBackToTheSystem() {
        func reason(_ policy: URLRequest.CachePolicy, forbids: Bool, transport: Bool, system: Bool) -> String? {
            HandBack.reason(
                cachePolicy: policy,
                forbidsSomeNetworks: forbids,
                transportHonoursNetworkRules: transport,
                systemHonoursNetworkRules: system
            )
        }
        #expect(reason(.returnCacheDataDontLoad, forbids: false, transport: true, system: true) != nil)
        #expect(reason(.returnCacheDataElseLoad, forbids: false, transport: true, system: true) == nil)
        #expect(reason(.useProtocolCachePolicy, forbids: true, transport: false, system: true) != nil)
        #expect(reason(.useProtocolCachePolicy, forbids: true, transport: true, system: true) == nil)
        // Where the system ignores the rules too (corelibs), serving them changes nothing.
        #expect(reason(.useProtocolCachePolicy, forbids: true, transport: false, system: false) == nil)
        #expect(HandBack.reason(configurationIdentifier: "com.example.bg")?.contains("background") == true)
        #expect(HandBack.reason(configurationIdentifier: nil) == nil)
        // watchOS: no Network.framework for an ordinary watch app (TN3135), so no session is enabled.
        #expect(HandBack.reason(configurationIdentifier: nil, lowLevelNetworking: false)?.contains("TN3135") == true)
        #expect(HandBack.lowLevelNetworkingAllowed, "Linux and every Apple platform but watchOS")
    }

    @Test func everyConfigurationGetsASlotAndItsSettingsAreFixedAtTheFirstLoad() {
        // Settings are strings here: the table only keeps them.
        var table = SlotTable<String>()
        let objects = (0..<100).map { _ in NSObject() }
        for (n, object) in objects.enumerated() {
            #expect(table.enable(ObjectIdentifier(object), settings: "s\(n)", alive: { _ in true }) == .new(n))
        }
        // No fixed number of slots: the 100th has its own.
        #expect(table.count == 100)
        // Enabled again before any load: the same slot, the settings taken again.
        #expect(table.enable(ObjectIdentifier(objects[99]), settings: "s99 changed", alive: { _ in true }) == .same(99))
        // The first load may read the app's object once more (changed after enabling, before the session).
        #expect(table.load(99, again: { "s99 as the session was made" }) == "s99 as the session was made")
        // From then on the settings are fixed, as URLSession's copy is.
        #expect(table.load(99, again: { "changed later" }) == "s99 as the session was made")
        // A first load whose object is gone keeps the copy taken when it was enabled.
        #expect(table.load(3, again: { nil }) == "s3")
        // Enabled again after a load: a new slot for the next session; the old one keeps its settings.
        #expect(table.enable(ObjectIdentifier(objects[99]), settings: "s99 second", alive: { _ in true }) == .new(100))
        #expect(table.load(100, again: { nil }) == "s99 second")
        #expect(table.load(99, again: { nil }) == "s99 as the session was made")
        // An identity reused by a new object after the old one is gone: a new slot, not the old one's.
        #expect(table.enable(ObjectIdentifier(objects[5]), settings: "new object", alive: { $0 != 5 }) == .new(101))
        #expect(table.load(5, again: { nil }) == "s5")
        #expect(table.load(500, again: { "x" }) == nil)
        #expect(!SlotTable<String>.isWorthLogging(63) && SlotTable<String>.isWorthLogging(64))
        #expect(!SlotTable<String>.isWorthLogging(100) && SlotTable<String>.isWorthLogging(128))
    }

    @Test func whereSessionsAreSeenMadeEachGetsTheSettingsOfItsMoment() {
        // Set Authorization, make session A, clear it, make session B, all from one configuration
        // object (the all-sessions hook enables it as each session is made): A's first request still
        // carries it, and B is a slot of its own (its delegate decides on its own connections).
        var table = SlotTable<String>()
        let configuration = ObjectIdentifier(NSObject())
        _ = table.enable(configuration, settings: "enabled", alive: { _ in true })
        #expect(table.enable(configuration, settings: "with Authorization", alive: { _ in true }) == .same(0))
        table.sessionMade(from: configuration)
        #expect(table.enable(configuration, settings: "without", alive: { _ in true }) == .new(1))
        table.sessionMade(from: configuration)
        // A's first load reads A's moment, not the object as it is now.
        #expect(table.load(0, again: { "without" }) == "with Authorization")
        #expect(table.load(1, again: { "changed later" }) == "without")
        // A configuration never enabled: nothing to fix.
        table.sessionMade(from: ObjectIdentifier(NSObject()))
        #expect(table.count == 2)
    }

    @Test func anUploadTasksKnownLengthKeepsItsStreamFromGoingOutChunked() {
        // Apple hands an upload task's file to a URLProtocol as a stream; the task knows its length.
        #expect(
            BodyLength.declared(contentLength: nil, taskExpects: BodyLength.known(taskExpects: 50 << 20)) == 50 << 20
        )
        // The app's own Content-Length wins; an unknown or empty expectation declares nothing (chunked).
        #expect(BodyLength.declared(contentLength: "12", taskExpects: 99) == 12)
        #expect(BodyLength.known(taskExpects: -1) == nil && BodyLength.known(taskExpects: 0) == nil)
        #expect(BodyLength.declared(contentLength: nil, taskExpects: nil) == nil)
    }

    @Test func aHundredthConfigurationKeepsItsHeadersCookiesTimeoutsAndLimits() throws {
        let slots = ConfigurationSlots(number: 1, partitions: TrustPartitions(number: 1))
        var configurations: [URLSessionConfiguration] = []
        for n in 0..<100 {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpAdditionalHeaders = ["Authorization": "Bearer \(n)"]
            configuration.timeoutIntervalForRequest = TimeInterval(10 + n)
            configuration.httpMaximumConnectionsPerHost = 1 + n % 7
            configurations.append(configuration)
            #expect(slots.enable(configuration) == .new(n))
        }
        let last = try #require(slots.settings(of: 99))
        #expect(last !== configurations[99], "a copy, as URLSession keeps one")
        #expect(last.httpAdditionalHeaders?["Authorization"] as? String == "Bearer 99")
        #expect(last.httpCookieStorage === configurations[99].httpCookieStorage)
        #expect(last.timeoutIntervalForRequest == 109)
        #expect(last.httpMaximumConnectionsPerHost == 1 + 99 % 7)
        // A change to the app's object after the session's first load does not reach its loads.
        configurations[99].httpAdditionalHeaders = ["Authorization": "Bearer changed"]
        #expect(slots.settings(of: 99)?.httpAdditionalHeaders?["Authorization"] as? String == "Bearer 99")
        // Each slot is a pool partition of its own (the connections its delegates decide trust on).
        let partitions = Set((0..<100).compactMap { slots.partition(of: $0) })
        #expect(partitions.count == 100)
        #expect(slots.settings(of: 100) == nil && slots.partition(of: 100) == nil)
    }

    /// An interception whose resolver selects every name (nothing is resolved here).
    func interception() throws -> Interception {
        let engine = try HTTPEngine()
        var configuration = ResolverConfiguration(providers: [.system])
        configuration.policy = .all
        let resolver = try HTTPDNSResolver(configuration: configuration, engine: engine)
        return Interception(HTTPDNSURLProtocol.Setup(resolver: resolver, engine: engine))
    }

    @Test func enablingPutsOneProtocolClassFirstAndLeavesBackgroundSessionsAlone() throws {
        let interception = try interception()
        let configuration = URLSessionConfiguration.ephemeral
        interception.enable(on: configuration)
        interception.enable(on: configuration)
        let ours = (configuration.protocolClasses ?? []).filter { $0 is HTTPDNSURLProtocol.Type }
        #expect(ours.count == 1)
        #expect((configuration.protocolClasses?.first as? HTTPDNSURLProtocol.Type) != nil)
        let copy = interception.enabled(configuration)
        #expect((copy.protocolClasses ?? []).filter { $0 is HTTPDNSURLProtocol.Type }.count == 1)
        #if canImport(Darwin)
            let background = URLSessionConfiguration.background(withIdentifier: "com.example.bg")
            interception.enable(on: background)
            #expect(!(background.protocolClasses ?? []).contains { $0 is HTTPDNSURLProtocol.Type })
        #endif
    }

    /// Two interceptions (two `HTTPDNS` instances) in one process: each configuration leads to the one
    /// that enabled it, enabling with the other replaces it, and one ending leaves the other serving.
    @Test func twoInterceptionsEachServeTheirOwnConfigurations() throws {
        let a = try interception()
        let b = try interception()
        func ours(_ configuration: URLSessionConfiguration) -> HTTPDNSURLProtocol.Type? {
            configuration.protocolClasses?.first as? HTTPDNSURLProtocol.Type
        }
        func served(_ configuration: URLSessionConfiguration) -> Interception? { ours(configuration)?.interception }
        let first = a.enabled(.ephemeral)
        let second = b.enabled(.ephemeral)
        #expect(served(first) === a && served(second) === b)
        let moved = a.enabled(second)
        #expect(served(moved) === a)
        #expect((moved.protocolClasses ?? []).filter { $0 is HTTPDNSURLProtocol.Type }.count == 1)
        let request = URLRequest(url: URL(string: "https://example.test/")!)
        #expect(ours(first)?.canInit(with: request) == true && ours(second)?.canInit(with: request) == true)
        b.end()
        #expect(ours(second)?.canInit(with: request) == false, "an ended interception takes nothing")
        #expect(ours(first)?.canInit(with: request) == true, "the other one still does")
        #expect(served(second)?.setup == nil)
        // An interception nobody holds any more serves nobody.
        var gone: Interception? = try interception()
        let orphan = gone!.enabled(.ephemeral)
        gone = nil
        #expect(served(orphan) == nil)
    }

    /// An app (or a test process) that makes and drops many `HTTPDNS` instances: the table of classes
    /// does not keep one entry per instance ever made.
    @Test func theClassTableForgetsInterceptionsThatAreGone() throws {
        for _ in 0..<100 { _ = try interception() }
        #expect(ProtocolBindings.count < 100, "\(ProtocolBindings.count) classes bound")
    }

    @Test func aServerTrustAnswerMeansWhatApplesDoes() {
        let password = URLCredential(user: "x", password: "y", persistence: .none)
        func decision(_ d: URLSession.AuthChallengeDisposition, _ c: URLCredential?, required: Bool)
            -> HTTPDNSURLProtocol.TrustDecision
        {
            HTTPDNSURLProtocol.trustDecision((d, c), credentialRequired: required)
        }
        // A user and password is no trust credential: a delegate answering every challenge with its
        // Basic credential accepts no chain (Apple wants `URLCredential(trust:)`).
        #expect(decision(.useCredential, password, required: true) == .ourCheck)
        #expect(decision(.useCredential, password, required: false) == .ourCheck)
        #expect(decision(.useCredential, nil, required: true) == .ourCheck)
        #expect(decision(.useCredential, nil, required: false) == .accept)
        #expect(decision(.cancelAuthenticationChallenge, nil, required: true) == .refuse)
        #expect(decision(.performDefaultHandling, nil, required: true) == .ourCheck)
        #expect(decision(.rejectProtectionSpace, nil, required: false) == .ourCheck)
    }

    @Test func continuingWithoutACredentialNeverAcceptsAServer() {
        let answers = NIOLockedValueBox<[ChallengeAnswer]>([])
        let sender = ChallengeSender { answer in answers.withLockedValue { $0.append(answer) } }
        let challenge = URLAuthenticationChallenge(
            protectionSpace: URLProtectionSpace(
                host: "a.test",
                port: 443,
                protocol: "https",
                realm: nil,
                authenticationMethod: nil
            ),
            proposedCredential: nil,
            previousFailureCount: 0,
            failureResponse: nil,
            error: nil,
            sender: sender
        )
        sender.continueWithoutCredential(for: challenge)
        let answer = answers.withLockedValue { $0.first }
        #expect(answer?.disposition == .rejectProtectionSpace && answer?.credential == nil)
        #expect(HTTPDNSURLProtocol.trustDecision(answer!, credentialRequired: false) == .ourCheck)
        #expect(HTTPDNSURLProtocol.chosenCredential(answer!, proposed: nil, failures: 0) == nil)
    }

    @Test func aShortBodyStreamIsReadAheadIntoDataAndALongOneStaysAStreamWithNothingLost() async throws {
        let short = InputStreamReader(InputStream(data: Data(repeating: 1, count: 1000)))
        guard case .data(let data) = try await short.buffered(upTo: 4096) else {
            Issue.record("a stream within the limit did not become data")
            return
        }
        #expect(data.count == 1000)

        let bytes = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
        let long = InputStreamReader(InputStream(data: bytes))
        guard case .stream(let reader) = try await long.buffered(upTo: 70_000) else {
            Issue.record("a stream over the limit became data")
            return
        }
        try reader.claim()
        var all = Data()
        while let chunk = try await reader.next() { all.append(contentsOf: chunk.readableBytesView) }
        #expect(all == bytes)
    }

    @Test func appTransportSecurityDecidesWhichHostsMayBeReachedInTheClear() {
        #expect(TransportSecurity(infoDictionary: nil, isAppBundle: false).allowsCleartext(to: "a.test"))
        let defaults = TransportSecurity(infoDictionary: [:], isAppBundle: true)
        #expect(!defaults.allowsCleartext(to: "a.test"))
        let plist: [String: Any] = [
            "NSAppTransportSecurity": [
                "NSAllowsLocalNetworking": true,
                "NSExceptionDomains": [
                    "legacy.example.com": ["NSExceptionAllowsInsecureHTTPLoads": true],
                    "example.org": ["NSExceptionAllowsInsecureHTTPLoads": true, "NSIncludesSubdomains": true],
                    "strict.example.org": ["NSExceptionAllowsInsecureHTTPLoads": false],
                ],
            ]
        ]
        let ats = TransportSecurity(infoDictionary: plist, isAppBundle: true)
        #expect(ats.allowsCleartext(to: "legacy.example.com"))
        #expect(!ats.allowsCleartext(to: "sub.legacy.example.com"), "no NSIncludesSubdomains")
        #expect(ats.allowsCleartext(to: "cdn.example.org"))
        #expect(!ats.allowsCleartext(to: "strict.example.org"), "the most specific domain wins")
        #expect(ats.allowsCleartext(to: "printer.local") && ats.allowsCleartext(to: "nas"))
        #expect(!ats.allowsCleartext(to: "other.test"))
        let arbitrary = TransportSecurity(
            infoDictionary: ["NSAppTransportSecurity": ["NSAllowsArbitraryLoads": true]],
            isAppBundle: true
        )
        #expect(arbitrary.allowsCleartext(to: "other.test"))
        // Apple ignores NSAllowsArbitraryLoads when a finer key is there (local networking, media, web).
        for finer in [
            "NSAllowsLocalNetworking", "NSAllowsArbitraryLoadsForMedia", "NSAllowsArbitraryLoadsInWebContent",
        ] {
            let both = TransportSecurity(
                infoDictionary: ["NSAppTransportSecurity": ["NSAllowsArbitraryLoads": true, finer: true]],
                isAppBundle: true
            )
            #expect(!both.allowsCleartext(to: "other.test"), "\(finer)")
        }
        #expect(
            HandBack.reason(
                cachePolicy: .useProtocolCachePolicy,
                forbidsSomeNetworks: false,
                transportHonoursNetworkRules: true,
                systemHonoursNetworkRules: true,
                cleartextForbidden: true
            )?.contains("App Transport Security") == true
        )
    }

    @Test func pinnedOrTLSRelaxedDomainsAreTheSystemsToLoad() {
        let plist: [String: Any] = [
            "NSAppTransportSecurity": [
                "NSPinnedDomains": [
                    "pinned.example.com": ["NSIncludesSubdomains": true, "NSPinnedCAIdentities": [] as [Any]],
                    "leaf.example.org": ["NSPinnedLeafIdentities": [] as [Any]],
                ],
                "NSExceptionDomains": [
                    "old.example.net": ["NSExceptionMinimumTLSVersion": "TLSv1.0"],
                    "nofs.example.net": ["NSExceptionRequiresForwardSecrecy": false, "NSIncludesSubdomains": true],
                    "fine.example.net": ["NSExceptionMinimumTLSVersion": "TLSv1.3"],
                ],
            ]
        ]
        let ats = TransportSecurity(infoDictionary: plist, isAppBundle: true)
        #expect(ats.systemOnlyReason(forHTTPSTo: "api.pinned.example.com")?.contains("NSPinnedDomains") == true)
        #expect(ats.systemOnlyReason(forHTTPSTo: "leaf.example.org") != nil)
        #expect(ats.systemOnlyReason(forHTTPSTo: "sub.leaf.example.org") == nil, "no NSIncludesSubdomains")
        #expect(ats.systemOnlyReason(forHTTPSTo: "old.example.net")?.contains("relaxes TLS") == true)
        #expect(ats.systemOnlyReason(forHTTPSTo: "cdn.nofs.example.net") != nil)
        // A stricter exception is ours to serve (we never go below TLS 1.2 anyway).
        #expect(ats.systemOnlyReason(forHTTPSTo: "fine.example.net") == nil)
        #expect(ats.systemOnlyReason(forHTTPSTo: "other.test") == nil)
        // Outside an app (Linux, a tool) there is no ATS.
        #expect(
            TransportSecurity(infoDictionary: plist, isAppBundle: false).systemOnlyReason(
                forHTTPSTo: "leaf.example.org"
            ) == nil
        )
        func reason(systemTLS: String? = nil, waits: Bool = false) -> String? {
            HandBack.reason(
                cachePolicy: .useProtocolCachePolicy,
                forbidsSomeNetworks: false,
                transportHonoursNetworkRules: true,
                systemHonoursNetworkRules: true,
                systemTLS: systemTLS,
                waitsWhileOffline: waits
            )
        }
        #expect(reason(systemTLS: "pins") == "pins")
        #expect(reason(waits: true)?.contains("waits for connectivity") == true)
        #expect(reason() == nil)
    }

    @Test func protectionSpacesAreTheSameWhenEveryFieldIs() {
        func space(_ host: String, realm: String? = "r", port: Int = 80) -> URLProtectionSpace {
            URLProtectionSpace(
                host: host,
                port: port,
                protocol: "http",
                realm: realm,
                authenticationMethod: NSURLAuthenticationMethodHTTPBasic
            )
        }
        #expect(LoadContext.sameSpace(space("a.test"), space("A.test")))
        #expect(!LoadContext.sameSpace(space("a.test"), space("a.test", realm: "other")))
        #expect(!LoadContext.sameSpace(space("a.test"), space("a.test", port: 8080)))
        let proxy = URLProtectionSpace(
            proxyHost: "a.test",
            port: 80,
            type: NSURLProtectionSpaceHTTPProxy,
            realm: "r",
            authenticationMethod: NSURLAuthenticationMethodHTTPBasic
        )
        #expect(!LoadContext.sameSpace(space("a.test"), proxy))
    }

    @Test func aKnownHSTSHostIsReachedOverHTTPS() {
        // The store's own rules: HTTPDNSLookupTests.StrictTransportSecurityTests.
        let url = URL(string: "http://api.example.com/x?y=1")!
        let upgraded = Translation.upgraded(url, upgrade: []) { $0 == "api.example.com" }
        #expect(upgraded.absoluteString == "https://api.example.com/x?y=1")
        let port80 = Translation.upgraded(URL(string: "http://example.com:80/")!, upgrade: []) { _ in true }
        #expect(port80.absoluteString == "https://example.com/")
        let port8080 = Translation.upgraded(URL(string: "http://example.com:8080/")!, upgrade: []) { _ in true }
        #expect(port8080.absoluteString == "https://example.com:8080/")
        #expect(Translation.upgraded(url, upgrade: []).absoluteString == url.absoluteString)
    }
}
