// ResolverOptions' proxy settings (docs/CLI.md, "Proxies"): `--proxy URL` for every connection, `""` for
// none, else curl's variables (`https_proxy` or `HTTPS_PROXY`, `http_proxy` but never `HTTP_PROXY`,
// `all_proxy`, `no_proxy`); `--noproxy` replaces `no_proxy`. A password is a secret: only the environment
// may carry it, and no error repeats it. The environment is passed in, so these tests never read the
// process's own.

import ArgumentParser
@testable import HTTPDNSCommandLine
@testable import HTTPDNSEngine
import Testing

@Suite struct ResolverOptionsProxyTests {
    @Test func theProxyFlagServesEverySchemeAndBeatsTheEnvironment() throws {
        let options = try ResolverOptions.parse(["--proxy", "10.0.0.1:3128"])
        let settings = try #require(
            try options.proxySettings(environment: ["https_proxy": "http://10.9.9.9:8080", "no_proxy": "a.test"])
        )
        #expect(settings.https == HTTPProxy(host: "10.0.0.1", port: 3128))
        #expect(settings.http == HTTPProxy(host: "10.0.0.1", port: 3128))
        #expect(settings.noProxy == ["a.test"])  // no_proxy still applies to the flag's proxy
        #expect(!settings.proxyResolvesNames)
        // Without a port, curl's default.
        let portless = try #require(
            try ResolverOptions.parse(["--proxy", "http://10.0.0.1"]).proxySettings(environment: [:])
        )
        #expect(portless.https == HTTPProxy(host: "10.0.0.1", port: 1080))
    }

    @Test(arguments: ["", "   "])
    func anEmptyProxyFlagMeansNoProxyWhateverTheEnvironmentSays(_ value: String) throws {
        let options = try ResolverOptions.parse(["--proxy", value])
        #expect(try options.proxySettings(environment: ["https_proxy": "http://10.0.0.1:3128"]) == nil)
    }

    @Test func withoutTheFlagCurlsVariablesChooseAProxyPerScheme() throws {
        let options = try ResolverOptions.parse([])
        let settings = try #require(
            try options.proxySettings(environment: [
                "https_proxy": "http://user:s3cr3t-pw@10.0.0.2:8080",
                "http_proxy": "http://10.0.0.3:8080",
                "no_proxy": "a.test, .b.test,,",
            ])
        )
        var https = HTTPProxy(host: "10.0.0.2", port: 8080)
        https.user = "user"
        https.password = "s3cr3t-pw"  // credentials are welcome from the environment
        #expect(settings.https == https)
        #expect(settings.http == HTTPProxy(host: "10.0.0.3", port: 8080))
        #expect(settings.noProxy == ["a.test", ".b.test"])
    }

    @Test func uppercaseHTTPProxyIsIgnoredAndAllProxyCoversBothSchemes() throws {
        let options = try ResolverOptions.parse([])
        // A CGI request can set HTTP_PROXY (from a Proxy: header), so it is never read.
        #expect(try options.proxySettings(environment: ["HTTP_PROXY": "http://10.0.0.9:8080"]) == nil)
        #expect(try options.proxySettings(environment: [:]) == nil)
        let upper = try #require(try options.proxySettings(environment: ["HTTPS_PROXY": "http://10.0.0.5:8080"]))
        #expect(upper.https == HTTPProxy(host: "10.0.0.5", port: 8080))
        #expect(upper.http == nil)
        let all = try #require(try options.proxySettings(environment: ["all_proxy": "http://10.0.0.4:3128"]))
        #expect(all.https == HTTPProxy(host: "10.0.0.4", port: 3128))
        #expect(all.http == HTTPProxy(host: "10.0.0.4", port: 3128))
    }

    @Test func noProxyFlagReplacesTheVariableAndProxyResolvesIsPassedOn() throws {
        let options = try ResolverOptions.parse(["--noproxy", "x.test, y.test", "--proxy-resolves"])
        let settings = try #require(
            try options.proxySettings(environment: ["https_proxy": "http://10.0.0.1:3128", "no_proxy": "a.test"])
        )
        #expect(settings.noProxy == ["x.test", "y.test"])
        #expect(settings.proxyResolvesNames)
    }

    @Test func aPasswordInTheProxyFlagIsRefusedWithoutRepeatingIt() {
        let message = usageError(ResolverOptions.self, ["--proxy", "http://user:s3cr3t-pw@10.0.0.1:3128"])
        #expect(
            message
                == "--proxy: a password must not be a flag value (any process can read a command line); set https_proxy=http://USER:PASSWORD@HOST:PORT in the environment instead"
        )
        #expect(message?.contains("s3cr3t") == false)
    }

    /// docs/CLI.md: "`https://` and SOCKS proxies are refused with a usage error."
    @Test(arguments: [
        (
            "socks5://127.0.0.1:1080",
            "--proxy: proxy socks5://127.0.0.1:1080: socks5:// proxies are not supported; give an http:// proxy (CONNECT)"
        ),
        (
            "https://127.0.0.1:3128",
            "--proxy: proxy https://127.0.0.1:3128: https:// proxies are not supported; give an http:// proxy (CONNECT)"
        ),
        (
            "socks5://u:s3cr3t-pw@127.0.0.1:1080",
            "--proxy: proxy socks5://u:***@127.0.0.1:1080: socks5:// proxies are not supported; give an http:// proxy (CONNECT)"
        ),
    ])
    func anHTTPSOrSOCKSProxyFlagIsRefused(_ proxy: String, _ message: String) {
        #expect(usageError(ResolverOptions.self, ["--proxy", proxy]) == message)
    }

    @Test func anUnusableProxyVariableIsAUsageErrorNamingTheVariablesWithThePasswordRedacted() throws {
        let options = try ResolverOptions.parse([])
        let error = try #require(throws: ValidationError.self) {
            try options.proxySettings(environment: ["https_proxy": "socks5://user:hunter2@10.0.0.1:1080"])
        }
        #expect(
            error.message
                == "https_proxy / http_proxy / all_proxy: proxy socks5://user:***@10.0.0.1:1080: socks5:// proxies are not supported; give an http:// proxy (CONNECT)"
        )
        #expect(!error.message.contains("hunter2"))
    }
}
