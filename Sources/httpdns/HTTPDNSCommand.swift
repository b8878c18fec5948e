import ArgumentParser

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
}
