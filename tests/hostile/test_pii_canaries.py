"""PII canaries through every entry point: none on disk, none forwarded (redaction on), none in logs.

Entry points: the API (``tests/instrument/test_canary.py``'s exercise, reused), the Flask
integration beside ``opentelemetry-instrumentation-flask``, openai-v2 spans exported over OTLP to
the collector and forwarded to a next hop, and ``otel-session import`` in a subprocess. Logs are
captured at DEBUG for every logger (``caplog``) or from the subprocess's stdout and stderr.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from flask import Flask, request
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_session
from otel_session.collector.otlp import to_json_line
from otel_session.collector.server import Collector
from otel_session.instrument.flask import FlaskOtelSession
from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.testing import OtlpHttpCapture, bundles, capture_bundle, wait_for
from otel_session.bundle.write import WriterLimits


def _canary_module():
    """The API canary test's canaries and exercise (one definition of what PII looks like)."""
    path = Path(__file__).resolve().parents[1] / "instrument" / "test_canary.py"
    spec = importlib.util.spec_from_file_location("_instrument_canaries", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


canary = _canary_module()
CANARIES = canary.CANARIES
pii = canary._pii


def assert_clean(data: bytes | str, where: str) -> None:
    blob = data.encode() if isinstance(data, str) else data
    for value in CANARIES:
        assert value.encode() not in blob, f"{value!r} found in {where}"


def assert_tree_clean(root: Path) -> None:
    for directory, _dirs, files in os.walk(root):
        for name in files:
            assert_clean(Path(directory, name).read_bytes(), str(Path(directory, name)))


def assert_logs_clean(caplog: pytest.LogCaptureFixture, *, apps_own: str | None = None) -> None:
    """Every record (message and traceback) but those of the app's own logger ``apps_own``."""
    records = [record for record in caplog.records if record.name != apps_own]
    formatter = logging.Formatter()
    for record in records:
        text = record.getMessage() + (formatter.formatException(record.exc_info) if record.exc_info else "")
        assert_clean(text, f"log record {record.name}:{record.levelname}")


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


@pytest.mark.parametrize("limits", [None, WriterLimits(max_event_bytes=300)], ids=["recorded", "capture fails"])
def test_api(all_logs, limits):
    with capture_bundle(redaction=otel_session.RedactionPolicy(keep_slots={"party_size"}), writer_limits=limits) as captured:
        canary._exercise()
    if limits is None:
        assert captured.bundle.status is BundleStatus.COMPLETE
    else:  # the failure path logs: what it says must be clean too
        assert captured.bundle.status is BundleStatus.FAILED
        assert any(record.name.startswith("otel_session") for record in all_logs.records)
    assert_tree_clean(captured.root)
    assert_logs_clean(all_logs)


def test_flask_integration(all_logs, tmp_path):
    from opentelemetry.instrumentation.flask import FlaskInstrumentor

    provider = TracerProvider()
    app = Flask(__name__)
    FlaskOtelSession(app, agent="booking")

    @app.post("/chat")
    def chat():
        with otel_session.turn(0, state="collect", required_slots=["contact"]):
            with otel_session.message("user") as m:
                m.text(request.get_data(as_text=True))
            otel_session.slot_write("contact", request.args["contact"], source="form")
            with otel_session.message("assistant") as m:
                m.delta(f"noted: {request.headers['X-Contact']}")
        return {"ok": True}

    @app.post("/fail")
    def fail():
        raise RuntimeError(pii("view error"))

    FlaskInstrumentor().instrument_app(app, tracer_provider=provider)
    try:
        with capture_bundle(tmp_path, tracer_provider=provider) as captured:
            client = app.test_client()
            response = client.post(f"/chat?contact={canary.EMAIL}", data=pii("body"),
                                   headers={"X-Session-Id": "web-pii", "X-Contact": canary.PHONE})
            app.testing = False
            failed = client.post("/fail", headers={"X-Session-Id": "web-pii"})
    finally:
        FlaskInstrumentor().uninstrument_app(app)
    assert response.status_code == 200 and failed.status_code == 500
    assert len(captured.bundles) == 2
    assert [e["type"] for e in captured.bundles[0].events].count("slot_write") == 1
    assert_tree_clean(tmp_path)
    assert_logs_clean(all_logs, apps_own=app.logger.name)  # Flask logs the view's own exception


def _keyed_by_pii() -> dict:
    """A structure whose keys (not values) are personal data: an address, a phone, a card, a number."""
    return {canary.EMAIL: "contact", "by phone": {canary.PHONE: True, int(canary.CARD.replace(" ", "")): "card"},
            "rows": [{canary.CARD: 1}], "other": {"zz.canary.7319@other.example": "same token, kept apart"}}


def test_map_keys_are_redacted_like_values_in_the_api(all_logs):
    """Keys of tool arguments and results, slot values, verdict candidates and free structures:
    on disk and in the exported spans, none holds a canary; keys that redact alike stay apart."""
    with capture_bundle(redaction=otel_session.RedactionPolicy(slot_values="scan")) as captured:
        with otel_session.session("keys"), otel_session.run(agent="keys"):
            with otel_session.turn(0, state="collect", slots={"contact": _keyed_by_pii()}):
                otel_session.slot_write("contact", _keyed_by_pii())
                with otel_session.tool_execution("lookup", call_id="c1", arguments=_keyed_by_pii()) as tool:
                    tool.finish(result=_keyed_by_pii())
                otel_session.transition("collect", "done", candidates=[_keyed_by_pii()])
    assert_tree_clean(captured.root)
    for span in captured.spans:
        assert_clean(repr(dict(span.attributes or {})) + repr([dict(e.attributes or {}) for e in span.events]),
                     f"span {span.name}")
    started = next(e for e in captured.bundle.events if e["type"] == "tool_execution_started")
    assert sorted(started["payload"]["arguments"]) == ["[email]", "by phone", "other", "rows"]
    assert started["payload"]["arguments"]["other"] == {"[email]": "same token, kept apart"}
    assert sorted(started["payload"]["arguments"]["by phone"]) == ["[card]", "[phone]"]
    assert_logs_clean(all_logs)


def test_map_keys_are_redacted_through_the_collector(collector_root_and_port, all_logs):
    root, port = collector_root_and_port
    provider = TracerProvider(resource=Resource.create({"service.name": "keys"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True)))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent keys", attributes={"session.id": "keys"}):
        with tracer.start_as_current_span("execute_tool lookup", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": orjson.dumps(_keyed_by_pii(), option=orjson.OPT_NON_STR_KEYS).decode(),
            "gen_ai.tool.call.result": orjson.dumps(_keyed_by_pii(), option=orjson.OPT_NON_STR_KEYS).decode(),
        }):
            pass
    provider.shutdown()
    sealed = wait_for(lambda: [b for b in bundles(root) if b.status is BundleStatus.COMPLETE])
    assert any(e["type"] == "tool_execution_started" for e in sealed[0].events)
    assert_tree_clean(root)
    assert_logs_clean(all_logs)


@pytest.fixture
def collector_root_and_port(tmp_path):
    collector = Collector(tmp_path / "collector", grpc_address="127.0.0.1:0", http_address=None, seal_after_s=0.2,
                          redactor=Redactor(RedactionPolicy(), key=b"canary"))
    collector.start()
    yield tmp_path / "collector", collector.grpc_port
    collector.stop()


@pytest.fixture
def next_hop() -> Iterator[OtlpHttpCapture]:
    hop = OtlpHttpCapture()
    yield hop
    hop.close()


def test_openai_v2_spans_via_the_collector(all_logs, monkeypatch, tmp_path, next_hop):
    openai = pytest.importorskip("openai")
    openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    from otel_session.demo.mock_llm import MODEL, MockLLMServer

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    collector = Collector(tmp_path / "collector", grpc_address="127.0.0.1:0", http_address=None, seal_after_s=0.2,
                          forward=next_hop.url, redactor=Redactor(RedactionPolicy(), key=b"canary"))
    collector.start()
    provider = TracerProvider(resource=Resource.create({"service.name": "booking-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)))
    recorder = otel_session.configure(bundle_dir=tmp_path / "in-process", tracer_provider=provider)
    instrumentor = openai_v2.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with MockLLMServer() as llm, otel_session.session("openai-pii"), otel_session.run(agent="booking"):
            client = openai.OpenAI(base_url=llm.base_url, api_key="unused")
            stream = client.chat.completions.create(
                model=MODEL, stream=True, messages=[{"role": "user", "content": pii("streamed")}])
            streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
            answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": pii("plain")}])
    finally:
        instrumentor.uninstrument()
        recorder.shutdown()
        provider.shutdown()
        collector.stop()
    assert canary.EMAIL in streamed and canary.EMAIL in answer.choices[0].message.content  # the app saw it all
    counters = collector.counters.snapshot()
    assert counters["bundled"] >= 3 and counters["forwarded"] == counters["received"]
    forwarded = b"".join(next_hop.bodies)
    assert b"gen_ai.input.messages" in forwarded or b"gen_ai.output.messages" in forwarded
    assert_clean(forwarded, "forwarded OTLP payloads")
    bundles = [read_bundle(path) for path in find_bundles([tmp_path / "collector"])]
    assert [b.session_id for b in bundles] == ["openai-pii"]
    assert_tree_clean(tmp_path)
    assert_logs_clean(all_logs)


def test_import_command(tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "import-pii"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent booking", attributes={"session.id": "import-pii"}):
        with tracer.start_as_current_span("chat mock-gpt", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": pii("in")}]}]).decode(),
            "gen_ai.output.messages": orjson.dumps([{"role": "assistant", "parts": [{"type": "text", "content": pii("out")}]}]).decode(),
        }):
            pass
    exported = tmp_path / "traces.jsonl"  # one OTLP JSON request per line, as the Collector's file exporter writes
    exported.write_bytes(to_json_line(encode_spans(exporter.get_finished_spans())))
    assert canary.EMAIL.encode() in exported.read_bytes()
    with exported.open("ab") as handle:  # hostile lines that carry PII where a diagnostic might quote it
        handle.write(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "' + canary.EMAIL.encode() + b'"}]}]}]}\n')
        handle.write(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": {"n": "' + canary.EMAIL.encode() + b'"}}]}]}]}\n')
        handle.write(b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": "' + canary.EMAIL.encode() + b'", "startTimeUnixNano": "' + canary.PHONE.encode() + b'"}]}]}]}\n')
        handle.write(b'{"resourceSpans": "' + pii("text").encode() + b'"}\n')
        handle.write(pii("not json").encode() + b"\n")
    root = tmp_path / "bundles"
    completed = subprocess.run(
        [sys.executable, "-m", "otel_session.cli", "import", str(exported), "--dir", str(root)],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "OTEL_SESSION_REDACTION_KEY": "k"},
    )
    assert "1 run(s) written" in completed.stdout, completed.stdout + completed.stderr
    assert completed.stderr.count("Error:") == 5
    assert_clean(completed.stdout + completed.stderr, "import output")
    assert_tree_clean(root)
