// Strict UTF-8 decoding for every platform the package declares. The standard library's
// `String(validating:as:)` does this, but only from macOS 15 / iOS 18; `String(decoding:as:)` is
// everywhere but repairs bad sequences with U+FFFD instead of refusing them. A repaired string's UTF-8
// differs from the input, so comparing the two refuses exactly what `validating` would.

import HTTPDNSCore

extension String {
    /// `bytes` as text, or nil when they are not well-formed UTF-8 (a wrong key, a tampered or binary
    /// answer). Nothing is repaired: no U+FFFD is ever made up.
    package init?(strictUTF8 bytes: some Collection<UInt8>) {
        let decoded = String(decoding: bytes, as: UTF8.self)
        guard decoded.utf8.elementsEqual(bytes) else { return nil }
        self = decoded
    }
}
