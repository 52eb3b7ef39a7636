"""A small OTLP/HTTP router that stands in for the OpenTelemetry Collector gateway's
``loadbalancing`` exporter with ``routing_key: traceID``.

Each export request is decoded and each trace's spans re-posted to the collector its trace id
picks on the ring (``trace_id % len(ring)``). ``ring`` may be changed while it runs (a collector
added or gone): what the gateway's resolver does. A collector's refusal (503 + ``Retry-After``)
goes back to the exporter as it came, so the exporter's own retry sends the request again.
``by_request=True`` is the broken alternative, for contrast: whole requests round-robin.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from otel_session.core.journal import run_id_from_trace_id

__all__ = ["TraceIdRouter"]


class TraceIdRouter:
    """OTLP/HTTP in on loopback; each trace to ``ring[trace_id % len(ring)]`` (OTLP/HTTP traces URLs)."""

    def __init__(self, ring: list[str], *, by_request: bool = False) -> None:
        self.ring = list(ring)
        self.by_request = by_request
        self.routed: dict[str, int] = {}
        """Each run (trace) and the index on the ring it was last sent to."""
        self.answers: dict[str, list[int]] = defaultdict(list)
        """Each target's answers (HTTP statuses), in order."""
        self.requests = 0
        router = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status, headers, payload = router.route(ExportTraceServiceRequest.FromString(body))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def refused_by(self, target: str) -> int:
        return sum(status == 503 for status in self.answers[target])

    def route(self, request: ExportTraceServiceRequest) -> tuple[int, list[tuple[str, str]], bytes]:
        with self._lock:
            self.requests += 1
            ring = list(self.ring)
        parts: dict[str, ExportTraceServiceRequest] = defaultdict(ExportTraceServiceRequest)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    trace_id = int.from_bytes(span.trace_id, "big")
                    index = (self.requests if self.by_request else trace_id) % len(ring)
                    self.routed[run_id_from_trace_id(trace_id)] = index
                    out = parts[ring[index]].resource_spans.add()
                    out.resource.CopyFrom(resource_spans.resource)
                    out.schema_url = resource_spans.schema_url
                    scope = out.scope_spans.add()
                    scope.scope.CopyFrom(scope_spans.scope)
                    scope.spans.add().CopyFrom(span)
        answer: tuple[int, list[tuple[str, str]], bytes] = (200, [], ExportTraceServiceResponse().SerializeToString())
        for target, part in parts.items():
            forward = urllib.request.Request(target, data=part.SerializeToString(),
                                             headers={"Content-Type": "application/x-protobuf"}, method="POST")
            try:
                with urllib.request.urlopen(forward, timeout=30) as response:
                    status, body, retry_after = response.status, response.read(), None
            except urllib.error.HTTPError as exc:
                status, body, retry_after = exc.code, exc.read(), exc.headers.get("Retry-After")
            except OSError:
                status, body, retry_after = 503, b"", "1"  # a collector gone: the exporter retries
            self.answers[target].append(status)
            if status != 200 or len(parts) == 1:
                answer = (status, [("Retry-After", retry_after)] if retry_after else [], body)
        return answer

    def __enter__(self) -> TraceIdRouter:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
