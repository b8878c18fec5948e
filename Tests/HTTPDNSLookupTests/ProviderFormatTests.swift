import Testing
@testable import HTTPDNSCore
@testable import HTTPDNSLookup

@Suite struct DNSPodFormatTests {
    @Test func singleNameWithTTL() throws {
        let r = try DNSPodFormat.parse("119.29.29.29;182.254.116.116,300", names: ["a.com"], query: .ipv4)
        #expect(r["a.com"]?.ipv4?.addresses.map(\.description) == ["119.29.29.29", "182.254.116.116"])
        #expect(r["a.com"]?.ipv4?.ttl == 300)
    }

    @Test func singleNameWithoutTTL() throws {
        let r = try DNSPodFormat.parse("1.2.3.4\n", names: ["a.com"], query: .ipv4)
        #expect(r["a.com"]?.ipv4 == FamilyAnswer(addresses: [IPAddress("1.2.3.4")!], ttl: nil))
    }

    @Test func dualStack() throws {
        let r = try DNSPodFormat.parse("1.2.3.4;5.6.7.8,120-2001:db8::1;2001:db8::2,60", names: ["a.com"], query: .both)
        #expect(r["a.com"]?.ipv4?.addresses.count == 2)
        #expect(r["a.com"]?.ipv4?.ttl == 120)
        #expect(r["a.com"]?.ipv6?.addresses.map(\.description) == ["2001:db8::1", "2001:db8::2"])
        #expect(r["a.com"]?.ipv6?.ttl == 60)
    }

    @Test func dualStackWithNoIPv6() throws {
        let r = try DNSPodFormat.parse("1.2.3.4,120-0", names: ["a.com"], query: .both)
        #expect(r["a.com"]?.ipv6?.addresses == [])
    }

    @Test func zeroMeansNoAnswer() throws {
        #expect(try DNSPodFormat.parse("0", names: ["a.com"], query: .ipv4)["a.com"]?.ipv4 == .empty)
        #expect(try DNSPodFormat.parse("", names: ["a.com"], query: .ipv4)["a.com"]?.ipv4 == .empty)
    }

    @Test func batch() throws {
        let body = "a.com.:1.1.1.1,100\nb.com.:2.2.2.2;3.3.3.3,200\nc.com.:0\nzzz.com.:9.9.9.9,1\n"
        let r = try DNSPodFormat.parse(body, names: ["a.com", "b.com", "c.com"], query: .ipv4)
        #expect(r.count == 3)
        #expect(r["b.com"]?.ipv4?.addresses.count == 2)
        #expect(r["c.com"]?.ipv4 == .empty)
        #expect(r["zzz.com"] == nil)
    }

    @Test func batchDualStack() throws {
        let r = try DNSPodFormat.parse("a.com.:1.1.1.1,100-::1,50", names: ["a.com", "b.com"], query: .both)
        #expect(r["a.com"]?.ipv6?.addresses == [IPAddress("::1")!])
    }

    @Test(arguments: [
        "<html>hijacked</html>",
        "1.2.3.4,abc",
        "::1,60",  // IPv6 in the IPv4 part
        "1.2.3.4-5.6.7.8-9.9.9.9",
        "999.1.1.1,60",
    ])
    func rejectsMalformedAnswers(_ body: String) {
        #expect(throws: AnswerFormatError.self) { try DNSPodFormat.parse(body, names: ["a.com"], query: .ipv4) }
    }

    @Test func rejectsHugeBodies() {
        let body = String(repeating: "1.1.1.1;", count: 40_000)
        #expect(throws: AnswerFormatError.self) { try DNSPodFormat.parse(body, names: ["a.com"], query: .ipv4) }
    }

    @Test func formatParsesBack() throws {
        let answer = HostAnswer(
            ipv4: FamilyAnswer(addresses: [IPAddress("1.2.3.4")!], ttl: 30),
            ipv6: FamilyAnswer(addresses: [IPAddress("::2")!], ttl: 30)
        )
        let text = DNSPodFormat.format(answer, query: .both, withTTL: true)
        #expect(text == "1.2.3.4,30-::2,30")
        #expect(try DNSPodFormat.parse(text, names: ["x"], query: .both)["x"] == answer)
    }
}

@Suite struct JSONFormatTests {
    @Test func alibaba() throws {
        let body = Array(
            #"{"host":"a.com","ips":["1.2.3.4","1.2.3.5"],"ipsv6":["2001:db8::1"],"ttl":60,"origin_ttl":600}"#.utf8
        )
        let r = try AlibabaJSONFormat.parse(body, query: .both)
        #expect(r.ipv4?.addresses.count == 2)
        #expect(r.ipv4?.ttl == 60)
        #expect(r.ipv6?.addresses == [IPAddress("2001:db8::1")!])
    }

    @Test func alibabaEmptyIsNegative() throws {
        let r = try AlibabaJSONFormat.parse(Array(#"{"host":"a.com","ips":[],"ttl":60}"#.utf8), query: .ipv4)
        #expect(r.ipv4 == .empty)
        #expect(r.ipv6 == nil)
    }

    @Test(arguments: [#"{"ips":"1.2.3.4"}"#, #"{"ips":["not-an-ip"]}"#, #"{"ips":["::1"]}"#, "[]", "garbage", ""])
    func alibabaRejectsMalformed(_ body: String) {
        #expect(throws: AnswerFormatError.self) { try AlibabaJSONFormat.parse(Array(body.utf8), query: .ipv4) }
    }

    @Test func dohJSONFollowsCNAMEs() throws {
        let body = Array(
            #"""
            {"Status":0,"TC":false,"RD":true,"RA":true,"Question":[{"name":"www.a.com.","type":1}],
             "Answer":[{"name":"www.a.com.","type":5,"TTL":300,"data":"edge.cdn.net."},
                       {"name":"edge.cdn.net.","type":1,"TTL":20,"data":"203.0.113.9"},
                       {"name":"other.net.","type":1,"TTL":20,"data":"203.0.113.10"}]}
            """#.utf8
        )
        let r = try DoHJSONFormat.parse(body, name: "www.a.com", type: .a)
        #expect(r.addresses == [IPAddress("203.0.113.9")!])
        #expect(r.ttl == 20)
    }

    @Test func dohJSONStatuses() throws {
        #expect(try DoHJSONFormat.parse(Array(#"{"Status":3}"#.utf8), name: "x.com", type: .a) == .empty)
        #expect(throws: AnswerFormatError.self) {
            try DoHJSONFormat.parse(Array(#"{"Status":2}"#.utf8), name: "x.com", type: .a)
        }
        #expect(throws: AnswerFormatError.self) {
            try DoHJSONFormat.parse(
                Array(#"{"Status":0,"Answer":[{"name":"x.com.","type":1,"TTL":1,"data":"::1"}]}"#.utf8),
                name: "x.com",
                type: .a
            )
        }
    }

    @Test func dohJSONFormatParsesBack() throws {
        let answer = FamilyAnswer(addresses: [IPAddress("::1")!], ttl: 9)
        let body = DoHJSONFormat.format(name: "a.test", type: .aaaa, rcode: .noError, answer: answer)
        #expect(try DoHJSONFormat.parse(body, name: "a.test", type: .aaaa) == answer)
    }
}

@Suite struct ResolverSpecTests {
    @Test func parsesEveryKind() throws {
        #expect(try ResolverSpec(parsing: "system") == .system)
        #expect(try ResolverSpec(parsing: "dns:127.0.0.1:5302") == .dns(IPAddress("127.0.0.1")!, port: 5302))
        #expect(try ResolverSpec(parsing: "dns:[::1]:53") == .dns(IPAddress("::1")!, port: 53))
        #expect(try ResolverSpec(parsing: "dns:::1") == .dns(IPAddress("::1")!, port: 53))
        guard case .doh(let e, let post) = try ResolverSpec(parsing: "doh:https://127.0.0.1:8473/dns-query") else {
            Issue.record("not doh")
            return
        }
        #expect(!post)
        #expect(e.port == 8473)
        #expect(e.path == "/dns-query")
        guard case .doh(_, true) = try ResolverSpec(parsing: "doh-post:https://doh.test/dns-query") else {
            Issue.record("not doh-post")
            return
        }
        guard case .dnspod(let d, _) = try ResolverSpec(parsing: "dnspod:http://119.29.29.98/d?id=1") else {
            Issue.record("not dnspod")
            return
        }
        #expect(d.port == 80)
        #expect(d.target(adding: [("dn", "a.com,b.com")]) == "/d?id=1&dn=a.com,b.com")
        guard case .json = try ResolverSpec(parsing: "json:https://[::1]:9443/resolve") else {
            Issue.record("not json")
            return
        }
        guard case .dohJSON = try ResolverSpec(parsing: "doh-json:https://1.1.1.1/dns-query") else {
            Issue.record("not doh-json")
            return
        }
    }

    @Test(arguments: [
        "foo:bar", "nokind", "doh:ftp://x/y", "doh:https://", "doh:not a url", "dns:a.test", "dns:1.2.3.4:0",
        "dns:1.2.3.4:99999", "doh:https://u:p@1.2.3.4/q",
    ])
    func rejectsBadSpecs(_ text: String) {
        #expect(throws: HTTPDNSConfigurationError(.invalidResolverSpec, "")) { try ResolverSpec(parsing: text) }
    }
}

@Suite struct HostPolicyTests {
    @Test func wildcardsMatchSubdomainsOnly() throws {
        let p = try HostPattern("*.example.com")
        #expect(p.matches("a.example.com"))
        #expect(p.matches("A.B.Example.COM."))
        #expect(!p.matches("example.com"))
        #expect(!p.matches("badexample.com"))
        #expect(try HostPattern("*").matches("anything"))
        #expect(throws: HTTPDNSConfigurationError(.invalidHostPattern, "")) { try HostPattern("a*.com") }
        #expect(throws: HTTPDNSConfigurationError(.invalidHostPattern, "")) { try HostPattern("*.a b.com") }
    }

    @Test func defaultSelectsNothingAndLiteralsBypass() {
        #expect(HostPolicy.none.lookup(for: "a.test") == .localDNS)
        #expect(HostPolicy.none.lookup(for: "127.0.0.1") == .literal(IPAddress("127.0.0.1")!))
        #expect(HostPolicy.all.lookup(for: "::1") == .literal(IPAddress("::1")!))
    }

    @Test func exceptWinsAndStrictIsPerName() throws {
        let p = HostPolicy(
            only: [try HostPattern("*.app.com")],
            except: [try HostPattern("cdn.app.com")],
            strict: [try HostPattern("pay.app.com")]
        )
        #expect(p.lookup(for: "api.app.com") == .httpdns(strict: false))
        #expect(p.lookup(for: "pay.app.com") == .httpdns(strict: true))
        #expect(p.lookup(for: "cdn.app.com") == .localDNS)
        #expect(p.lookup(for: "other.com") == .localDNS)
    }

    @Test func validatorDropsUnusableAddresses() throws {
        let v = AnswerValidator(policy: HostPolicy(allowNonGlobal: [try HostPattern("intranet.corp.com")]))
        let answer = FamilyAnswer(addresses: ["0.0.0.0", "10.0.0.1", "93.184.216.34"].map { IPAddress($0)! }, ttl: 60)
        #expect(v.validate(answer, for: "www.example.org").answer.addresses == [IPAddress("93.184.216.34")!])
        #expect(v.validate(answer, for: "www.example.org").rejected.count == 2)
        #expect(v.validate(answer, for: "intranet.corp.com").answer.addresses.count == 2)
        #expect(v.validate(answer, for: "a.test").answer.addresses.count == 2)  // special-use name
    }

    @Test func hostnameValidation() {
        #expect(throws: AnswerFormatError.self) { try validatedHostname("a b.com") }
        #expect(throws: AnswerFormatError.self) { try validatedHostname("") }
        #expect(throws: AnswerFormatError.self) { try validatedHostname(String(repeating: "a.", count: 130)) }
        #expect((try? validatedHostname("A.Test.")) == "a.test")
    }
}
