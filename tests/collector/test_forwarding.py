"""Forwarding to another OTLP endpoint: a second real collector, and redaction of forwarded payloads."""

from __future__ import annotations

import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_session.collector.forward import forward_url, grpc_target
from otel_session.collector.otlp import Signal
from otel_session.read import BundleStatus

from .conftest import CANARY_CARD, CANARY_EMAIL, all_bytes, sealed_bundles, wait_for


def record_run_with_pii(tracer):
    with tracer.start_as_current_span("invoke_agent booking", attributes={
        "session.id": "call-pii", "gen_ai.operation.name": "invoke_agent", "enduser.email": CANARY_EMAIL,
    }):
        with tracer.start_as_current_span("chat mock-gpt", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": f'[{{"role":"user","parts":[{{"type":"text","content":"mail {CANARY_EMAIL}, card {CANARY_CARD}"}}]}}]',
        }) as chat:
            chat.add_event("gen_ai.user.message", {"content": f"reach me at {CANARY_EMAIL}"})
        with tracer.start_as_current_span("execute_tool pay", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay",
            "gen_ai.tool.call.arguments": f'{{"card": "{CANARY_CARD}"}}',
        }):
            pass


class CapturingOtlpServer:
    """A plain OTLP/HTTP endpoint that keeps every body it receives (the next hop)."""

    def __init__(self, status=200):
        bodies = self.bodies = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def next_hop():
    server = CapturingOtlpServer()
    yield server
    server.close()


def test_forwarding_to_a_second_collector(make_collector, make_provider, tmp_path):
    downstream = make_collector(tmp_path / "downstream")
    upstream = make_collector(tmp_path / "upstream", forward=f"http://127.0.0.1:{downstream.http_port}")
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    (up,) = sealed_bundles(tmp_path / "upstream")
    (down,) = sealed_bundles(tmp_path / "downstream")
    assert up.status is down.status is BundleStatus.COMPLETE
    assert up.run_id == down.run_id
    assert [event["type"] for event in up.events] == [event["type"] for event in down.events]
    wait_for(lambda: upstream.counters.snapshot()["forwarded"] == 3)
    for root in (tmp_path / "upstream", tmp_path / "downstream"):
        data = all_bytes(root)
        assert CANARY_EMAIL.encode() not in data and b"4111" not in data


@pytest.mark.parametrize("raw", [False, True], ids=["redacted (default)", "raw (--forward-raw)"])
def test_forwarded_payloads_are_redacted_by_default(make_collector, make_provider, tmp_path, next_hop, raw):
    upstream = make_collector(tmp_path / "upstream", forward=next_hop.url, forward_redacted=not raw)
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forwarded"] == 3)
    forwarded = b"".join(next_hop.bodies)
    assert b"gen_ai.input.messages" in forwarded and b"enduser.email" in forwarded
    assert (CANARY_EMAIL.encode() in forwarded) is raw
    assert (CANARY_CARD.encode() in forwarded) is raw
    sealed_bundles(tmp_path / "upstream")
    assert CANARY_EMAIL.encode() not in all_bytes(tmp_path / "upstream")


def test_forward_failures_are_counted(make_collector, make_provider, tmp_path):
    refusing = CapturingOtlpServer(status=400)
    upstream = make_collector(tmp_path / "upstream", forward=refusing.url)
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forward_failed"] == 3)
    assert upstream.counters.snapshot()["forwarded"] == 0 and len(refusing.bodies) == 3
    refusing.close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
     ("https://tempo:4318/", "https://tempo:4318/v1/traces"),
     ("http://phoenix:6006/v1/traces", "http://phoenix:6006/v1/traces")],
)
def test_forward_url(url, expected):
    assert forward_url(url) == expected


def test_forward_url_rejects_non_http():
    with pytest.raises(ValueError, match="http"):
        forward_url("grpc://127.0.0.1:4317")


class CapturingGrpcServer:
    """A plain OTLP/gRPC endpoint that keeps every request it receives, answering ``code`` the first
    ``failures`` times (the next hop)."""

    def __init__(self, failures: int = 0, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE):
        bodies = self.bodies = []
        self.calls = 0

        def export(body, context):
            self.calls += 1
            if self.calls <= failures:
                context.abort(code, "not now")
            bodies.append(body)
            return b""

        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(export)},
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.url = f"http://127.0.0.1:{port}"

    def close(self):
        self.server.stop(None)


@pytest.mark.parametrize("raw", [False, True], ids=["redacted (default)", "raw (--forward-raw)"])
def test_forwarding_over_grpc_retries_and_redacts(make_collector, make_provider, tmp_path, raw):
    """``--forward-protocol grpc``: the official wire format to an OTLP/gRPC next hop (Jaeger, Tempo),
    retried on UNAVAILABLE, redacted unless asked otherwise."""
    next_hop = CapturingGrpcServer(failures=1)
    upstream = make_collector(tmp_path / "upstream", forward=next_hop.url, forward_protocol="grpc",
                              forward_redacted=not raw)
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forwarded"] == 3)
    forwarded = [ExportTraceServiceRequest.FromString(body) for body in next_hop.bodies]
    assert sum(len(scope.spans) for request in forwarded for rs in request.resource_spans for scope in rs.scope_spans) == 3
    everything = b"".join(next_hop.bodies)
    assert (CANARY_EMAIL.encode() in everything) is raw and (CANARY_CARD.encode() in everything) is raw
    assert next_hop.calls == len(next_hop.bodies) + 1  # the first attempt was refused, then retried
    next_hop.close()


def test_grpc_forward_refusals_are_counted(make_collector, make_provider, tmp_path):
    refusing = CapturingGrpcServer(failures=100, code=grpc.StatusCode.INVALID_ARGUMENT)
    upstream = make_collector(tmp_path / "upstream", forward=refusing.url, forward_protocol="grpc")
    tracer = make_provider(GrpcExporter(endpoint=f"127.0.0.1:{upstream.grpc_port}", insecure=True)).get_tracer("t")
    record_run_with_pii(tracer)
    wait_for(lambda: upstream.counters.snapshot()["forward_failed"] == 3)
    assert upstream.counters.snapshot()["forwarded"] == 0
    assert refusing.calls <= 3  # one attempt per request (at most 3 for 3 spans): INVALID_ARGUMENT is not retried
    refusing.close()


def test_grpc_target():
    assert grpc_target("http://tempo:4317") == ("tempo:4317", False)
    assert grpc_target("https://tempo.example") == ("tempo.example:4317", True)
    with pytest.raises(ValueError, match="grpc"):
        grpc_target("tempo:4317")


@pytest.mark.parametrize(("url", "expected"), [
    ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/logs"),
    ("https://otlp.example:443/v1/traces", "https://otlp.example:443/v1/logs"),
    ("http://gw:4318/otlp/v1/traces", "http://gw:4318/otlp/v1/logs"),
    ("http://gw:4318/custom/traces", None),  # no /v1/traces to swap: logs are not forwarded
])
def test_forward_url_of_logs(url, expected):
    assert forward_url(url, Signal.LOGS) == expected
