// `--otlp-endpoint`: the CLI, and only the CLI, picks a tracing backend. With the flag, spans
// of fetch, trace, proxy and serve go to an OpenTelemetry collector over OTLP/HTTP (protobuf) through
// swift-otel; without it nothing is bootstrapped and the library makes no spans at all.
//
// The flag beats the environment: OTEL_* variables naming another endpoint, protocol or exporter are
// ignored. The rest of swift-otel's environment applies (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_EXPORTER_OTLP_HEADERS for a collector's token, which therefore never is a flag value).

//
// The export itself (swift-otel) is in HTTPDNSOTLP, which only the executables link: this module, and the
// tests of its flag rules, build without swift-otel.

import ArgumentParser
import Foundation

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
}
