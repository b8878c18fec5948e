// swift-tools-version:6.1
//
// Benchmarks that compare swift-httpdns with other clients in the same run. A package of its own so
// that neither CI nor `swift run httpdns demo` has to build AsyncHTTPClient.
//   swift run -c release --package-path Benchmarks engine-bench --help
import Foundation
import PackageDescription

// A path dependency is named after its folder, whatever the clone is called.
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent()
let rootName = root.lastPathComponent

let package = Package(
    name: "swift-httpdns-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        .executableTarget(
            name: "engine-bench",
            dependencies: [
                .product(name: "HTTPDNSCore", package: rootName),
                .product(name: "HTTPDNSEngine", package: rootName),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
