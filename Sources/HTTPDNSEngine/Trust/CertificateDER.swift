// The two readings of certificate bytes the engine does itself, on every platform: a certificate's
// SubjectPublicKeyInfo out of its DER (for pins), and the certificates of a PEM file (for extra trust
// roots). Everything else about a certificate (its signature, its chain, its names) is the TLS stack's:
// BoringSSL and swift-certificates on Linux, the Security framework on Apple platforms. Reading these two
// here, by the rules below, is what keeps swift-asn1 (237 K) out of an iOS app.
//
// DER (X.690 §10): every element is a tag, a length and that many bytes of contents. Only the
// definite, shortest length is DER, and a certificate is one element with nothing after it. The walk
// checks those rules on the path it takes (the certificate, its TBSCertificate and the fields before
// the key), not inside the fields it steps over: the TLS stack that uses the certificate parses all of it.

import Foundation

enum CertificateDER {
    /// One element: its tag byte, and where its contents and the whole element lie in the input.
    struct Element {
        var tag: UInt8
        var contents: Range<Int>
        var whole: Range<Int>
    }

    static let sequence: UInt8 = 0x30
    /// `[0] EXPLICIT`, constructed: TBSCertificate's version.
    static let version: UInt8 = 0xA0

    /// The element that starts at `start` and ends by `end`; nil when the bytes there are not one.
    static func element(in der: [UInt8], at start: Int, end: Int) -> Element? {
        guard start < end, end <= der.count, der[start] & 0x1F != 0x1F else { return nil }  // one-byte tags only
        guard start + 1 < end else { return nil }
        let first = der[start + 1]
        var length = Int(first)
        var contentStart = start + 2
        if first & 0x80 != 0 {
            let count = Int(first & 0x7F)
            // 0x80 (indefinite) is BER, and a certificate is far below 4 GiB.
            guard (1...4).contains(count), contentStart + count <= end else { return nil }
            length = 0
            for byte in der[contentStart..<contentStart + count] { length = length << 8 | Int(byte) }
            // The shortest form: no leading zero byte, and the long form only from 128.
            guard der[contentStart] != 0, length >= 0x80 else { return nil }
            contentStart += count
        }
        guard length <= end - contentStart else { return nil }
        return Element(
            tag: der[start],
            contents: contentStart..<contentStart + length,
            whole: start..<contentStart + length
        )
    }

    /// The DER bytes of the certificate's SubjectPublicKeyInfo, as they appear in it (RFC 5280 §4.1:
    /// the seventh field of TBSCertificate, the sixth when the optional `[0] version` is absent); nil
    /// when `der` is not a certificate.
    static func subjectPublicKeyInfo(of der: [UInt8]) -> ArraySlice<UInt8>? {
        guard let certificate = element(in: der, at: 0, end: der.count), certificate.tag == sequence,
            certificate.whole.upperBound == der.count,
            let tbs = element(in: der, at: certificate.contents.lowerBound, end: certificate.contents.upperBound),
            tbs.tag == sequence
        else { return nil }
        var at = tbs.contents.lowerBound
        // The version is explicitly tagged [0]; version 1 certificates leave it out.
        if let first = element(in: der, at: at, end: tbs.contents.upperBound), first.tag == version {
            at = first.whole.upperBound
        }
        // serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo.
        var fields: [Element] = []
        while fields.count < 6, let field = element(in: der, at: at, end: tbs.contents.upperBound) {
            fields.append(field)
            at = field.whole.upperBound
        }
        guard fields.count == 6, fields[5].tag == sequence else { return nil }
        return der[fields[5].whole]
    }

    /// The DER of each `CERTIFICATE` block of a PEM text (RFC 7468), in order; text outside the blocks
    /// is ignored, as OpenSSL ignores it. Throws `PEMError` for a block without its end, with a label
    /// that is not its begin's, or whose body is not base64.
    static func certificates(inPEM text: String) throws -> [[UInt8]] {
        var found: [[UInt8]] = []
        var label: String?
        var body = ""
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if let begun = Self.label(line, "BEGIN") {
                if let open = label { throw PEMError("a BEGIN line inside the \(open) block") }
                label = begun
                body = ""
            } else if let ended = Self.label(line, "END") {
                guard let open = label, open == ended else { throw PEMError("END \(ended) without its BEGIN") }
                label = nil
                guard let bytes = Data(base64Encoded: body), !bytes.isEmpty else {
                    throw PEMError("the \(open) block is not base64")
                }
                if open == "CERTIFICATE" { found.append(Array(bytes)) }
            } else if label != nil {
                body += line
            }
        }
        if let open = label { throw PEMError("the \(open) block has no END line") }
        return found
    }

    /// `NAME` of a `-----BEGIN NAME-----` (or END) line: printable ASCII, at most 64 characters (RFC
    /// 7468's labels are; anything else is not such a line, so an error never echoes control bytes).
    private static func label(_ line: String, _ kind: String) -> String? {
        let prefix = "-----\(kind) ", suffix = "-----"
        guard line.hasPrefix(prefix), line.hasSuffix(suffix), line.count >= prefix.count + suffix.count else {
            return nil
        }
        let name = line.dropFirst(prefix.count).dropLast(suffix.count)
        guard name.count <= 64, name.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) else {
            return nil
        }
        return String(name)
    }
}

/// A PEM text that cannot be read, and why.
struct PEMError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
