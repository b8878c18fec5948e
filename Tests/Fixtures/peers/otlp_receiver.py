#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver for the tests: decodes what `httpdns --otlp-endpoint` sends
with the official opentelemetry-proto classes, the decoder a collector uses, and writes one JSON line
per span to OUT. A body the classes cannot decode is answered 400 and recorded as {"error": ...}, so a
test sees it.

    otlp_receiver.py HOST PORT OUT
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
lock = Lock()


def value(v):
    """An AnyValue as plain JSON."""
    which = v.WhichOneof("value")
    if which == "array_value":
        return [value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which) if which else None


def spans(request):
    for resource_spans in request.resource_spans:
        resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                yield {
                    "service": resource.get("service.name"),
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": KINDS.get(s.kind, str(s.kind)),
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "attributes": {kv.key: value(kv.value) for kv in s.attributes},
                    "events": [{"name": e.name, "time": e.time_unix_nano} for e in s.events],
                    "status": s.status.code,
                }


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = trace_service_pb2.ExportTraceServiceRequest()
        try:
            if self.path != "/v1/traces":
                raise ValueError("POST to %s, not /v1/traces" % self.path)
            if self.headers.get("content-type") != "application/x-protobuf":
                raise ValueError("content-type %s" % self.headers.get("content-type"))
            request.ParseFromString(body)
            lines = [json.dumps(s) for s in spans(request)]
            status = 200
        except Exception as e:  # noqa: BLE001 - any failure is the test's finding
            lines = [json.dumps({"error": str(e)})]
            status = 400
        with lock, open(OUT, "a") as f:
            f.write("".join(line + "\n" for line in lines))
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(status)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    host, port, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ThreadingHTTPServer((host, port), Handler).serve_forever()
