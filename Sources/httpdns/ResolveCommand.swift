import ArgumentParser
import HTTPDNSCommandLine
import HTTPDNSKit
import Foundation
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup

struct ResolveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve names through HTTPDNS and print the addresses (like dig +short).",
        discussion: """
            Exit status: 0 when every name resolved, 1 when any failed, 64 for a usage error.
            Example: httpdns resolve a.test --resolver doh:https://127.0.0.1:8473/dns-query --cacert ca.pem
            """
    )

    @Argument(help: "Names to resolve.")
    var names: [String]

    @Option(
        name: .customLong("type"),
        help:
            "Address families: a, aaaa or both (default: those the network can use; both when unsure); or https: the HTTPS records (RFC 9460), an alias followed."
    )
    var records: RecordChoice?

    /// The address families asked; nil for the network's (or for --type https).
    var type: AddressQuery? {
        if case .addresses(let query) = records { return query }
        return nil
    }

    @Flag(
        name: [.customShort("v"), .customLong("verbose")],
        help: "Also print the network: which families have a route, its NAT64 prefix, which records are asked for."
    )
    var verbose = false

    @Flag(help: "Print a JSON array of {name, addresses, ttl, source, elapsedMs}.")
    var json = false

    @Flag(
        help:
            "Also ask --local-dns and give a verdict: consistent, HIJACKED, BLOCKED (no address from it) or unverified."
    )
    var compare = false

    @OptionGroup var resolver: ResolverOptions

    func validate() throws {
        guard !resolver.resolvers.isEmpty else {
            throw ValidationError("--resolver: give at least one, e.g. --resolver doh:https://127.0.0.1:8473/dns-query")
        }
        guard !names.isEmpty else { throw ValidationError("give at least one NAME to resolve") }
        if records == .https, compare {
            throw ValidationError("--compare compares addresses: leave out --type https, or --compare")
        }
    }

    struct Output: Encodable {
        var name: String
        var addresses: [String]
        var ttl: UInt32?
        var source: String?
        var elapsedMs: Double?
        /// Seconds past its TTL, for an expired answer served (--serve-expired).
        var expiredFor: Double?
        var error: String?
        var localDNS: Local?
        /// `--compare`: the verdict's word, and true for `hijacked` and `blocked`.
        var verdict: String?
        var hijacked: Bool?
        /// What to do about `error`, in this tool's flags: printed on stderr, not part of the JSON.
        var advice: String?

        enum CodingKeys: String, CodingKey {
            case name, addresses, ttl, source, elapsedMs, expiredFor, error, localDNS, verdict, hijacked
        }

        struct Local: Encodable {
            var addresses: [String]
            var source: String?
            var error: String?
        }
    }

    func run() async throws {
        let httpdns: HTTPDNS
        do {
            httpdns = try self.resolver.makeHTTPDNS()
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("\(error)")
        }
        await self.resolver.fetchServiceLists(httpdns)
        if records == .https { return try await printServiceBindings(httpdns) }
        let resolver = httpdns.resolver
        let type = self.type
        let compare = self.compare
        let options = self.resolver
        // Several names: in the first resolver's batch form where it has one (DNSPod's `dn=a,b`,
        // Alibaba's 5-name queries), both families in one request where its API allows.
        let batch = !compare && names.count > 1 ? await resolver.resolve(names, type) : [:]
        // Names are resolved concurrently, printed in the order given.
        let outputs = await withTaskGroup(of: (Int, Output).self) { group in
            for (i, name) in names.enumerated() {
                group.addTask {
                    var out = Output(name: name, addresses: [])
                    let trusted: Result<Resolution, ResolverError>
                    if let result = batch[name] {
                        trusted = result
                    } else if compare {
                        let report = await resolver.compare(name, type)
                        trusted = report.httpdns
                        switch report.localDNS {
                        case .success(let r):
                            out.localDNS = .init(
                                addresses: (r.ipv4 + r.ipv6).map(\.description),
                                source: r.source.description
                            )
                        case .failure(let e):
                            out.localDNS = .init(addresses: [], error: e.description)
                        }
                        out.verdict = report.verdict.rawValue
                        out.hijacked = report.hijacked
                    } else {
                        do {
                            trusted = .success(try await resolver.resolve(name, type))
                        } catch let e as ResolverError {
                            trusted = .failure(e)
                        } catch {
                            trusted = .failure(ResolverError(.allProvidersFailed, name: name, "\(error)"))
                        }
                    }
                    switch trusted {
                    case .success(let r):
                        out.addresses = (r.ipv4 + r.ipv6).map(\.description)
                        out.ttl = r.ttl
                        out.source = r.source.description
                        out.elapsedMs = (r.elapsed.milliseconds * 1000).rounded() / 1000
                        out.expiredFor = r.expiredFor.map { ($0.seconds * 1000).rounded() / 1000 }
                    case .failure(let e):
                        out.error = e.description
                        out.advice = options.advice(for: e)
                    }
                    return (i, out)
                }
            }
            var all: [(Int, Output)] = []
            for await item in group { all.append(item) }
            return all.sorted { $0.0 < $1.0 }.map(\.1)
        }
        let path = verbose ? await resolver.path.settled() : nil
        await httpdns.shutdown()

        for out in outputs where out.error != nil {
            FileHandle.standardError.write(Data("httpdns: \(out.error!)\(out.advice ?? "")\n".utf8))
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(outputs), as: UTF8.self))
        } else {
            if let path {
                print(";; \(path.summary)\(self.type.map { " (--type \($0.records))" } ?? "")")
            }
            for out in outputs {
                if out.error == nil {
                    let ttl = out.ttl.map { "\($0)s" } ?? "unknown"
                    let expired = out.expiredFor.map { String(format: " expired=%.0fs", $0) } ?? ""
                    print(
                        ";; \(out.name) ttl=\(ttl) source=\(out.source ?? "")\(expired) \(String(format: "%.2f", out.elapsedMs ?? 0))ms"
                    )
                    for a in out.addresses {
                        // -v: how an IPv4 address is reached on an IPv6-only network with NAT64.
                        let via = path.flatMap { p in
                            IPAddress(a).flatMap { p.connectable(ipv4: [$0], ipv6: []).ipv6.first }
                        }
                        print(via.map { "\(a) ;; via NAT64 \($0)" } ?? a)
                    }
                }
                if let local = out.localDNS {
                    let answer =
                        local.error ?? (local.addresses.isEmpty ? "no address" : local.addresses.joined(separator: " "))
                    // The verdict's word; the two that mean "do not trust LocalDNS here" in capitals.
                    let word = out.verdict ?? "unverified"
                    let verdict = out.hijacked == true ? word.uppercased() : word
                    print(";; \(out.name) localdns(\(self.resolver.localDNS)): \(answer) -> \(verdict)")
                }
            }
        }
        if outputs.contains(where: { $0.error != nil }) { throw ExitCode(1) }
    }
}

extension ResolveCommand {
    /// What `--type` asks for.
    enum RecordChoice: Equatable, ExpressibleByArgument {
        case addresses(AddressQuery)
        case https

        init?(argument: String) {
            if argument.lowercased() == "https" {
                self = .https
            } else if let query = AddressQuery(argument: argument) {
                self = .addresses(query)
            } else {
                return nil
            }
        }

        static var allValueStrings: [String] { AddressQuery.allCases.map(\.argument) + ["https"] }
    }

    /// One name's HTTPS records, as `--json` prints them.
    struct BindingsOutput: Encodable {
        var name: String
        var aliases: [String] = []
        /// Each endpoint in the presentation form (`1 . alpn="h2" port=8443`).
        var records: [String] = []
        var source: String?
        var error: String?
    }

    /// `--type https`: each name's HTTPS records, in the order given. Exit 1 when a lookup failed.
    func printServiceBindings(_ httpdns: HTTPDNS) async throws {
        let resolver = httpdns.resolver
        var outputs: [BindingsOutput] = []
        for name in names {
            var out = BindingsOutput(name: name)
            do {
                let found = try await resolver.serviceBindings(for: name)
                out.aliases = found.aliases
                out.records = found.endpoints.map(\.description)
                out.source = found.source.description
            } catch {
                out.error = "\(error)"
            }
            outputs.append(out)
        }
        await httpdns.shutdown()
        for out in outputs where out.error != nil {
            FileHandle.standardError.write(Data("httpdns: \(out.error!)\n".utf8))
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(outputs), as: UTF8.self))
        } else {
            for out in outputs where out.error == nil {
                let chain = ([out.name] + out.aliases).joined(separator: " -> ")
                print(";; \(chain) HTTPS source=\(out.source ?? "")\(out.records.isEmpty ? " (no record)" : "")")
                for record in out.records { print(record) }
            }
        }
        if outputs.contains(where: { $0.error != nil }) { throw ExitCode(1) }
    }
}

extension AddressQuery: ExpressibleByArgument {
    /// The `--type` word: `a`, `aaaa` or `both`.
    var argument: String {
        switch self {
        case .ipv4: return "a"
        case .ipv6: return "aaaa"
        case .both: return "both"
        }
    }

    public init?(argument: String) {
        guard let query = Self.allCases.first(where: { $0.argument == argument.lowercased() }) else { return nil }
        self = query
    }

    public var defaultValueDescription: String { argument }

    public static var allValueStrings: [String] { allCases.map(\.argument) }
}
