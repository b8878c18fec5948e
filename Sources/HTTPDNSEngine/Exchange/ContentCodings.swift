// The content codings the engine decodes, and an app's Accept-Encoding narrowed to them. A request that
// asks the engine to decode (`HTTPEngineRequest.decompress`, as every URLSession load does) must never
// get a body it cannot decode: Alamofire's default `br;q=1.0, gzip;q=0.9, deflate;q=0.8` would
// otherwise bring a CDN's brotli body to the app's JSON decoder still compressed.

enum ContentCodings {
    /// Whether the engine can hand the app `coding`'s body decoded: identity, or one `ContentDecoder`
    /// decodes.
    static func isDecoded(_ coding: String) -> Bool {
        coding == "identity" || ContentDecoder.algorithm(for: coding) != nil
    }

    /// The Accept-Encoding to send for `accept` (the app's, nil for none): its codings the engine decodes,
    /// in its order with their weights; `gzip, deflate` when none is left (a `*` is dropped: it would let
    /// the server pick one we cannot decode).
    static func offered(_ accept: String?) -> String {
        let kept = (accept ?? "").split(separator: ",").compactMap { element -> String? in
            let item = element.trimmingCharacters(in: .whitespaces)
            let coding = item.split(separator: ";", maxSplits: 1).first.map {
                $0.trimmingCharacters(in: .whitespaces).lowercased()
            }
            return coding.map(isDecoded) == true ? item : nil
        }
        return kept.isEmpty ? "gzip, deflate" : kept.joined(separator: ", ")
    }
}
