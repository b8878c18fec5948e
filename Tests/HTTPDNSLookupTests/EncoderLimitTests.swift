// Hostile round 4: values the wire form cannot carry. `serve` accepted them at start and then trapped on
// the first query (unchecked integer conversions) or wrote a corrupt answer (a name over 255 bytes had its
// labels written before the length check, and the error was swallowed). Each is now refused where it is
// parsed, naming the limit, and every encoder refuses rather than traps or truncates.

import Foundation
import HTTPDNSCore
@testable import HTTPDNSLookup
import Testing

@Suite struct EncoderLimitTests {
    /// The message `parsing` throws, or nil when it parses.
    func refusal(_ text: String) -> String? {
        do {
            _ = try ServiceBinding(parsing: text)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func anALPNIdOver255BytesIsRefusedNamingTheLimit() throws {
        let message = try #require(refusal("1 . alpn=" + String(repeating: "a", count: 300)))
        #expect(message.contains("1 to 255"), "\(message)")
        #expect(refusal("1 . alpn=" + String(repeating: "a", count: 255)) == nil)
    }

    @Test func aTargetLabelOver63BytesOrATargetOver255AreRefused() throws {
        let label = try #require(refusal("1 " + String(repeating: "a", count: 70) + ".example. alpn=h2"))
        #expect(label.contains("63"), "\(label)")
        let long = (0..<60).map { _ in "abcd" }.joined(separator: ".")  // 300 bytes
        let name = try #require(refusal("1 \(long). alpn=h2"))
        #expect(name.contains("255"), "\(name)")
    }

    @Test func parametersOver65535BytesAreRefused() throws {
        let ech = Data(repeating: 7, count: 70_000).base64EncodedString()
        #expect(try #require(refusal("1 . alpn=h2 ech=\(ech)")).contains("65535"))
        let hints = (0..<20_000).map { "10.0.\($0 / 256).\($0 % 256)" }.joined(separator: ",")
        #expect(try #require(refusal("1 . ipv4hint=\(hints)")).contains("65535"))
    }

    @Test func noDefaultALPNWithoutALPNIsRefused() {
        #expect(refusal("1 . no-default-alpn") != nil)
        #expect(refusal("1 . alpn=h2 no-default-alpn") == nil)
    }

    @Test func aNameThatCannotBeEncodedWritesNothing() {
        var out: [UInt8] = [1, 2, 3]
        let long = (0..<60).map { _ in "abcd" }.joined(separator: ".")
        #expect(throws: DNSWireError.self) { try out.appendName(long) }
        #expect(out == [1, 2, 3], "labels were written before the length check")
    }

    @Test func anAnswerOver65535BytesIsRefusedNotTruncated() throws {
        let query = try DNSMessage(parsing: try DNSMessage.query(name: "x.test", type: .https, id: 1))
        let record = try ServiceBinding(
            parsing: "1 . alpn=h2 ipv6hint=" + (1...5).map { "2001:db8::\($0)" }.joined(separator: ",")
        )
        #expect(throws: DNSWireError.self) {
            _ = try DNSMessage.response(to: query, serviceBindings: Array(repeating: record, count: 1000))
        }
        let fits = try DNSMessage.response(to: query, serviceBindings: Array(repeating: record, count: 30))
        #expect(try DNSMessage(parsing: fits).serviceBindings().bindings.count == 30)
    }

    @Test func whatParsesEncodesAndReadsBackTheSame() throws {
        for text in [
            "1 . alpn=h2,h3 port=8443 ipv4hint=192.0.2.1",
            "2 svc.example. alpn=h2 no-default-alpn ipv6hint=2001:db8::1",
            "0 alias.example.",
        ] {
            let record = try ServiceBinding(parsing: text)
            #expect(try ServiceBinding(rdata: try record.rdata()) == record, "\(text)")
        }
    }
}
