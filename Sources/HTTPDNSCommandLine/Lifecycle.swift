// The one shutdown path of the commands that run until stopped (serve, proxy, the benchmark origin):
// swift-service-lifecycle's ServiceGroup turns SIGTERM and SIGINT into a graceful shutdown, and the
// command's own stop runs then (serve drains, the proxy closes its listener and tunnels).

import Logging
import ServiceLifecycle

/// Runs until SIGTERM or SIGINT, then `stop`, then returns.
package func runUntilSignalled(logger: Logger, stop: @escaping @Sendable () async -> Void) async throws {
    let group = ServiceGroup(
        configuration: ServiceGroupConfiguration(
            services: [.init(service: StopOnShutdown(stop: stop))],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
    )
    try await group.run()
}

/// Waits for the group's graceful shutdown, then stops what the command runs.
private struct StopOnShutdown: Service {
    let stop: @Sendable () async -> Void

    func run() async throws {
        try? await gracefulShutdown()
        await stop()
    }
}
