// certificate-der: CertificateDER on hostile bytes: the key out of a certificate's DER (for pins), and
// the same bytes as a PEM text (extra trust roots).
//
// Whatever comes out: a key is a slice of the input that is itself one whole DER SEQUENCE, and reading
// the same bytes again gives the same key; a PEM text gives non-empty certificates or a one-line error.

func fuzzCertificateDER(_ data: [UInt8]) {
    if let key = CertificateDER.subjectPublicKeyInfo(of: data) {
        check(key.startIndex >= 0 && key.endIndex <= data.count, "key outside the input")
        let bytes = Array(key)
        let element = CertificateDER.element(in: bytes, at: 0, end: bytes.count)
        check(element?.tag == CertificateDER.sequence, "key is not a SEQUENCE")
        check(element?.whole == 0..<bytes.count, "key is not one whole element")
        check(CertificateDER.subjectPublicKeyInfo(of: data) == key, "a second reading differs")
    }
    do {
        for certificate in try CertificateDER.certificates(inPEM: text(data[...])) {
            check(!certificate.isEmpty, "an empty certificate")
        }
    } catch let error as PEMError {
        checkOneLine(error.description, "PEM error")
    } catch {
        check(false, "PEM threw \(error)")
    }
}
