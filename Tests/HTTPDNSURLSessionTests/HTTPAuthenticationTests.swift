// HTTP authentication's pure rules: challenges read from WWW-Authenticate, the scheme chosen, and the
// Authorization values, checked against the examples of RFC 7617 (Basic) and RFC 7616 §3.9.1 (Digest,
// MD5 and SHA-256); and which credential a delegate's answer sends.

import Foundation
@testable import HTTPDNSURLSession
import NIOHTTP1
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct HTTPAuthenticationTests {
    /// RFC 7616 §3.9.1's challenge, as one header with two challenges.
    static let rfc7616 =
        #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS", Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=MD5, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#
    static let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"

    @Test func digestAnswersMatchRFC7616() throws {
        let challenges = AuthChallenge.parse([Self.rfc7616])
        #expect(challenges.count == 2)
        #expect(challenges.allSatisfy { $0.scheme == "digest" && $0.realm == "http-auth@example.org" })
        let expected = [
            "SHA-256": "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
            "MD5": "8ca523f5e9506fed4657c9700eebdbec",
        ]
        for challenge in challenges {
            let value = try #require(
                challenge.authorization(
                    user: "Mufasa",
                    password: "Circle of Life",
                    method: "GET",
                    uri: "/dir/index.html",
                    cnonce: Self.cnonce
                )
            )
            let algorithm = try #require(challenge.parameters["algorithm"])
            #expect(value.hasPrefix("Digest username=\"Mufasa\""))
            #expect(value.contains("response=\"\(expected[algorithm]!)\""), "\(value)")
            #expect(value.contains("qop=auth,") && value.contains("nc=00000001"))
            #expect(value.contains(#"opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#))
        }
    }

    @Test func basicAnswerMatchesRFC7617() throws {
        let challenge = try #require(AuthChallenge.preferred(AuthChallenge.parse([#"Basic realm="WallyWorld""#])))
        #expect(challenge.realm == "WallyWorld")
        #expect(challenge.authenticationMethod == NSURLAuthenticationMethodHTTPBasic)
        #expect(
            challenge.authorization(user: "Aladdin", password: "open sesame", method: "GET", uri: "/")
                == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        )
    }

    @Test func digestIsPreferredAndUnspokenSchemesAreLeftAlone() throws {
        let mixed = AuthChallenge.parse([#"Basic realm="a""#, #"Bearer realm="b", Digest realm="c", nonce="n""#])
        #expect(mixed.map(\.scheme) == ["basic", "bearer", "digest"])
        #expect(AuthChallenge.preferred(mixed)?.scheme == "digest")
        // Only schemes we cannot answer: no challenge for the delegate, the 401 is the response.
        #expect(AuthChallenge.preferred(AuthChallenge.parse(["Bearer", #"Negotiate"#])) == nil)
        // Digest with an algorithm we do not speak, or only auth-int: not answered, Basic instead.
        let odd = AuthChallenge.parse([#"Digest nonce="n", algorithm=SHA-512-256, Basic realm="x""#])
        #expect(AuthChallenge.preferred(odd)?.scheme == "basic")
        let authInt = try #require(AuthChallenge.parse([#"Digest nonce="n", qop="auth-int""#]).first)
        #expect(authInt.authorization(user: "u", password: "p", method: "GET", uri: "/") == nil)
    }

    @Test func malformedHeadersNeitherCrashNorInventChallenges() {
        for header in ["", ",,,", "=", #"Basic realm="unterminated"#, "Basic realm=", "\u{0}\u{1}", "Digest ====="] {
            let parsed = AuthChallenge.parse([header])
            #expect(parsed.count <= 1, "\(header): \(parsed)")
        }
        #expect(AuthChallenge.parse([#"Basic realm="a \"quoted\" realm""#]).first?.realm == #"a "quoted" realm"#)
    }

    @Test func theCredentialSentFollowsTheDelegatesAnswer() {
        let given = URLCredential(user: "alice", password: "wonderland", persistence: .none)
        let stored = URLCredential(user: "bob", password: "builder", persistence: .forSession)
        typealias P = HTTPDNSURLProtocol
        #expect(P.chosenCredential((.useCredential, given), proposed: stored, failures: 3) === given)
        // useCredential without a credential: nothing to send (the 401 is delivered).
        #expect(P.chosenCredential((.useCredential, nil), proposed: stored, failures: 0) == nil)
        // Default handling: the stored credential, on the first round only.
        #expect(P.chosenCredential((.performDefaultHandling, nil), proposed: stored, failures: 0) === stored)
        #expect(P.chosenCredential((.performDefaultHandling, nil), proposed: stored, failures: 1) == nil)
        #expect(P.chosenCredential((.rejectProtectionSpace, given), proposed: stored, failures: 0) == nil)
        #expect(P.chosenCredential((.cancelAuthenticationChallenge, given), proposed: stored, failures: 0) == nil)
    }

    @Test func aDigestChallengeIsReadWholeFromAResponsesFields() throws {
        // One field value with several parameters, as servers send it: none may be lost to a split at
        // its commas (the conformance suite found that: the nonce was, and no credential went out).
        var headers = HTTPHeaders()
        headers.add(name: "WWW-Authenticate", value: #"Digest realm="r", qop="auth", nonce="n0nce", opaque="0p""#)
        headers.add(name: "WWW-Authenticate", value: #"Basic realm="r""#)
        let challenge = try #require(AuthChallenge.preferred(in: headers))
        #expect(challenge.scheme == "digest")
        #expect(challenge.parameters["nonce"] == "n0nce")
        #expect(challenge.authorization(user: "u", password: "p", method: "GET", uri: "/") != nil)
    }
}
