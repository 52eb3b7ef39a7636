"""``otel_session_otlp``: spans and log records sent by the official OTLP exporters carry no canary (issue 15)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import entry_points
from pathlib import Path

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status, StatusCode

from otel_session.demo.mock_llm import MODEL, MockLLMServer
from otel_session.instrument.redacting_exporter import RedactingOTLPLogExporter, RedactingOTLPSpanExporter
from otel_session.redact import RedactionPolicy, Redactor

pytestmark = pytest.mark.slow

EMAIL = "zz.canary.7319@canary-mail.example"
PHONE = "+44 20 7946 0958"
CARD = "4532015112830366"  # Luhn-valid test number
PHONE_NUMBER = 442079460958.0
# Integers and doubles travel as binary: they are looked for in the requests' text format.
CANARIES = [EMAIL, "canary.7319", "7946 0958", CARD, "442079460958"]


def _spans(provider: TracerProvider) -> None:
    """SDK spans with a canary in every attribute value type, in keys, names, events and JSON."""
    tracer = provider.get_tracer("canary-scope")
    with tracer.start_as_current_span(f"chat {EMAIL}") as span:
        span.set_attribute("session.id", f"session-of-{EMAIL}")
        span.set_attribute("gen_ai.input.messages", json.dumps([{"role": "user", "content": f"mail {EMAIL}"}]))
        span.set_attribute("gen_ai.tool.call.arguments", json.dumps({EMAIL: {"card": CARD}}))
        span.set_attribute("card.int", int(CARD))
        span.set_attribute("phone.double", PHONE_NUMBER)
        span.set_attribute("flag", True)
        span.set_attribute("texts", [f"call {PHONE}", "plain"])
        span.set_attribute("cards", [int(CARD), 1])
        span.set_attribute(f"key.{EMAIL}", "value")
        span.add_event(f"event {EMAIL}", {"event.text": f"card {CARD}"})
        span.set_status(Status(StatusCode.ERROR, f"failed for {EMAIL}"))


def _send(exporter: SpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _spans(provider)
    provider.shutdown()


def _send_logs(exporter: LogRecordExporter) -> None:
    """A GenAI log event with a canary in its event name, body (text and map, keys too) and attributes."""
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    provider.get_logger("canary-scope").emit(
        event_name=f"gen_ai.event {EMAIL}",
        body={"content": f"mail {EMAIL}", EMAIL: [int(CARD), PHONE_NUMBER], "text": f"call {PHONE}"},
        attributes={"session.id": f"session-of-{EMAIL}", "card.int": int(CARD), f"key.{EMAIL}": "value"},
    )
    provider.shutdown()


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(RedactionPolicy(), key=b"k" * 32)


@pytest.fixture
def http_receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback OTLP/HTTP receiver keeping each request body (decompressed) it got."""
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            bodies.append(gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            self.wfile.write(trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", bodies
    server.shutdown()
    server.server_close()


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback OTLP/gRPC receiver (traces and logs) keeping each request (serialized) it got."""
    bodies: list[bytes] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # noqa: N802 (the generated name)
            bodies.append(request.SerializeToString())
            return trace_service_pb2.ExportTraceServiceResponse()

    class LogsService(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request, context):  # noqa: N802
            bodies.append(request.SerializeToString())
            return logs_service_pb2.ExportLogsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(LogsService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", bodies
    server.stop(None)


def _found(bodies: list[bytes], request_type: type = trace_service_pb2.ExportTraceServiceRequest) -> set[str]:
    assert bodies, "the receiver got nothing"
    requests = [request_type.FromString(body) for body in bodies]
    data = b"".join(bodies) + "".join(str(request) for request in requests).encode()
    return {canary for canary in CANARIES if canary.encode() in data}


def test_http_export_is_redacted_and_plain_otlp_is_not(http_receiver, redactor):
    endpoint, bodies = http_receiver
    _send(HttpSpanExporter(endpoint=endpoint))
    assert _found(bodies) == set(CANARIES)  # the plain exporter sends them all: the test can fail
    bodies.clear()
    _send(RedactingOTLPSpanExporter(redactor, protocol="http/protobuf", endpoint=endpoint))
    assert _found(bodies) == set()
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(bodies[0])
    (span,) = request.resource_spans[0].scope_spans[0].spans
    assert {a.key for a in span.attributes} >= {"session.id", "gen_ai.input.messages", "flag"}


def test_grpc_export_is_redacted_and_plain_otlp_is_not(grpc_receiver, redactor):
    endpoint, bodies = grpc_receiver
    _send(GrpcSpanExporter(endpoint=endpoint, insecure=True))
    assert _found(bodies) == set(CANARIES)
    bodies.clear()
    _send(RedactingOTLPSpanExporter(redactor, protocol="grpc", endpoint=endpoint, insecure=True))
    assert _found(bodies) == set()


LOGS_CANARIES = set(CANARIES)  # each in the log record above


def test_http_log_export_is_redacted_and_plain_otlp_is_not(http_receiver, redactor):
    endpoint, bodies = http_receiver
    endpoint = endpoint.replace("/v1/traces", "/v1/logs")
    _send_logs(HttpLogExporter(endpoint=endpoint))
    assert _found(bodies, logs_service_pb2.ExportLogsServiceRequest) == LOGS_CANARIES
    bodies.clear()
    _send_logs(RedactingOTLPLogExporter(redactor, protocol="http/protobuf", endpoint=endpoint))
    assert _found(bodies, logs_service_pb2.ExportLogsServiceRequest) == set()
    request = logs_service_pb2.ExportLogsServiceRequest.FromString(bodies[0])
    (record,) = request.resource_logs[0].scope_logs[0].log_records
    assert record.event_name.startswith("gen_ai.event ") and {a.key for a in record.attributes} >= {"session.id"}


def test_grpc_log_export_is_redacted_and_plain_otlp_is_not(grpc_receiver, redactor):
    endpoint, bodies = grpc_receiver
    _send_logs(GrpcLogExporter(endpoint=endpoint, insecure=True))
    assert _found(bodies, logs_service_pb2.ExportLogsServiceRequest) == LOGS_CANARIES
    bodies.clear()
    _send_logs(RedactingOTLPLogExporter(redactor, protocol="grpc", endpoint=endpoint, insecure=True))
    assert _found(bodies, logs_service_pb2.ExportLogsServiceRequest) == set()


def test_log_failures_are_logged_and_returned_never_raised(http_receiver, caplog):
    endpoint, bodies = http_receiver
    exporter = RedactingOTLPLogExporter(object(), protocol="http/protobuf", endpoint=endpoint)  # type: ignore[arg-type]
    kept = InMemoryLogRecordExporter()
    _send_logs(kept)
    assert exporter.export(kept.get_finished_logs()) is LogRecordExportResult.FAILURE
    assert bodies == []  # nothing unredacted went out
    assert "log records not exported" in caplog.text


def test_protocol_and_policy_come_from_the_environment(http_receiver, monkeypatch, tmp_path):
    endpoint, bodies = http_receiver
    monkeypatch.setenv("OTEL_SESSION_DIR", str(tmp_path))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    (entry,) = entry_points(group="opentelemetry_traces_exporter", name="otel_session_otlp")
    _send(entry.load()())
    assert _found(bodies) == set()


def test_unknown_protocol_is_refused(monkeypatch, redactor):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match="http/json"):
        RedactingOTLPSpanExporter(redactor)


def test_failures_are_logged_and_returned_never_raised(http_receiver, caplog):
    endpoint, bodies = http_receiver
    exporter = RedactingOTLPSpanExporter(object(), protocol="http/protobuf", endpoint=endpoint)  # type: ignore[arg-type]
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("s") as span:
        pass
    assert exporter.export([span]) is SpanExportResult.FAILURE
    assert bodies == []  # nothing unredacted went out
    assert "spans not exported" in caplog.text


OPENAI_APP = """
import os, openai
client = openai.OpenAI(base_url=os.environ["MOCK_LLM_URL"], api_key="unused")
tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
client.chat.completions.create(model=os.environ["MOCK_LLM_MODEL"], tools=[tool],
                               messages=[{"role": "user", "content": "mail me at " + os.environ["CANARY"]}])
"""


def _run_openai_app(tmp_path: Path, **otel: str) -> str:
    """``opentelemetry-instrument`` over a one-call openai app against the loopback mock LLM,
    the user's message holding the canary; ``otel`` are its ``OTEL_*`` settings."""
    app = tmp_path / "app.py"
    app.write_text(OPENAI_APP)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    with MockLLMServer(port=0) as llm:
        env.update({
            "MOCK_LLM_URL": llm.base_url, "MOCK_LLM_MODEL": MODEL, "CANARY": EMAIL,
            "OTEL_SESSION_DIR": str(tmp_path / "data"),
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRICS_EXPORTER": "none", **otel,
        })
        result = subprocess.run(
            [str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable, str(app)],
            env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )
    assert result.returncode == 0, result.stderr
    return result.stderr


UNREDACTED = "export unredacted"
"""The instrumentor's start-up warning when a plain ``otlp`` exporter sends what it recorded."""


@pytest.mark.parametrize("traces_exporter", ["otlp", "otel_session_otlp"])
def test_zero_code_openai_chat_span(traces_exporter, http_receiver, tmp_path):
    """``opentelemetry-instrument`` with openai-v2 capturing content: its ``chat`` span's messages
    and tool call arguments carry the canary through ``otlp``, and not through ``otel_session_otlp``."""
    endpoint, bodies = http_receiver
    stderr = _run_openai_app(tmp_path, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
                    OTEL_TRACES_EXPORTER=traces_exporter, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint,
                    OTEL_LOGS_EXPORTER="none")
    requests = [trace_service_pb2.ExportTraceServiceRequest.FromString(body) for body in bodies]
    spans = {span.name: span for r in requests for rs in r.resource_spans for ss in rs.scope_spans for span in ss.spans}
    chat = next(span for name, span in spans.items() if name.startswith("chat"))
    assert "gen_ai.input.messages" in {a.key for a in chat.attributes}, spans.keys()
    assert (EMAIL.encode() in b"".join(bodies)) is (traces_exporter == "otlp")
    assert stderr.count(UNREDACTED) == (traces_exporter == "otlp"), stderr
    if traces_exporter == "otlp":
        assert "OTEL_TRACES_EXPORTER=otlp export unredacted" in stderr and "otel_session_otlp" in stderr


@pytest.mark.parametrize("logs_exporter", ["otlp", "otel_session_otlp"])
def test_zero_code_openai_log_events(logs_exporter, http_receiver, tmp_path):
    """The same app with content captured as GenAI log events (``EVENT_ONLY``): its
    ``gen_ai.client.inference.operation.details`` record carries the canary through ``otlp``,
    and not through ``otel_session_otlp``."""
    endpoint, bodies = http_receiver
    stderr = _run_openai_app(tmp_path, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="EVENT_ONLY",
                    OTEL_TRACES_EXPORTER="none", OTEL_LOGS_EXPORTER=logs_exporter,
                    OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=endpoint.replace("/v1/traces", "/v1/logs"))
    requests = [logs_service_pb2.ExportLogsServiceRequest.FromString(body) for body in bodies]
    records = [record for r in requests for rl in r.resource_logs for sl in rl.scope_logs for record in sl.log_records]
    assert "gen_ai.client.inference.operation.details" in {record.event_name for record in records}, records
    assert (EMAIL.encode() in b"".join(bodies)) is (logs_exporter == "otlp")
    assert stderr.count(UNREDACTED) == (logs_exporter == "otlp"), stderr
    if logs_exporter == "otlp":
        assert "OTEL_LOGS_EXPORTER=otlp export unredacted" in stderr


@pytest.mark.parametrize(("traces", "logs", "named"), [
    ("otlp", "otlp", "OTEL_TRACES_EXPORTER=otlp and OTEL_LOGS_EXPORTER=otlp"),
    ("console,otlp_proto_http", "none", "OTEL_TRACES_EXPORTER=console,otlp_proto_http"),
    ("otel_session_otlp", "otlp_proto_grpc", "OTEL_LOGS_EXPORTER=otlp_proto_grpc"),
    ("otel_session_otlp", "otel_session_otlp", None),
    ("otel_session", None, None),
])
def test_a_plain_otlp_exporter_is_named_once(monkeypatch, caplog, traces, logs, named):
    from otel_session.instrument._log import forget_warnings
    from otel_session.instrument.instrumentor import warn_if_exported_unredacted

    forget_warnings()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", traces)
    if logs is None:
        monkeypatch.delenv("OTEL_LOGS_EXPORTER", raising=False)
    else:
        monkeypatch.setenv("OTEL_LOGS_EXPORTER", logs)
    warn_if_exported_unredacted()
    warn_if_exported_unredacted()
    lines = [record.getMessage() for record in caplog.records if UNREDACTED in record.getMessage()]
    assert lines == ([f"otel_session: {named} export unredacted (personal data the bundle hides goes out as "
                      "recorded); set otel_session_otlp instead to export them redacted like the bundle, unless "
                      "they go to the otel-session collector, which redacts before forwarding"] if named else [])
