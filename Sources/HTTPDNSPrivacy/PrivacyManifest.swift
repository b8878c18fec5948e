// The privacy manifest's own target: PrivacyInfo.xcprivacy, a resource every app linking HTTPDNSKit
// bundles (Xcode merges it into the app's privacy report). It is a target of its own, in Swift 5 mode,
// for one reason: SwiftPM generates `Bundle.module` for a target with resources as a `static let` of
// type `Bundle`, which Swift 6 mode refuses where the SDK does not mark Bundle Sendable (the iOS 16
// SDKs the Apple check builds with). Nothing else lives here.

import Foundation

/// Where the privacy manifest is in the built product.
enum PrivacyManifest {
    /// The bundled `PrivacyInfo.xcprivacy`, nil if the bundle lacks it.
    static var url: URL? {
        Bundle.module.url(forResource: "PrivacyInfo", withExtension: "xcprivacy")
    }
}
