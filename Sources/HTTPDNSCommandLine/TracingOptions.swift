// `--otlp-endpoint`: the CLI, and only the CLI, picks a tracing backend. With the flag, spans
// of fetch, trace, proxy and serve go to an OpenTelemetry collector over OTLP/HTTP (protobuf) through
// swift-otel; without it nothing is bootstrapped and the library makes no spans at all.
//
// The flag beats the environment: OTEL_* variables naming another endpoint, protocol or exporter are
// ignored. The rest of swift-otel's environment applies (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_EXPORTER_OTLP_HEADERS for a collector's token, which therefore never is a flag value).

import ArgumentParser
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

package struct TracingOptions: ParsableArguments {
    package init() {}

    @Option(
        name: .customLong("otlp-endpoint"),
        help: ArgumentHelp(
            "Export spans over OTLP/HTTP to this collector (e.g. http://127.0.0.1:4318; /v1/traces is added).",
            valueName: "URL"
        )
    )
    package var otlpEndpoint: String?

    package func validate() throws {
        guard let otlpEndpoint else { return }
        _ = try Self.tracesURL(otlpEndpoint)
    }

    /// The traces URL for a collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is read: `/v1/traces`
    /// added, unless the URL already ends with it.
    package static func tracesURL(_ endpoint: String) throws -> String {
        guard let url = URL(string: endpoint), url.scheme == "http" || url.scheme == "https", url.host != nil,
            url.query == nil
        else {
            throw ValidationError(
                "--otlp-endpoint: give the collector's http:// or https:// URL, e.g. http://127.0.0.1:4318"
            )
        }
        if endpoint.hasSuffix("/v1/traces") { return endpoint }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }

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
