// `--otlp-endpoint`'s export: with the flag, spans of fetch, trace, proxy and serve go to an OpenTelemetry
// collector over OTLP/HTTP (protobuf) through swift-otel. Its own module, linked by the executables
// alone, so the flag rules (HTTPDNSCommandLine) and their tests build without swift-otel and SwiftProtobuf.
//
// The flag beats the environment: OTEL_* variables naming another endpoint, protocol or exporter are
// ignored. The rest of swift-otel's environment applies (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_EXPORTER_OTLP_HEADERS for a collector's token, which therefore never is a flag value).

import ArgumentParser
import Foundation
import HTTPDNSCommandLine
import Logging
import OTel
import ServiceLifecycle

extension TracingOptions {
    /// Runs `body` with spans exported when `--otlp-endpoint` is given: the tracer is bootstrapped
    /// before `body` runs (so the `HTTPDNS` it makes picks it up), and the spans still queued are sent
    /// before this returns, whether `body` threw or not.
    package func exporting<T: Sendable>(logger: Logger, _ body: () async throws -> T) async throws -> T {
        guard let otlpEndpoint else { return try await body() }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "httpdns"
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = logger.logLevel <= .debug ? .debug : .warning
        // A collector that cannot be reached delays the command's exit by this much at most: the
        // exporter retries with backoff within it.
        configuration.traces.otlpExporter.timeout = .seconds(5)
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = try Self.tracesURL(otlpEndpoint)
        let environment = ProcessInfo.processInfo.environment.filter { key, _ in
            !(key.hasSuffix("_ENDPOINT") || key.hasSuffix("_PROTOCOL") || key.hasSuffix("_EXPORTER")
                || key == "OTEL_SDK_DISABLED" || key == "OTEL_TRACES_SAMPLER")
        }
        let service: any Service
        do {
            service = try OTel.bootstrap(configuration: configuration, environment: environment)
        } catch {
            throw ValidationError("--otlp-endpoint: \(error)")
        }
        let group = ServiceGroup(services: [service], logger: logger)
        let running = Task { try await group.run() }
        defer { running.cancel() }
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        // A graceful shutdown makes the batch processor export what it still holds, then stop.
        await group.triggerGracefulShutdown()
        do {
            try await running.value
        } catch {
            logger.warning("exporting spans failed", metadata: ["error": "\(error)"])
        }
        return try result.get()
    }
}
