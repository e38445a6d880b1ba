"""A minimal OTLP/HTTP (protobuf) receiver for the telemetry tests.

Listens on 127.0.0.1 (an OS-chosen port), prints `listening PORT`, then one JSON line per
span and per metric data series it decodes with the `opentelemetry-proto` package:
  {"signal": "span", "name", "trace_id", "span_id", "parent_span_id", "kind", "service", "attributes"}
  {"signal": "metric", "name", "unit", "points": [{"attributes", "count", "sum"}]}
`GET /tool` answers a small JSON body, so the same process serves as a REST tool.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(pairs):
    return {pair.key: value_of(pair.value) for pair in pairs}


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def spans_of(body):
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    for resource_spans in request.resource_spans:
        service = attributes(resource_spans.resource.attributes).get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                emit(
                    {
                        "signal": "span",
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "service": service,
                        "attributes": attributes(span.attributes),
                    }
                )


def metrics_of(body):
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                points = []
                if kind == "histogram":
                    for point in metric.histogram.data_points:
                        points.append(
                            {
                                "attributes": attributes(point.attributes),
                                "count": point.count,
                                "sum": point.sum,
                            }
                        )
                emit(
                    {
                        "signal": "metric",
                        "name": metric.name,
                        "unit": metric.unit,
                        "kind": kind,
                        "points": points,
                    }
                )


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        try:
            if self.path == "/v1/traces":
                spans_of(body)
            elif self.path == "/v1/metrics":
                metrics_of(body)
            else:
                self.send_response(404)
                self.end_headers()
                return
        except Exception as error:  # a body that does not decode is the test's failure
            emit({"signal": "error", "path": self.path, "error": str(error)})
            self.send_response(400)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        body = json.dumps({"forecast": "sunny"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
