// swift-tools-version:6.1
//
// swift-httpdns: resolve through HTTPDNS / DNS-over-HTTPS at connect time, keep the hostname for
// TLS SNI, certificate checks and the Host header.
//
// Module map (one concern each). No module shares its name with a type, so `Module.Type` always works:
//   HTTPDNSKit       the front door: `HTTPDNS`, one value that owns the resolver, the engines and their
//                    lifecycle, the URLProtocol and system encrypted-DNS routes, and re-exports the public
//                    types of the modules below. Apps import this.
//   HTTPDNSLoopbackProxy the `.proxy` route, a product an app opts into: the loopback forward proxy
//                    (`HTTPDNSProxy`: CONNECT tunnels, http:// forwarding, PAC), kept per HTTPDNS as an
//                    attachment, and `configure(_:via:)` for URLSession configurations and web views.
//   HTTPDNSPrivacy   the privacy manifest (PrivacyInfo.xcprivacy), bundled with every app that links HTTPDNSKit.
//   HTTPDNSCore      pure core, no I/O: DNS wire format, provider answer parsers, cache and refresh
//                    policy, host policy, answer validation, resolver specs.
//   HTTPDNSEngine    the one HTTP engine (SwiftNIO): TLS with the real hostname as SNI, HTTP/1.1 and
//                    HTTP/2 by ALPN, connecting to addresses given by a resolver (`AddressSource`). Its
//                    folders: Pool/, Exchange/, Transport/ (Posix, NetworkFramework), Trust/, and
//                    Network/ (the network path and the monitor that keeps it current), which the
//                    resolver shares.
//   HTTPDNSListener  the listener's toolkit the loopback proxy and the server share: connection limits
//                    and slots, the accept pause, idle closing.
//   HTTPDNSLookup    the resolver, `HTTPDNSResolver` (SwiftNIO): providers (DoH, JSON, DNSPod, Do53, system), cache,
//                    coalescing, prefetch, persistence, fallback, hijack detection.
//   HTTPDNSURLSession the URLProtocol for URLSession (the only module that imports FoundationNetworking).
//   HTTPDNSOpenAPI   a ClientTransport for swift-openapi-generator's clients, behind the trait `OpenAPI`.
//
// Apps link the products, HTTPDNSKit (and, when they use them, HTTPDNSLoopbackProxy and HTTPDNSOpenAPI),
// and what they build on. The rest is this
// repository's own, and no product uses it, so an app never resolves what only it needs
// (argument-parser, Prometheus, service-lifecycle, swift-otel, the DocC plugin): SwiftPM leaves out a
// dependency that no product uses.
//   HTTPDNSServer    the self-hostable HTTPDNS server (DNSPod, JSON, DoH wire and JSON on one port) and a
//                    classic DNS (UDP/TCP) server, used by `httpdns serve`, the demo, tests and benches.
//                    Its Swift API is package-only for now.
//   httpdns          the command-line tool; it alone picks a metrics backend (Prometheus, for
//                    `serve --metrics`): the library modules only report through swift-metrics.
//   HTTPDNSCommandLine what the command-line tools share: resolver options, secrets, the OTLP flag, and
//                    the `httpdns trace` page (Trace/: request timings in, SVG and HTML out, pure).
//   HTTPDNSOTLP      the OTLP export behind `--otlp-endpoint` (swift-otel), for the executables alone.
//   httpdns-bench    the benchmarks (ours next to a peer's, from one run) and the crash-test driver.
//   httpdns-conformance the differential suite: every case through the system's URL loading and ours.
//
// Tests: one hermetic target per module (`swift test` runs them anywhere: no peers, no root), plus
// HTTPDNSIntegrationTests, which needs the real peers that scripts/test.sh starts (skipped without them,
// failing under CI=true). HTTPDNSTestSupport holds what the test targets share.
import PackageDescription

/// What only the trait `OpenAPI` brings in.
let openAPI: TargetDependencyCondition? = .when(traits: ["OpenAPI"])

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

/// Where BoringSSL is the only TLS and crypto there is. On Apple platforms the system's own does those
/// jobs, and a dependency marked with this condition is left out of an app's build.
let notApple: [Platform] = [.linux, .android, .windows, .openbsd]

/// Where Network.framework carries the library's connections (NIOTransportServices) and the system runs TLS.
let apple: [Platform] = [.macOS, .iOS, .tvOS, .watchOS, .visionOS, .macCatalyst]

/// The modules tests start (servers, resolvers) and the NIO pieces they drive directly: what the shared
/// helpers (HTTPDNSTestSupport) and every test target but the pure core's build on.
let sharedTestDependencies: [Target.Dependency] = [
    "HTTPDNSCore",
    "HTTPDNSDemoPKI",
    "HTTPDNSEngine",
    "HTTPDNSLookup",
    "HTTPDNSServer",
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
    .product(name: "Logging", package: "swift-log"),
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "NIOSSL", package: "swift-nio-ssl"),
]
let testDependencies: [Target.Dependency] = ["HTTPDNSTestSupport", "HTTPDNSTestTools"] + sharedTestDependencies

/// A test target named after the module it tests, on `testDependencies` plus `extra`.
func testTarget(_ name: String, _ extra: [Target.Dependency] = []) -> Target {
    .testTarget(name: name, dependencies: testDependencies + extra, swiftSettings: swiftSettings)
}

let package = Package(
    name: "swift-httpdns",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "HTTPDNSKit", targets: ["HTTPDNSKit"]),
        // The `.proxy` route (web views, players, other processes through a loopback proxy), opted into.
        .library(name: "HTTPDNSLoopbackProxy", targets: ["HTTPDNSLoopbackProxy"]),
        // Behind the trait `OpenAPI`, off by default: an app without a generated client never resolves
        // swift-openapi-runtime or swift-http-types.
        .library(name: "HTTPDNSOpenAPI", targets: ["HTTPDNSOpenAPI"]),
    ],
    traits: [
        .trait(
            name: "OpenAPI",
            description: "HTTPDNSOpenAPI, a ClientTransport for swift-openapi-generator's clients."
        )
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-transport-services.git", from: "1.28.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // OTLP/HTTP export for the CLI alone (`--otlp-endpoint`); the gRPC exporter is left out.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .target(
            name: "HTTPDNSCore",
            dependencies: [],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HTTPDNSEngine",
            dependencies: [
                "HTTPDNSCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                // The transport (ConnectionTransport.swift): BSD sockets and BoringSSL where there is no
                // system TLS; Network.framework and the system's TLS on Apple platforms. swift-certificates
                // (the name check on BoringSSL's chains) brings BoringSSL too, so it goes with NIOSSL.
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: notApple)),
                .product(name: "X509", package: "swift-certificates", condition: .when(platforms: notApple)),
                // The chain's checks on BoringSSL (Connection+Verification.swift); Apple's Security
                // framework does them there, and pins and PEM files are read by CertificateDER.swift.
                .product(name: "SwiftASN1", package: "swift-asn1", condition: .when(platforms: notApple)),
                .product(
                    name: "NIOTransportServices",
                    package: "swift-nio-transport-services",
                    condition: .when(platforms: apple)
                ),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                // gzip and deflate response bodies through the system's zlib (ContentDecoder.swift).
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HTTPDNSLookup",
            dependencies: [
                "HTTPDNSCore",
                "HTTPDNSEngine",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                // AES-CBC for the vendors' encrypted modes; Apple platforms use CommonCrypto (AESCBC.swift).
                .product(name: "_CryptoExtras", package: "swift-crypto", condition: .when(platforms: notApple)),
            ],
            swiftSettings: swiftSettings
        ),
        // The listener's toolkit: connection limits and slots (who may take a full listener's place),
        // the accept pause, idle closing. The loopback proxy (HTTPDNSLoopbackProxy) and the server use it; the
        // client engine does not.
        .target(
            name: "HTTPDNSListener",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The throw-away certificate authority of `httpdns demo`, the conformance origin and the tests:
        // certificates made at start, never written by the demo.
        .target(
            name: "HTTPDNSDemoPKI",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HTTPDNSServer",
            dependencies: [
                "HTTPDNSListener",
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HTTPDNSURLSession",
            dependencies: [
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The privacy manifest App Store review expects of an SDK (PrivacyInfo.xcprivacy), which every app
        // linking HTTPDNSKit bundles. Swift 5 mode for SwiftPM's generated `Bundle.module`, which Swift 6
        // refuses where the SDK does not mark Bundle Sendable (PrivacyManifest.swift says more).
        .target(
            name: "HTTPDNSPrivacy",
            resources: [.copy("PrivacyInfo.xcprivacy")],
            swiftSettings: swiftSettings + [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "HTTPDNSKit",
            dependencies: [
                "HTTPDNSPrivacy",
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                "HTTPDNSURLSession",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The loopback proxy route, a product an app opts into: what only that route needs (the proxy,
        // its listener toolkit) stays out of an app that links HTTPDNSKit alone, where Swift's type
        // metadata would keep it past dead-stripping.
        .target(
            name: "HTTPDNSLoopbackProxy",
            dependencies: [
                "HTTPDNSKit",
                "HTTPDNSListener",
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                "HTTPDNSURLSession",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                // The proxy's listener on Apple platforms, where the tunnels' connections are
                // Network.framework's.
                .product(
                    name: "NIOTransportServices",
                    package: "swift-nio-transport-services",
                    condition: .when(platforms: apple)
                ),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HTTPDNSOpenAPI",
            dependencies: [
                "HTTPDNSKit",
                "HTTPDNSEngine",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime", condition: openAPI),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: openAPI),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The differential conformance suite (README, "Behaves like the system's URL loading"): every
        // case through a plain URLSession and through one with HTTPDNS enabled, the system as the
        // oracle. A tool of this repository, not a product: apps never build it.
        .executableTarget(
            name: "httpdns-conformance",
            dependencies: [
                "HTTPDNSDemoPKI",
                "HTTPDNSKit",
                "HTTPDNSServer",
                "HTTPDNSCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                // The TLS origin of the server trust cases (a tool's dependency, on every platform).
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Conformance",
            swiftSettings: swiftSettings
        ),
        // What the command-line tools share: the resolver options (`--resolver`, `--local-dns`, `--only`,
        // secrets from files or the environment) and the OTLP export (`--otlp-endpoint`).
        .target(
            name: "HTTPDNSCommandLine",
            dependencies: [
                "HTTPDNSKit",
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // The trace's screenshot runs Chromium on NIO's blocking pool.
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The OTLP export of `--otlp-endpoint` (swift-otel), for the executables alone: the command-line
        // module and every test bundle build without swift-otel and SwiftProtobuf.
        .target(
            name: "HTTPDNSOTLP",
            dependencies: [
                "HTTPDNSCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            swiftSettings: swiftSettings
        ),
        // The benchmarks (ours next to a peer's, from the same run) and the crash-test driver: a tool of
        // this repository, built by the test command so none of it rots, and never part of `httpdns`.
        .executableTarget(
            name: "httpdns-bench",
            dependencies: [
                "HTTPDNSCommandLine",
                "HTTPDNSOTLP",
                "HTTPDNSKit",
                "HTTPDNSURLSession",
                "HTTPDNSServer",
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "httpdns",
            dependencies: [
                "HTTPDNSDemoPKI",
                "HTTPDNSKit",
                "HTTPDNSLoopbackProxy",
                "HTTPDNSURLSession",
                "HTTPDNSServer",
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                "HTTPDNSCommandLine",
                "HTTPDNSOTLP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // What tests run beside the code under test and links none of it: child processes (the built
        // binaries, curl, peers), hostile and flaky peers, waiting for an event.
        .target(
            name: "HTTPDNSTestTools",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/HTTPDNSTestTools",
            swiftSettings: swiftSettings
        ),
        // Fixtures built from the package's own modules (a resolver, a server, an app's engine): for the
        // suites that test how those work together.
        .target(
            name: "HTTPDNSTestSupport",
            dependencies: sharedTestDependencies + [
                "HTTPDNSTestTools", "HTTPDNSKit", "HTTPDNSLoopbackProxy", "HTTPDNSURLSession",
            ],
            path: "Tests/HTTPDNSTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HTTPDNSCoreTests",
            dependencies: ["HTTPDNSCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HTTPDNSListenerTests",
            dependencies: [
                "HTTPDNSListener",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The command-line tools' option parsing and validation as a module (flag rules, secrets,
        // error texts), so a change there fails a unit test, not only an end-to-end run of the binary.
        .testTarget(
            name: "HTTPDNSCommandLineTests",
            dependencies: [
                "HTTPDNSCommandLine",
                "HTTPDNSKit",
                "HTTPDNSCore",
                "HTTPDNSEngine",
                "HTTPDNSLookup",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The engine alone, and the demo PKI for certificates made at test time.
        .testTarget(
            name: "HTTPDNSEngineTests",
            dependencies: [
                "HTTPDNSCore", "HTTPDNSDemoPKI", "HTTPDNSEngine", "HTTPDNSTestTools",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        testTarget("HTTPDNSLookupTests"),
        testTarget(
            "HTTPDNSServerTests",
            [
                "HTTPDNSListener",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        // The URL load's rules and the interception, without a server or the app's kit.
        .testTarget(
            name: "HTTPDNSURLSessionTests",
            dependencies: [
                "HTTPDNSCore", "HTTPDNSEngine", "HTTPDNSLookup", "HTTPDNSURLSession",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        testTarget(
            "HTTPDNSKitTests",
            [
                "HTTPDNSKit", "HTTPDNSPrivacy", .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                // The fuzz targets' replay includes the proxy's request-target parser.
                "HTTPDNSLoopbackProxy",
            ]
        ),
        testTarget(
            "HTTPDNSLoopbackProxyTests",
            [
                "HTTPDNSKit", "HTTPDNSLoopbackProxy",
                // The proxy's handler on an EmbeddedChannel.
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        // The OpenAPI transport against the test nginx, through a client swift-openapi-generator made
        // from openapi.yaml (committed under Generated/, so no build runs the generator).
        .testTarget(
            name: "HTTPDNSOpenAPITests",
            dependencies: testDependencies + [
                "HTTPDNSOpenAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"],
            swiftSettings: swiftSettings
        ),
        testTarget("httpdnsTests", ["HTTPDNSListener"]),
        testTarget("HTTPDNSIntegrationTests", ["HTTPDNSKit", "HTTPDNSLoopbackProxy", "HTTPDNSURLSession"]),
    ],
    swiftLanguageModes: [.v6]
)
