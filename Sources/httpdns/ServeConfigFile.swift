// `httpdns serve --config FILE`: the server's settings as one JSON object whose keys are the flags'
// names without the dashes' prefix, e.g.
//
//   {"listen": ["0.0.0.0:8443"], "tls-cert": "/etc/httpdns/cert.pem", "tls-key": "/etc/httpdns/key.pem",
//    "hosts": "/etc/httpdns/hosts", "upstream": "dns:127.0.0.1:53", "metrics": true, "drain-timeout": 15}
//
// A flag given on the command line wins over the file. Paths are taken as the flags take them (relative
// to the working directory). Secrets stay in their own files, named here as on the command line. Every
// mistake is a usage error (exit 64) naming the file and the key: an unknown key (a typo would otherwise
// be silently ignored), a value of the wrong type, a number out of range.

import ArgumentParser
import HTTPDNSCommandLine
import Foundation

struct ServeConfigFile {
    enum Kind {
        case string, strings, number, flag

        var expected: String {
            switch self {
            case .string: "a string"
            case .strings: "a list of strings"
            case .number: "a number"
            case .flag: "true or false"
            }
        }
    }

    /// Every key the file may hold, and its type.
    static let keys: [String: Kind] = [
        "listen": .strings, "tls-cert": .string, "tls-key": .string, "hosts": .string, "upstream": .string,
        "client-subnet": .string,
        "ttl": .number, "max-connections": .number, "max-connections-per-client": .number,
        "max-upstream-lookups": .number, "request-timeout": .number, "idle-timeout": .number,
        "debug": .flag, "dnspod-account": .strings, "dnspod-token": .strings, "alibaba-account": .strings,
        "alibaba-aes-key": .strings,
        "require-auth": .flag, "metrics": .flag, "access-log": .string, "shutdown-delay": .number,
        "drain-timeout": .number, "service-ip": .strings, "service-list-ttl": .number, "https-record": .strings,
    ]

    /// A JSON value of one of the kinds above.
    enum Value: Decodable, Equatable {
        case string(String), strings([String]), number(Double), flag(Bool), other

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let b = try? c.decode(Bool.self) {
                self = .flag(b)
            } else if let n = try? c.decode(Double.self) {
                self = .number(n)
            } else if let s = try? c.decode(String.self) {
                self = .string(s)
            } else if let l = try? c.decode([String].self) {
                self = .strings(l)
            } else {
                self = .other
            }
        }

        func matches(_ kind: Kind) -> Bool {
            switch (self, kind) {
            case (.string, .string), (.strings, .strings), (.number, .number), (.flag, .flag): true
            default: false
            }
        }
    }

    let path: String
    let values: [String: Value]

    static func load(_ path: String) throws -> ServeConfigFile {
        func fail(_ reason: String) -> ValidationError { ValidationError("--config \(path): \(reason)") }
        guard let data = FileManager.default.contents(atPath: path) else { throw fail("cannot read it") }
        guard data.count <= 1 << 20 else { throw fail("\(data.count) bytes; a config file is at most 1 MiB") }
        let values: [String: Value]
        do {
            values = try JSONDecoder().decode([String: Value].self, from: data)
        } catch {
            throw fail("not a JSON object of settings (\(Self.describe(error)))")
        }
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            guard let kind = keys[key] else {
                throw fail("unknown key \"\(key)\" (keys: \(keys.keys.sorted().joined(separator: ", ")))")
            }
            guard value.matches(kind) else { throw fail("\"\(key)\" must be \(kind.expected)") }
        }
        return ServeConfigFile(path: path, values: values)
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): context.debugDescription
        case DecodingError.typeMismatch(_, let context): context.debugDescription
        default: "\(error)"
        }
    }

    /// Fills in what the command line left unset.
    func apply(to command: inout ServeCommand) throws {
        func string(_ key: String) -> String? {
            if case .string(let s) = values[key] { return s }
            return nil
        }
        func strings(_ key: String) -> [String] {
            if case .strings(let l) = values[key] { return l }
            return []
        }
        func flag(_ key: String) -> Bool {
            if case .flag(let b) = values[key] { return b }
            return false
        }
        func number(_ key: String, whole: Bool = false, in range: ClosedRange<Double>) throws -> Double? {
            guard case .number(let n) = values[key] else { return nil }
            guard n.isFinite, range.contains(n), !whole || n.rounded() == n else {
                throw ValidationError(
                    "--config \(path): \"\(key)\" must be \(whole ? "a whole number" : "a number") from \(range.lowerBound) to \(range.upperBound)"
                )
            }
            return n
        }
        if command.listen.isEmpty { command.listen = strings("listen") }
        if command.dnspodAccounts.isEmpty { command.dnspodAccounts = strings("dnspod-account") }
        if command.dnspodTokens.isEmpty { command.dnspodTokens = strings("dnspod-token") }
        if command.alibabaAccounts.isEmpty { command.alibabaAccounts = strings("alibaba-account") }
        if command.alibabaAESKeys.isEmpty { command.alibabaAESKeys = strings("alibaba-aes-key") }
        if command.serviceIPs.isEmpty { command.serviceIPs = strings("service-ip") }
        if command.httpsRecords.isEmpty { command.httpsRecords = strings("https-record") }
        if command.serviceListTTL == nil, let n = try number("service-list-ttl", whole: true, in: 1...1440) {
            command.serviceListTTL = Int(n)
        }
        command.tlsCert = command.tlsCert ?? string("tls-cert")
        command.tlsKey = command.tlsKey ?? string("tls-key")
        command.hosts = command.hosts ?? string("hosts")
        command.upstream = command.upstream ?? string("upstream")
        command.clientSubnet = command.clientSubnet ?? string("client-subnet")
        command.accessLog = command.accessLog ?? string("access-log")
        command.debug = command.debug || flag("debug")
        command.requireAuth = command.requireAuth || flag("require-auth")
        command.metrics = command.metrics || flag("metrics")
        if command.ttl == nil, let n = try number("ttl", whole: true, in: 0...Double(UInt32.max)) {
            command.ttl = UInt32(n)
        }
        if command.maxConnections == nil, let n = try number("max-connections", whole: true, in: 1...1_000_000) {
            command.maxConnections = Int(n)
        }
        if command.maxConnectionsPerClient == nil,
            let n = try number("max-connections-per-client", whole: true, in: 1...1_000_000)
        {
            command.maxConnectionsPerClient = Int(n)
        }
        if command.maxUpstreamLookups == nil, let n = try number("max-upstream-lookups", whole: true, in: 1...1_000_000)
        {
            command.maxUpstreamLookups = Int(n)
        }
        func seconds(_ key: String) throws -> Double? { try number(key, in: ServeCommand.secondsBounds[key]!) }
        command.requestTimeout = try command.requestTimeout ?? seconds("request-timeout")
        command.idleTimeout = try command.idleTimeout ?? seconds("idle-timeout")
        command.shutdownDelay = try command.shutdownDelay ?? seconds("shutdown-delay")
        command.drainTimeout = try command.drainTimeout ?? seconds("drain-timeout")
    }
}
