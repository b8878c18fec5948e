// Alibaba Cloud EMAS v2 answers as the vendor's SDKs read them: `mode` as a number or a string, and a
// family with no address marked with `no_ip_code`.

import HTTPDNSCore
@testable import HTTPDNSLookup
import Foundation
import Testing

@Suite struct AlibabaV2FormatTests {
    let data = #"{"cip":"203.0.113.9","answers":[{"dn":"a.com","v4":{"ips":["1.2.3.4"],"ttl":60}}]}"#

    @Test(arguments: [#""mode":0"#, #""mode":"0""#, #""mode":" 0 ""#, #""mode":"plain""#, ""])
    func aPlainAnswerIsReadWhateverFormItsModeTakes(_ mode: String) throws {
        let body = #"{"code":"success","# + (mode.isEmpty ? "" : mode + ",") + #""data":"# + data + "}"
        let answer = try AlibabaV2Format.parse(Array(body.utf8), query: .ipv4, host: "a.com")
        #expect(answer.ipv4?.addresses == [IPAddress("1.2.3.4")!])
    }

    @Test(arguments: [#""mode":1"#, #""mode":"1""#, #""mode":"2""#])
    func anEncryptedModeIsReadAsANumberOrAString(_ mode: String) throws {
        let envelope = try AlibabaV2Format.envelope(
            Array((#"{"code":"success","# + mode + #","data":"c2VhbGVk"}"#).utf8)
        )
        #expect(envelope.mode == (mode.contains("1") ? 1 : 2))
        #expect(envelope.encrypted == "c2VhbGVk")
    }

    @Test func aFamilyWithNoAddressSaysRRNotExistAndIsReadAsNoRecord() throws {
        let answers = [
            (
                "v4.example.com",
                HostAnswer(ipv4: FamilyAnswer(addresses: [IPAddress("198.51.0.2")!], ttl: 60), ipv6: .empty)
            )
        ]
        let written = AlibabaV2Format.data(answers, clientAddress: nil)
        let object = try JSONSerialization.jsonObject(with: Data(written)) as? [String: Any]
        let first = (object?["answers"] as? [[String: Any]])?.first
        #expect((first?["v6"] as? [String: Any])?["no_ip_code"] as? String == "RRNotExist")
        #expect((first?["v4"] as? [String: Any])?["no_ip_code"] == nil)
        let read = try AlibabaV2Format.answers(data: written, query: .both, hosts: ["v4.example.com"])
        #expect(read["v4.example.com"]?.ipv6?.addresses == [])
        #expect(read["v4.example.com"]?.ipv4?.addresses == [IPAddress("198.51.0.2")!])
    }
}
