// The DoH server's query-string and base64url decoding, on the bytes (issue 15 took Foundation's string
// search off this path); what they accept and refuse.

@testable import HTTPDNSServer
import Testing

@Suite struct QueryDecodingTests {
    @Test func formDecodingUndoesEscapesAndPlusOnlyWhereAsked() {
        #expect(formDecoded("a.test", plusIsSpace: true) == "a.test")
        #expect(formDecoded("a%2Eb+c", plusIsSpace: true) == "a.b c")
        #expect(formDecoded("a+b", plusIsSpace: false) == "a+b")
        #expect(formDecoded("%E4%B8%AD", plusIsSpace: true) == "中")
        #expect(formDecoded("%e4%b8%ad", plusIsSpace: true) == "中")
    }

    @Test(arguments: ["%", "%4", "%zz", "a%2", "%FF", "%C3"])
    func malformedEscapesOrBytesThatAreNotUTF8AreRefused(_ text: String) {
        #expect(formDecoded(Substring(text), plusIsSpace: true) == nil)
    }

    @Test func base64URLDecodesWithOrWithoutPaddingLengthAndRefusesOtherAlphabets() {
        // RFC 8484 section 4.1.1's example query for www.example.com.
        let query = "AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA2NvbQAAAQAB"
        #expect(decodeBase64URL(query)?.count == 33)
        #expect(decodeBase64URL("-_8") == [0xFB, 0xFF])
        #expect(decodeBase64URL("+/8") == nil)  // standard base64's alphabet is not base64url
        #expect(decodeBase64URL("AAA=") == nil)  // padding is left off in DoH
        #expect(decodeBase64URL("ä") == nil)
        #expect(decodeBase64URL(String(repeating: "A", count: 4100)) == nil)
        #expect(decodeBase64URL("A") == nil)  // one character is no byte
    }
}
