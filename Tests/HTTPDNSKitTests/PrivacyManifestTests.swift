// The privacy manifest (Sources/HTTPDNSPrivacy/PrivacyInfo.xcprivacy) against what the library's code does.
// It parses the plist and scans the sources of every target an app links for Apple's required-reason
// APIs ("Describing use of required reason API"): each category used must be declared with a reason,
// and each category declared must be used. Pure: files in, verdicts out.

import Foundation
@testable import HTTPDNSPrivacy
import Testing

@Suite struct PrivacyManifestTests {
    /// The repository's root, from this file's place in it.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The targets an app links through the products (HTTPDNSKit, HTTPDNSLoopbackProxy, HTTPDNSOpenAPI):
    /// their code is what the manifest speaks for. The server, the CLI and the benches never ship in an app.
    static let shippedTargets = [
        "HTTPDNSCore", "HTTPDNSEngine", "HTTPDNSLookup", "HTTPDNSListener", "HTTPDNSLoopbackProxy",
        "HTTPDNSURLSession", "HTTPDNSKit", "HTTPDNSOpenAPI", "HTTPDNSPrivacy",
    ]

    /// Apple's required-reason API categories and the spellings (Swift, Objective-C, C) that reach them.
    static let categories: [String: [String]] = [
        "NSPrivacyAccessedAPICategoryFileTimestamp": [
            "creationDate", "modificationDate", "fileModificationDate", "contentModificationDateKey",
            "creationDateKey", "NSFileCreationDate", "NSFileModificationDate", "getattrlist(",
            "getattrlistbulk(", "fgetattrlist(", "getattrlistat(", "stat(", "fstat(", "fstatat(", "lstat(",
        ],
        "NSPrivacyAccessedAPICategorySystemBootTime": ["systemUptime", "mach_absolute_time("],
        "NSPrivacyAccessedAPICategoryDiskSpace": [
            "volumeAvailableCapacity", "volumeTotalCapacity", "NSURLVolumeAvailableCapacity", "systemFreeSize",
            "systemSize", "NSFileSystemFreeSize", "NSFileSystemSize", "statfs(", "statvfs(", "fstatfs(",
            "fstatvfs(",
        ],
        "NSPrivacyAccessedAPICategoryActiveKeyboards": ["activeInputModes"],
        "NSPrivacyAccessedAPICategoryUserDefaults": ["UserDefaults", "NSUserDefaults"],
    ]

    /// The categories `source` uses, comments left out. A spelling counts where an identifier starts
    /// with it (`volumeAvailableCapacityForImportantUsage`), not inside one (`lastModificationDate`,
    /// `.status(`).
    static func categoriesUsed(in source: String) -> Set<String> {
        let code = source.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.hasPrefix("//") || trimmed.hasPrefix("*") || trimmed.hasPrefix("/*") { return "" }
            return line
        }.joined(separator: "\n")
        var used: Set<String> = []
        for (category, spellings) in categories {
            for spelling in spellings where occurs(spelling, in: code) {
                used.insert(category)
            }
        }
        return used
    }

    static func occurs(_ spelling: String, in code: String) -> Bool {
        var searchStart = code.startIndex
        while let range = code.range(of: spelling, range: searchStart..<code.endIndex) {
            let before = range.lowerBound == code.startIndex ? nil : code[code.index(before: range.lowerBound)]
            if !(before.map { $0.isLetter || $0.isNumber || $0 == "_" } ?? false) { return true }
            searchStart = range.upperBound
        }
        return false
    }

    /// The manifest, parsed as the App Store reads it.
    static func manifest() throws -> [String: Any] {
        let url = root.appendingPathComponent("Sources/HTTPDNSPrivacy/PrivacyInfo.xcprivacy")
        let data = try Data(contentsOf: url)
        let plist = try PropertyListSerialization.propertyList(from: data, format: nil)
        return try #require(plist as? [String: Any], "the manifest's root must be a dictionary")
    }

    /// The manifest is a resource of the built product, as the sources have it.
    @Test func theManifestIsBundled() throws {
        let bundled = try #require(PrivacyManifest.url, "PrivacyInfo.xcprivacy is not in HTTPDNSPrivacy's bundle")
        let source = Self.root.appendingPathComponent("Sources/HTTPDNSPrivacy/PrivacyInfo.xcprivacy")
        #expect(try Data(contentsOf: bundled) == Data(contentsOf: source))
    }

    @Test func theManifestSaysNoTrackingAndNoCollectedData() throws {
        let manifest = try Self.manifest()
        #expect(manifest["NSPrivacyTracking"] as? Bool == false)
        #expect((manifest["NSPrivacyTrackingDomains"] as? [Any])?.isEmpty == true)
        #expect((manifest["NSPrivacyCollectedDataTypes"] as? [Any])?.isEmpty == true)
        #expect(manifest["NSPrivacyAccessedAPITypes"] is [Any])
    }

    @Test func theManifestDeclaresExactlyTheRequiredReasonAPIsTheShippedCodeUses() throws {
        let manifest = try Self.manifest()
        let entries = try #require(manifest["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        var declared: Set<String> = []
        for entry in entries {
            let category = try #require(entry["NSPrivacyAccessedAPIType"] as? String)
            let reasons = entry["NSPrivacyAccessedAPITypeReasons"] as? [String] ?? []
            #expect(!reasons.isEmpty, "\(category) is declared without a reason")
            #expect(Self.categories[category] != nil, "\(category) is not one of Apple's categories")
            declared.insert(category)
        }
        var used: [String: [String]] = [:]
        var scanned = 0
        for target in Self.shippedTargets {
            let folder = Self.root.appendingPathComponent("Sources/\(target)")
            let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }
            for file in files where file.hasSuffix(".swift") {
                let source = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                scanned += 1
                for category in Self.categoriesUsed(in: source) {
                    used[category, default: []].append("\(target)/\(file)")
                }
            }
        }
        #expect(scanned > 100, "the scan found too few sources: is the root right?")
        for (category, files) in used where !declared.contains(category) {
            Issue.record(
                "\(category) is used (\(files.joined(separator: ", "))) but not declared in PrivacyInfo.xcprivacy"
            )
        }
        for category in declared where used[category] == nil {
            Issue.record("\(category) is declared in PrivacyInfo.xcprivacy but no shipped source uses it")
        }
    }

    /// The scanner itself: the spellings are found, in code and not in comments, as whole identifiers.
    @Test func theScannerFindsEachCategoryAndNothingElse() {
        #expect(
            Self.categoriesUsed(in: "let d = attributes[.modificationDate]") == [
                "NSPrivacyAccessedAPICategoryFileTimestamp"
            ]
        )
        #expect(Self.categoriesUsed(in: "if fstat(fd, &info) == 0 {}") == ["NSPrivacyAccessedAPICategoryFileTimestamp"])
        #expect(
            Self.categoriesUsed(in: "let t = ProcessInfo.processInfo.systemUptime") == [
                "NSPrivacyAccessedAPICategorySystemBootTime"
            ]
        )
        #expect(
            Self.categoriesUsed(in: "let t = mach_absolute_time()") == ["NSPrivacyAccessedAPICategorySystemBootTime"]
        )
        #expect(
            Self.categoriesUsed(in: "values.volumeAvailableCapacityForImportantUsage") == [
                "NSPrivacyAccessedAPICategoryDiskSpace"
            ]
        )
        #expect(
            Self.categoriesUsed(in: "UserDefaults.standard.set(1, forKey: \"k\")") == [
                "NSPrivacyAccessedAPICategoryUserDefaults"
            ]
        )
        #expect(
            Self.categoriesUsed(in: "UITextInputMode.activeInputModes") == [
                "NSPrivacyAccessedAPICategoryActiveKeyboards"
            ]
        )
        #expect(Self.categoriesUsed(in: "// fstat(fd, &info) in a comment\n/// UserDefaults in a doc comment").isEmpty)
        #expect(Self.categoriesUsed(in: "let s = response.status(code)\nlet lastModificationDateSeen = 1").isEmpty)
    }
}
