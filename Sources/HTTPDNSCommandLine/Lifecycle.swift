// The one shutdown path of the commands that run until stopped (serve, proxy, the benchmark origin):
// swift-service-lifecycle's ServiceGroup turns SIGTERM and SIGINT into a graceful shutdown, and the
// command's own stop runs then (serve drains, the proxy closes its listener and tunnels). A command that
// can reload (serve: its hosts file) is told of each SIGHUP, as a daemon's operators expect; one that
// cannot keeps SIGHUP's default.

import Logging
import ServiceLifecycle
import UnixSignals

/// Runs until SIGTERM or SIGINT, then `stop`, then returns. With `onHangUp`, each SIGHUP calls it (one
/// at a time, in order) instead of ending the process, until the shutdown begins.
package func runUntilSignalled(
    logger: Logger,
    onHangUp: (@Sendable () async -> Void)? = nil,
    stop: @escaping @Sendable () async -> Void
) async throws {
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: StopOnShutdown(stop: stop))]
    if let onHangUp {
        // It ends with the graceful shutdown; that must not cancel the drain beside it.
        services.append(.init(service: ReloadOnHangUp(reload: onHangUp), successTerminationBehavior: .ignore))
    }
    let group = ServiceGroup(
        configuration: ServiceGroupConfiguration(
            services: services,
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

/// Calls `reload` for each SIGHUP until the graceful shutdown.
private struct ReloadOnHangUp: Service {
    let reload: @Sendable () async -> Void

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            await reload()
        }
    }
}
