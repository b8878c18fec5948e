import ArgumentParser

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@main
struct HTTPDNSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "httpdns",
        abstract: "Resolve through HTTPDNS / DNS-over-HTTPS and connect by IP while keeping the hostname.",
        discussion: """
            Every name goes through the --resolver list, then --local-dns as the fallback unless \
            --no-fallback; --only / --except narrow which names use HTTPDNS at all.
            """,
        subcommands: [
            ResolveCommand.self, FetchCommand.self, ServeCommand.self, ProxyCommand.self, DemoCommand.self,
            TraceCommand.self,
        ]
    )

    /// `serve` ignores SIGHUP from its first instruction, before its arguments are even parsed: its
    /// docs say SIGHUP never ends it, and an operator's `systemctl reload` just after a start (or a
    /// terminal's hang-up) killed it in the 20–250 ms before it listened (exit 129, which
    /// `Restart=on-failure` does not restart). Once it listens, its reload handler takes SIGHUP over.
    static func main() async {
        if CommandLine.arguments.dropFirst().first == "serve" { signal(SIGHUP, SIG_IGN) }
        await main(nil)
    }
}
