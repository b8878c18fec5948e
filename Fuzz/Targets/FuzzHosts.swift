// hosts: HostsFile.parse on hostile text.
//
// Whatever parses: every name is valid and normalized, every address list non-empty with each address
// once, and the table written back as a hosts file parses to itself; with CRLF line ends the file reads
// the same.

func fuzzHosts(_ data: [UInt8]) {
    let table = try? HostsFile.parse(text(data))
    let crlf = try? HostsFile.parse(text(withCRLF(data)))
    check(
        table == crlf,
        "the file reads otherwise with CRLF line ends: \(String(describing: table)) vs \(String(describing: crlf))"
    )
    guard let table else { return }
    var lines: [String] = []
    for (name, addresses) in table.sorted(by: { $0.key < $1.key }) {
        check((try? validatedHostname(name)) == name, "hosts name \"\(name)\" is not valid and normalized")
        check(!addresses.isEmpty, "\(name) has no address")
        check(Set(addresses).count == addresses.count, "\(name) lists an address twice")
        for ip in addresses {
            checkAddress(ip, "hosts entry for \(name)")
            lines.append("\(ip)\t\(name)")
        }
    }
    do {
        let back = try HostsFile.parse(lines.joined(separator: "\n"))
        check(back == table, "hosts table changed when written back")
    } catch {
        fatalError("invariant broken: written-back hosts file does not parse: \(error)")
    }
}
