// Where swift-corelibs-foundation, the oracle on Linux, is itself wrong: it hangs, loses a body, or
// breaks an RFC that Apple's URL loading system follows. Copying those defects would make HTTPDNS differ
// from the platform apps ship on, so on Linux these cases are judged against Apple's documented
// behaviour instead: the HTTPDNS side must produce what `expected` accepts, and the plain side's
// result is printed beside it. On macOS there is no such table: Apple's stack is the oracle.
// A defect corelibs fixes shows up as a plain SAME (the table is then stale, and is printed as such).

struct CorelibsDefect: Sendable {
    /// What corelibs does wrong.
    let why: String
    /// Whether the HTTPDNS side's result is what Apple's URL loading system documents.
    let expected: @Sendable (String) -> Bool
}

/// What Apple's URL loading system does with a response cached for 600 s: the second request is
/// answered from the cache, and the origin sees one request.
private let answeredFromCache: @Sendable (String) -> Bool = {
    $0.contains("second=status=200 content-type=text/plain body=[fresh 1]") && $0.hasSuffix("origin=count=1")
}

/// Apple's URLSession asks the delegate about a certificate it cannot trust, and fails the task with
/// `code` unless the delegate accepts it.
private func askedAboutTrust(failingWith code: Int) -> @Sendable (String) -> Bool {
    { $0 == "error=\(code) events=challenge(NSURLAuthenticationMethodServerTrust realm=- failures=0) body=[]" }
}

let corelibsDefects: [String: CorelibsDefect] = [
    "server-trust-untrusted-without-delegate": .init(
        why: "reports an untrusted certificate as -1 (unknown), not -1202 (serverCertificateUntrusted)",
        expected: { $0 == "error=-1202" }
    ),
    "server-trust-untrusted-default-handling": .init(
        why: "never asks the delegate about a server's certificate, and reports an untrusted one as -1",
        expected: askedAboutTrust(failingWith: -1202)
    ),
    "server-trust-untrusted-reject-protection-space": .init(
        why: "never asks the delegate about a server's certificate, and reports an untrusted one as -1",
        expected: askedAboutTrust(failingWith: -1202)
    ),
    "server-trust-untrusted-password-credential": .init(
        why: "never asks the delegate about a server's certificate, and reports an untrusted one as -1",
        expected: askedAboutTrust(failingWith: -1202)
    ),
    "server-trust-untrusted-cancel": .init(
        why: "never asks the delegate about a server's certificate, and reports an untrusted one as -1",
        expected: askedAboutTrust(failingWith: -999)
    ),
    "server-trust-asked-once-per-connection": .init(
        why: "never asks the delegate about a server's certificate, so a delegate cannot accept one (or pin)",
        expected: {
            $0 == "statuses=[200, 200, 200] events=challenge(NSURLAuthenticationMethodServerTrust realm=- failures=0)"
        }
    ),
    "cache-fresh-use-protocol-policy": .init(
        why: "never answers from its URL cache (a fresh response is fetched again)",
        expected: answeredFromCache
    ),
    "cache-return-cache-else-load": .init(
        why: "never answers from its URL cache, whatever the cache policy",
        expected: answeredFromCache
    ),
    "cache-return-cache-dont-load-cached": .init(
        why: "never answers from its URL cache, and loads from the origin under returnCacheDataDontLoad",
        expected: answeredFromCache
    ),
    "delete-request": .init(
        why: "sends Content-Length: 0 with a DELETE that has no body (RFC 9110 §8.6: a client should not)",
        expected: { $0.contains("method=DELETE") && !$0.contains("content-length") }
    ),
    "body-stream-with-length": .init(
        why: "frames a body stream with both Content-Length and chunked encoding, which the origin refuses (400)",
        expected: {
            $0.hasPrefix("status=200") && $0.contains("body=3000 bytes") && $0.contains("content-length: 3000")
        }
    ),
    "redirect-307-post": .init(
        why: "drops the body when it follows a 307 (RFC 9110 §15.4.8: method and content are kept)",
        expected: { $0.contains("redirect(307->/echo POST)") && $0.contains("body=9 bytes") }
    ),
    "redirect-308-post": .init(
        why: "drops the body when it follows a 308 (RFC 9110 §15.4.9: method and content are kept)",
        expected: { $0.contains("redirect(308->/echo POST)") && $0.contains("body=9 bytes") }
    ),
    "cookie-handling-off-for-request": .init(
        why: "sends stored cookies although the request's httpShouldHandleCookies is false",
        expected: { $0 == "set=200 sent=[]" }
    ),
    "timeout-resource": .init(
        why: "does not enforce timeoutIntervalForResource (the 4 s body arrives under a 1 s limit)",
        expected: { $0 == "error=-1001" }
    ),
    "auth-basic-get": .init(
        why: "hands the 401 and its body to the delegate before asking for credentials",
        expected: {
            $0.hasPrefix(
                "error=none events=challenge(NSURLAuthenticationMethodHTTPBasic realm=conformance failures=0),response(200)"
            )
                && $0.hasSuffix("body=[welcome, method=GET body=0]")
        }
    ),
    "auth-basic-post": .init(
        why: "hands the 401 and its body to the delegate before asking for credentials",
        expected: {
            $0.hasPrefix(
                "error=none events=challenge(NSURLAuthenticationMethodHTTPBasic realm=conformance failures=0),response(200)"
            )
                && $0.hasSuffix("body=[welcome, method=POST body=9]")
        }
    ),
    "auth-basic-wrong-password": .init(
        why: "hangs once a credential is refused",
        expected: { $0.contains("failures=1)") && $0.hasSuffix("response(401) status=401 body=[who are you]") }
    ),
    "auth-basic-cancel": .init(
        why: "hands the 401 to the delegate before the challenge it cancels",
        expected: {
            $0
                == "error=-999 events=challenge(NSURLAuthenticationMethodHTTPBasic realm=conformance failures=0) status=-1 body=[]"
        }
    ),
    "auth-basic-default-handling": .init(
        why: "hangs when the delegate asks for default handling and no credential is stored",
        expected: {
            $0
                == "error=none events=challenge(NSURLAuthenticationMethodHTTPBasic realm=conformance failures=0),response(401) "
                + "status=401 body=[who are you]"
        }
    ),
    "auth-digest-get": .init(
        why: "has no Digest authentication (it stops the process when a delegate answers such a challenge)",
        expected: {
            $0
                == "error=none events=challenge(NSURLAuthenticationMethodHTTPDigest realm=conformance failures=0),response(200) "
                + "status=200 body=[welcome, digest]"
        }
    ),
    "auth-stored-credential-default-handling": .init(
        why:
            "finds a stored credential only by the protection space object itself, so a stored default credential is never used (and the task hangs)",
        expected: { $0 == "error=none status=200 body=[welcome, method=GET body=0]" }
    ),
    "auth-without-delegate": .init(
        why: "hangs on a 401 when the session has no delegate",
        expected: { $0 == "status=401 content-type=text/plain body=[who are you]" }
    ),
]
