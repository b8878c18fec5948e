// swift-tools-version:6.1
//
// Benchmarks that compare swift-httpdns with other clients in the same run. A package of its own so
// that neither the library's users nor `swift run httpdns demo` have to build AsyncHTTPClient.
//   swift run -c release --package-path Benchmarks engine-bench --help
// It also holds soak-client, the load that scripts/soak.sh runs while it injects faults.
//
// It depends on swift-httpdns as an app does, through the public product HTTPDNSKit, so a benchmark
// measures only what a user can reach. The test command builds it and runs one short scenario against
// the test nginx, so it cannot rot.
import PackageDescription

let package = Package(
    name: "swift-httpdns-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "swift-httpdns", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        .executableTarget(
            name: "engine-bench",
            dependencies: [
                .product(name: "HTTPDNSKit", package: "swift-httpdns"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        // The load of scripts/soak.sh: engine, URLSession and proxy requests through the
        // public API while the script injects faults.
        .executableTarget(
            name: "soak-client",
            dependencies: [
                .product(name: "HTTPDNSKit", package: "swift-httpdns"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
