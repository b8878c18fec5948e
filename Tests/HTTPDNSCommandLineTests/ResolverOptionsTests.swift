// ResolverOptions, the resolver flags every resolving command shares (resolve, fetch, proxy, trace and
// httpdns-bench), parsed as `httpdns` parses them: through ArgumentParser, whose `validate()` turns every
// bad value into a usage error (exit 64) naming the flag. Users read those texts, so they are asserted
// exactly. docs/CLI.md is the contract for the defaults (local DNS `system`, every name through HTTPDNS,
// a 5 s lookup bound, serve-expired 60 s and at most 604800 s). What the flags become is checked on the
// configuration `makeHTTPDNS` builds, caught before any `HTTPDNS` is made. Proxy flags: ResolverOptionsProxyTests.

import ArgumentParser
@testable import HTTPDNSCommandLine
@testable import HTTPDNSCore
@testable import HTTPDNSEngine
@testable import HTTPDNSKit
import Logging
import Testing

/// The resolver kinds as docs/CLI.md lists them, quoted by every error about a spec's kind.
private let kinds = "doh:URL, doh-post:URL, doh-json:URL, dnspod:URL, json:URL, dns:IP[:PORT], system"

@Suite struct ResolverOptionsParsingTests {
    @Test func noFlagsMeanEveryNameThroughHTTPDNSWithTheSystemAsLocalDNS() throws {
        let options = try ResolverOptions.parse([])
        #expect(options.resolvers.isEmpty)
        #expect(options.localDNS == "system")
        #expect(!options.noFallback)
        #expect(options.timeout == 5)
        #expect(options.nat64 == "auto")
        let parsed = try options.parsed()
        #expect(parsed.resolvers.isEmpty)
        #expect(parsed.localDNS == .system)
        #expect(parsed.bootstrap.isEmpty)
        #expect(parsed.policy == .all)
        #expect(parsed.policy.lookup(for: "anything.example.com") == .httpdns(strict: false))
        #expect(try options.serveExpiredWindow() == nil)
        #expect(try options.subnet() == nil)
        #expect(try options.serviceListSettings() == nil)
        #expect(try options.nat64Mode() == .discover)
    }

    @Test func resolversAreRepeatableAndKeepTheOrderGiven() throws {
        let options = try ResolverOptions.parse([
            "--resolver", "doh:https://127.0.0.1:8473/dns-query",
            "--resolver", "dns:127.0.0.1:5302",
            "--resolver", "system",
        ])
        let doh = try ResolverEndpoint(url: "https://127.0.0.1:8473/dns-query")
        #expect(
            try options.parsed().resolvers == [
                .doh(doh, usePOST: false), .dns(IPAddress("127.0.0.1")!, port: 5302), .system,
            ]
        )
    }

    @Test(arguments: [
        ("dns:127.0.0.2:5353", ResolverSpec.dns(IPAddress("127.0.0.2")!, port: 5353)),
        ("dns:[::1]:5353", ResolverSpec.dns(IPAddress("::1")!, port: 5353)),
        ("dns:10.0.0.1", ResolverSpec.dns(IPAddress("10.0.0.1")!, port: 53)),
        ("system", ResolverSpec.system),
    ])
    func localDNSTakesAResolverSpec(_ text: String, _ expected: ResolverSpec) throws {
        let options = try ResolverOptions.parse(["--local-dns", text])
        #expect(try options.parsed().localDNS == expected)
    }

    @Test(arguments: [
        (["--resolver", "foo:bar"], "--resolver: unknown resolver kind \"foo\" in \"foo:bar\"; use one of \(kinds)"),
        (["--resolver", "nokind"], "--resolver: \"nokind\" has no kind; use one of \(kinds)"),
        (
            ["--resolver", "doh:ftp://x/"],
            "--resolver: \"ftp://x/\" uses ftp:, only http: and https: resolver URLs are supported"
        ),
        (
            ["--local-dns", "dns:nowhere"],
            "--local-dns: \"nowhere\" is not IP[:PORT]; a DNS server is given by address, e.g. dns:127.0.0.1:53"
        ),
        (
            ["--local-dns", "dns:127.0.0.1:0"],
            "--local-dns: \"127.0.0.1:0\" has port \"0\"; use a number from 1 to 65535"
        ),
    ])
    func aSpecThatDoesNotParseIsAUsageErrorNamingItsFlag(_ arguments: [String], _ message: String) {
        #expect(usageError(ResolverOptions.self, arguments) == message)
    }

    @Test func bootstrapNamesAreNormalizedAndCollectEveryAddress() throws {
        let options = try ResolverOptions.parse([
            "--resolver", "doh:https://doh.test:8473/dns-query",
            "--bootstrap", "DoH.Test=127.0.0.1",
            "--bootstrap", "doh.test.=::1",
        ])
        let parsed = try options.parsed()
        let doh = try ResolverEndpoint(url: "https://doh.test:8473/dns-query")
        #expect(parsed.bootstrap == ["doh.test": [IPAddress("127.0.0.1")!, IPAddress("::1")!]])
        #expect(parsed.resolvers == [.doh(doh, usePOST: false)])
    }

    @Test(arguments: ["doh.test", "doh.test=not-an-ip", "=127.0.0.1", "bad name=127.0.0.1"])
    func aBootstrapEntryThatIsNotNameEqualsIPIsRefused(_ entry: String) {
        #expect(
            usageError(ResolverOptions.self, ["--bootstrap", entry])
                == "--bootstrap: \"\(entry)\" is not NAME=IP (e.g. --bootstrap doh.test=127.0.0.1)"
        )
    }

    /// Resolvers are never looked up through DNS: one named by hostname needs `--bootstrap`, and an entry
    /// for another name does not count.
    @Test(arguments: [
        (
            ["--resolver", "doh:https://doh.test/dns-query"],
            "--resolver: doh.test has no address; add --bootstrap doh.test=IP (resolvers are reached without DNS)"
        ),
        (
            ["--resolver", "doh:https://doh.test/dns-query", "--bootstrap", "other.test=127.0.0.1"],
            "--resolver: doh.test has no address; add --bootstrap doh.test=IP (resolvers are reached without DNS)"
        ),
        (
            ["--resolver", "system", "--local-dns", "doh:https://ldns.test/dns-query"],
            "--local-dns: ldns.test has no address; add --bootstrap ldns.test=IP (resolvers are reached without DNS)"
        ),
    ])
    func aResolverNamedByHostnameNeedsABootstrapAddress(_ arguments: [String], _ message: String) {
        #expect(usageError(ResolverOptions.self, arguments) == message)
    }

    @Test(arguments: [
        ("-1", "--timeout: -1.0 is negative; give seconds from 0.001 to 600.0"),
        ("0", "--timeout: 0.0 is out of range; give seconds from 0.001 to 600.0"),
        ("600.5", "--timeout: 600.5 is out of range; give seconds from 0.001 to 600.0"),
        ("nan", "--timeout: nan is not a number; give seconds from 0.001 to 600.0"),
        ("inf", "--timeout: inf is out of range; give seconds from 0.001 to 600.0"),
    ])
    func aTimeoutOutside1msTo600sIsRefused(_ value: String, _ message: String) {
        #expect(usageError(ResolverOptions.self, ["--timeout", value]) == message)
    }

    @Test func aTimeoutThatIsNotANumberIsAUsageError() {
        let message = usageError(ResolverOptions.self, ["--timeout", "abc"])
        #expect(message?.hasPrefix("The value 'abc' is invalid for '--timeout") == true, "\(message ?? "")")
    }

    @Test func anUnreadableCACertFileIsRefusedAndAReadableOneIsLeftForLater() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let missing = dir.path("missing.pem")
        #expect(
            usageError(ResolverOptions.self, ["--cacert", missing])
                == "--cacert: cannot read \(missing); give a PEM file of CA certificates"
        )
        // Its contents are checked when the HTTPDNS is made, not by validate().
        let present = try dir.write("ca.pem", "not a certificate")
        #expect(try ResolverOptions.parse(["--cacert", present]).cacert == present)
    }

    @Test func requireResolverRefusesNamedHostsWithoutAResolverButNotIPLiterals() throws {
        let none = try ResolverOptions.parse([])
        let error = try #require(throws: ValidationError.self) {
            try none.requireResolver(for: ["https://127.0.0.1/", "https://a.test/"])
        }
        #expect(error.message == "--resolver: give at least one, e.g. --resolver doh:https://127.0.0.1:8473/dns-query")
        try none.requireResolver(for: ["https://127.0.0.1:8443/", "http://[::1]:8080/x"])
        try ResolverOptions.parse(["--resolver", "system"]).requireResolver(for: ["https://a.test/"])
    }

    @Test func noFallbackAndDebugAreOffUnlessGiven() throws {
        let plain = try ResolverOptions.parse([])
        #expect(!plain.noFallback && !plain.debug)
        #expect(plain.tracingLogger.logLevel == .warning)
        let flagged = try ResolverOptions.parse(["--no-fallback", "--debug"])
        #expect(flagged.noFallback && flagged.debug)
        #expect(flagged.tracingLogger.logLevel == .debug)
    }
}

@Suite struct ResolverOptionsHostPatternTests {
    @Test func onlyExceptStrictAndAllowPrivateMakeTheHostPolicy() throws {
        let options = try ResolverOptions.parse([
            "--only", "*.example.com", "--only", "api.test",
            "--except", "bad.example.com",
            "--strict", "api.test",
            "--allow-private", "intranet.example.com",
        ])
        let policy = try options.parsed().policy
        #expect(policy.lookup(for: "a.example.com") == .httpdns(strict: false))
        #expect(policy.lookup(for: "a.b.example.com") == .httpdns(strict: false))
        #expect(policy.lookup(for: "example.com") == .localDNS)  // *.example.com is below the domain only
        #expect(policy.lookup(for: "bad.example.com") == .localDNS)  // --except wins over --only
        #expect(policy.lookup(for: "api.test") == .httpdns(strict: true))
        #expect(policy.lookup(for: "other.org") == .localDNS)
        #expect(policy.lookup(for: "10.0.0.1") == .literal(IPAddress("10.0.0.1")!))
        #expect(policy.mayResolveToNonGlobal("intranet.example.com"))
        #expect(!policy.mayResolveToNonGlobal("www.example.com"))
    }

    @Test func exceptAloneCarvesNamesOutOfEveryName() throws {
        let policy = try ResolverOptions.parse(["--except", "*.corp.test"]).parsed().policy
        #expect(policy.lookup(for: "git.corp.test") == .localDNS)
        #expect(policy.lookup(for: "example.com") == .httpdns(strict: false))
    }

    @Test(arguments: [
        (["--only", "a*b"], "--only: pattern \"a*b\": '*' may only stand alone or as the first label (*.example.com)"),
        (
            ["--except", "bad name"],
            "--except: \"bad name\" is not a hostname (letters, digits, '-', '_' and dots only)"
        ),
        (["--strict", "*.bad!"], "--strict: \"bad!\" is not a hostname (letters, digits, '-', '_' and dots only)"),
        (["--allow-private", "a..b"], "--allow-private: \"a..b\" has an empty or over-long label"),
    ])
    func aBadPatternIsAUsageErrorNamingItsFlag(_ arguments: [String], _ message: String) {
        #expect(usageError(ResolverOptions.self, arguments) == message)
    }
}

@Suite struct ResolverOptionsValueTests {
    @Test(arguments: [
        ("0", Duration.zero),
        ("90.5", Duration.milliseconds(90_500)),
        ("604800", Duration.seconds(604_800)),
    ])
    func serveExpiredIsAWindowOfUpToSevenDays(_ value: String, _ window: Duration) throws {
        #expect(try ResolverOptions.parse(["--serve-expired", value]).serveExpiredWindow() == window)
    }

    @Test(arguments: [
        ("604801", "--serve-expired: 604801.0 is out of range; give seconds from 0.0 to 604800.0"),
        ("-5", "--serve-expired: -5.0 is negative; give seconds from 0.0 to 604800.0"),
        ("nan", "--serve-expired: nan is not a number; give seconds from 0.0 to 604800.0"),
    ])
    func serveExpiredOutsideZeroToSevenDaysIsRefused(_ value: String, _ message: String) {
        #expect(usageError(ResolverOptions.self, ["--serve-expired", value]) == message)
    }

    @Test func aClientSubnetIsCutToItsPrefixAndABareAddressGetsTheRecommendedOne() throws {
        let v4 = try ClientSubnet(address: IPAddress("203.0.113.0")!, prefixLength: 24)
        let v6 = try ClientSubnet(address: IPAddress("2001:db8:1234:5600::")!, prefixLength: 56)
        let given = try ClientSubnet(address: IPAddress("198.51.100.192")!, prefixLength: 28)
        #expect(try ResolverOptions.parse(["--client-subnet", "203.0.113.77"]).subnet() == v4)
        #expect(try ResolverOptions.parse(["--client-subnet", "2001:db8:1234:5678::1"]).subnet() == v6)
        #expect(try ResolverOptions.parse(["--client-subnet", "198.51.100.200/28"]).subnet() == given)
    }

    @Test(arguments: [
        (
            "nope",
            "--client-subnet: client subnet \"nope\" is not ADDRESS or ADDRESS/PREFIX (203.0.113.0/24, 2001:db8::/56)"
        ),
        ("10.0.0.1/33", "--client-subnet: client subnet 10.0.0.1/33: the prefix length must be 0 to 32"),
        ("10.0.0.0/x", "--client-subnet: client subnet \"10.0.0.0/x\": \"x\" is not a prefix length"),
    ])
    func aBadClientSubnetIsRefused(_ value: String, _ message: String) {
        #expect(usageError(ResolverOptions.self, ["--client-subnet", value]) == message)
    }

    @Test(arguments: [
        ("auto", NAT64Mode.discover),
        ("off", NAT64Mode.off),
        ("64:ff9b::/96", NAT64Mode.prefix(NAT64Prefix.wellKnown)),
        ("2001:db8:122::/48", NAT64Mode.prefix(NAT64Prefix(IPAddress("2001:db8:122::")!, length: 48)!)),
    ])
    func nat64IsAutoOffOrAPrefix(_ value: String, _ mode: NAT64Mode) throws {
        #expect(try ResolverOptions.parse(["--nat64", value]).nat64Mode() == mode)
    }

    /// Not a word it knows, a length RFC 6052 does not allow, IPv4, or a /96 whose bits 64-71 are not zero.
    @Test(arguments: ["on", "AUTO", "64:ff9b::/95", "10.0.0.0/96", "2001:db8:0:0:100::/96"])
    func aBadNAT64ValueIsRefused(_ value: String) {
        #expect(
            usageError(ResolverOptions.self, ["--nat64", value])
                == "--nat64: \"\(value)\" is not auto, off or an IPv6 prefix of length 32, 40, 48, 56, 64 or 96 with bits 64-71 zero (e.g. 64:ff9b::/96)"
        )
    }

    @Test func serviceListAsksGlobalUnlessARegionIsGiven() throws {
        let global = try ResolverOptions.parse(["--service-list"])
        #expect(try global.serviceListSettings() == ServiceListSettings(region: "global"))
        let regional = try ResolverOptions.parse(["--service-list", "--service-list-region", "ap-southeast-1"])
        #expect(try regional.serviceListSettings() == ServiceListSettings(region: "ap-southeast-1"))
        let longest = String(repeating: "a", count: 32)
        let atLimit = try ResolverOptions.parse(["--service-list", "--service-list-region", longest])
        #expect(try atLimit.serviceListSettings() == ServiceListSettings(region: longest))
    }

    @Test func aRegionWithoutServiceListIsRefused() {
        #expect(
            usageError(ResolverOptions.self, ["--service-list-region", "cn"])
                == "--service-list-region: give --service-list too"
        )
    }

    @Test(arguments: ["", "cn north", "cn_north", "cn/../x", String(repeating: "a", count: 33)])
    func aRegionThatIsNotARegionNameIsRefused(_ region: String) {
        #expect(
            usageError(ResolverOptions.self, ["--service-list", "--service-list-region", region])
                == "--service-list-region: \"\(region)\" is not a region name such as global, cn or sg"
        )
    }
}

/// Thrown from `makeHTTPDNS`'s tweak to hand out the configuration it was about to use.
private struct Built: Error {
    var configuration: HTTPDNS.Configuration
}

private struct TweakNotRun: Error {}

/// The `HTTPDNS.Configuration` that `makeHTTPDNS` builds from `options`, caught in its `tweak`, which runs
/// before any `HTTPDNS` (event loops, sockets) is made.
private func configuration(of options: ResolverOptions, watch: Bool = false) throws -> HTTPDNS.Configuration {
    do {
        _ = try options.makeHTTPDNS(watch: watch) { throw Built(configuration: $0) }
    } catch let built as Built {
        return built.configuration
    }
    Issue.record("makeHTTPDNS made an HTTPDNS without running its tweak")
    throw TweakNotRun()
}

@Suite struct ResolverOptionsConfigurationTests {
    @Test func everyFlagReachesTheConfiguration() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let ca = try dir.write("ca.pem", "read when the HTTPDNS is made")
        let options = try ResolverOptions.parse([
            "--resolver", "doh:https://doh.test:8473/dns-query", "--bootstrap", "doh.test=127.0.0.1",
            "--local-dns", "dns:127.0.0.2:5353", "--no-fallback", "--timeout", "2.5",
            "--cache-file", dir.path("cache.json"), "--serve-expired", "3600", "--client-subnet", "203.0.113.77",
            "--service-list", "--service-list-region", "sg", "--only", "*.example.com", "--cacert", ca,
            "--proxy", "http://10.0.0.1:3128", "--proxy-resolves",
        ])
        let config = try configuration(of: options)
        let doh = try ResolverEndpoint(url: "https://doh.test:8473/dns-query")
        let subnet = try ClientSubnet("203.0.113.0/24")
        #expect(config.resolvers == [.doh(doh, usePOST: false)])
        #expect(config.bootstrap == ["doh.test": [IPAddress("127.0.0.1")!]])
        #expect(config.localDNS == .dns(IPAddress("127.0.0.2")!, port: 5353))
        #expect(!config.fallbackToLocalDNS)
        #expect(config.timeouts.lookup == .milliseconds(2500))
        #expect(config.persistencePath == dir.path("cache.json"))
        #expect(config.cache.serveExpired == .seconds(3600))
        #expect(config.clientSubnet == subnet)
        #expect(config.serviceLists == ServiceListSettings(region: "sg"))
        #expect(config.policy.lookup(for: "a.example.com") == .httpdns(strict: false))
        #expect(config.policy.lookup(for: "a.example.org") == .localDNS)
        #expect(config.tls.trustedCertificateFiles == [ca])
        #expect(config.network.proxy?.https == HTTPProxy(host: "10.0.0.1", port: 3128))
        #expect(config.network.proxy?.http == HTTPProxy(host: "10.0.0.1", port: 3128))
        #expect(config.network.proxy?.proxyResolvesNames == true)
        #expect(config.tracing.propagatesContext)
        #expect(!config.network.watchesChanges)
    }

    @Test func withoutFlagsTheConfigurationHasTheDocumentedDefaults() throws {
        let config = try configuration(of: try ResolverOptions.parse([]))
        #expect(config.resolvers.isEmpty)
        #expect(config.localDNS == .system)
        #expect(config.fallbackToLocalDNS)
        #expect(config.timeouts.lookup == .seconds(5))
        #expect(config.cache.serveExpired == .seconds(60))
        #expect(config.policy == .all)
        #expect(config.persistencePath == nil)
        #expect(config.clientSubnet == nil)
        #expect(config.serviceLists == nil)
        #expect(config.tls.trustedCertificateFiles.isEmpty)
        // Only long-running commands follow the network's changes.
        #expect(!config.network.watchesChanges)
        #expect(try configuration(of: try ResolverOptions.parse([]), watch: true).network.watchesChanges)
    }
}

@Suite struct SecondsTests {
    @Test func aValueInRangeBecomesADurationRoundedToTheNanosecond() throws {
        #expect(try seconds(2.5, flag: "--x", range: 0...10) == .milliseconds(2500))
        #expect(try seconds(0.001, flag: "--x", range: 0.001...600) == .milliseconds(1))
        #expect(try seconds(600, flag: "--x", range: 0.001...600) == .seconds(600))
        #expect(try seconds(0, flag: "--x", range: 0...10) == .zero)
        #expect(try seconds(1e-10, flag: "--x", range: 0...10) == .zero)
    }

    /// `nan`, `inf` and huge values are refused here rather than trapping in the conversion to Duration.
    @Test(arguments: [
        (Double.nan, "--x: nan is not a number; give seconds from 1.0 to 10.0"),
        (-1.0, "--x: -1.0 is negative; give seconds from 1.0 to 10.0"),
        (-Double.infinity, "--x: -inf is negative; give seconds from 1.0 to 10.0"),
        (0.5, "--x: 0.5 is out of range; give seconds from 1.0 to 10.0"),
        (10.5, "--x: 10.5 is out of range; give seconds from 1.0 to 10.0"),
        (Double.infinity, "--x: inf is out of range; give seconds from 1.0 to 10.0"),
        (1e300, "--x: 1e+300 is out of range; give seconds from 1.0 to 10.0"),
    ])
    func aValueOutsideTheRangeIsAUsageErrorNamingTheFlag(_ value: Double, _ message: String) throws {
        let error = try #require(throws: ValidationError.self) { try seconds(value, flag: "--x", range: 1...10) }
        #expect(error.message == message)
    }
}
