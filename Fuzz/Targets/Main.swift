// The libFuzzer entry point for every fuzz target, and the invariants they share.
//
// This file and the others in Fuzz/Targets are compiled together with Sources/HTTPDNSCore into one
// module (scripts/fuzz.sh), so the targets reach `internal` and `package` symbols of the core directly.
// One binary holds all targets; HTTPDNS_FUZZ_TARGET picks one (read once). HTTPDNS_FUZZ_TARGET=list
// prints the names and exits. An invariant that breaks calls fatalError, which libFuzzer reports as a
// crash and saves the input.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Every target by the name scripts/fuzz.sh and HTTPDNS_FUZZ_TARGET use.
let fuzzTargets: [(name: String, run: @Sendable ([UInt8]) -> Void)] = [
    ("dns-wire", fuzzDNSWire),
    ("dnspod", fuzzDNSPod),
    ("alibaba-json", fuzzAlibabaJSON),
    ("alibaba-v2", fuzzAlibabaV2),
    ("doh-json", fuzzDoHJSON),
    ("hosts", fuzzHosts),
    ("cache-file", fuzzCacheFile),
    ("proxy-target", fuzzProxyTarget),
    ("resolver-spec", fuzzResolverSpec),
    ("des", fuzzDES),
    ("nat64", fuzzNAT64),
    ("service-list", fuzzServiceList),
    ("svcb", fuzzServiceBinding),
    ("certificate-der", fuzzCertificateDER),
]

/// The target chosen by HTTPDNS_FUZZ_TARGET; exits with a message when it names none.
let selectedFuzzTarget: @Sendable ([UInt8]) -> Void = {
    let names = fuzzTargets.map(\.name)
    guard let raw = getenv("HTTPDNS_FUZZ_TARGET") else {
        printError("set HTTPDNS_FUZZ_TARGET to one of: \(names.joined(separator: " "))")
        exit(2)
    }
    let name = String(cString: raw)
    if name == "list" {
        print(names.joined(separator: "\n"))
        exit(0)
    }
    guard let target = fuzzTargets.first(where: { $0.name == name }) else {
        printError("unknown fuzz target \"\(name)\"; targets: \(names.joined(separator: " "))")
        exit(2)
    }
    return target.run
}()

private func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(
    _ argc: UnsafeMutablePointer<CInt>?,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    _ = selectedFuzzTarget  // fail fast on a bad target name, and answer `list`
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    selectedFuzzTarget(bytes)
    return 0
}

// MARK: shared invariants

/// Like `precondition`, but the message survives -O (libFuzzer prints it with the crash).
func check(
    _ condition: @autoclosure () -> Bool,
    _ message: @autoclosure () -> String,
    file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() { fatalError("invariant broken: \(message())", file: file, line: line) }
}

/// Every address any parser accepts: 4 or 16 bytes by family, and its text form parses back to it.
func checkAddress(_ ip: IPAddress, _ context: @autoclosure () -> String) {
    check(ip.bytes.count == (ip.isIPv6 ? 16 : 4), "\(context()): \(ip) has \(ip.bytes.count) bytes")
    check(IPAddress(ip.description) == ip, "\(context()): \(ip) does not parse back from its description")
    check(IPAddress("[\(ip.description)]") == ip || !ip.isIPv6, "\(context()): [\(ip)] does not parse back")
}

/// A family answer: addresses of the right family, each once, each round-tripping.
func checkFamily(_ answer: FamilyAnswer, ipv6: Bool, _ context: @autoclosure () -> String) {
    check(Set(answer.addresses).count == answer.addresses.count, "\(context()): duplicate addresses")
    for ip in answer.addresses {
        check(ip.isIPv6 == ipv6, "\(context()): \(ip) in the \(ipv6 ? "IPv6" : "IPv4") answer")
        checkAddress(ip, context())
    }
}

/// A host the core accepted: an IP literal (as text) or a normalized valid hostname.
func checkHost(_ host: String, canonicalIP: Bool, _ context: @autoclosure () -> String) {
    if let ip = IPAddress(host) {
        checkAddress(ip, context())
        if canonicalIP { check(ip.description == host, "\(context()): IP host \(host) is not canonical") }
    } else {
        check((try? validatedHostname(host)) == host, "\(context()): host \"\(host)\" is not a valid normalized name")
    }
}

/// Input bytes as text, the way a parser taking a String gets them from the network.
func text(_ bytes: some Collection<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

/// The same bytes with every bare LF turned into CRLF: a text format read line by line must read both
/// the same (in Swift "\r\n" is one Character, equal to neither "\n" nor "\r").
func withCRLF(_ bytes: some Collection<UInt8>) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count + 16)
    var previous: UInt8 = 0
    for b in bytes {
        if b == 0x0A && previous != 0x0D { out.append(0x0D) }
        out.append(b)
        previous = b
    }
    return out
}
