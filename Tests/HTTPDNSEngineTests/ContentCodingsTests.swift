// An app's Accept-Encoding narrowed to the codings the engine decodes.

@testable import HTTPDNSEngine
import Testing

@Suite struct ContentCodingsTests {
    @Test func brotliAndZstdAreNotOfferedWhenTheEngineDecodes() {
        // Alamofire's default session header.
        #expect(ContentCodings.offered("br;q=1.0, gzip;q=0.9, deflate;q=0.8") == "gzip;q=0.9, deflate;q=0.8")
        #expect(ContentCodings.offered("zstd, br") == "gzip, deflate")
        #expect(ContentCodings.offered("*") == "gzip, deflate")
        #expect(ContentCodings.offered(nil) == "gzip, deflate")
        #expect(ContentCodings.offered("") == "gzip, deflate")
    }

    @Test func whatTheAppAskedForWithinWhatIsDecodedIsKeptAsItSaidIt() {
        #expect(ContentCodings.offered("identity") == "identity")
        #expect(ContentCodings.offered("GZIP ; q=0.5,br") == "GZIP ; q=0.5")
        #expect(ContentCodings.offered("deflate, gzip;q=0") == "deflate, gzip;q=0")
    }
}
