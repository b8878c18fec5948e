// TracingOptions, `--otlp-endpoint` (docs/CLI.md, "Spans to an OpenTelemetry collector"): the collector's
// http:// or https:// base URL, to which `/v1/traces` is added unless it is already there; anything else
// is a usage error. The export itself is in HTTPDNSOTLP (swift-otel), which the executables alone link;
// the CLI's tracing tests export to a real collector.

import ArgumentParser
import HTTPDNSCommandLine
import Testing

@Suite struct TracingOptionsTests {
    @Test(arguments: [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
        ("https://collector.example.com/otlp", "https://collector.example.com/otlp/v1/traces"),
        ("https://collector.example.com/v1/traces", "https://collector.example.com/v1/traces"),
    ])
    func theTracesPathIsAddedOnce(_ endpoint: String, _ traces: String) throws {
        #expect(try TracingOptions.tracesURL(endpoint) == traces)
    }

    @Test(arguments: [
        "ftp://collector.example.com", "grpc://127.0.0.1:4317", "collector.example.com:4318",
        "http://127.0.0.1:4318/?token=x", "",
    ])
    func anEndpointThatIsNotAnHTTPCollectorURLIsRefused(_ endpoint: String) throws {
        let error = try #require(throws: ValidationError.self) { try TracingOptions.tracesURL(endpoint) }
        #expect(
            error.message == "--otlp-endpoint: give the collector's http:// or https:// URL, e.g. http://127.0.0.1:4318"
        )
    }

    @Test func theFlagIsOptionalKeptAsGivenAndABadOneIsAUsageError() throws {
        #expect(try TracingOptions.parse([]).otlpEndpoint == nil)
        #expect(
            try TracingOptions.parse(["--otlp-endpoint", "http://127.0.0.1:4318"]).otlpEndpoint
                == "http://127.0.0.1:4318"
        )
        #expect(
            usageError(TracingOptions.self, ["--otlp-endpoint", "127.0.0.1:4318/?x=1"])
                == "--otlp-endpoint: give the collector's http:// or https:// URL, e.g. http://127.0.0.1:4318"
        )
    }
}
