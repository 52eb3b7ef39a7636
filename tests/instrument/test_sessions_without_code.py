"""Sessions without code (issue 16 §1): the session span processor reads the session id from the
request header the official HTTP server instrumentations capture (Flask, plain WSGI, ASGI), and
from ``OTEL_RESOURCE_ATTRIBUTES``, and stamps it on the server span and every span under it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from flask import Flask
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware as WsgiMiddleware
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from werkzeug.test import Client

import otel_session

CAPTURE = "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST"


@pytest.fixture
def capture_header(monkeypatch):
    monkeypatch.setenv(CAPTURE, "X-Session-Id")


def work(provider) -> None:
    """What a handler does: a span of its own with a child (say, a model call)."""
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("plan"), tracer.start_as_current_span("chat gpt-4o"):
        pass


def sessions_by_span(exporter):
    return {span.name: span.attributes.get("session.id") for span in exporter.get_finished_spans()}


def flask_app(provider) -> Flask:
    app = Flask(__name__)

    @app.get("/reply")
    def reply():
        work(provider)
        return "ok"

    return app


def test_flask_request_header(recorder, provider, exporter, capture_header):
    app = flask_app(provider)
    FlaskInstrumentor().instrument_app(app, tracer_provider=provider)
    try:
        assert app.test_client().get("/reply", headers={"X-Session-Id": "call-7"}).status_code == 200
    finally:
        FlaskInstrumentor().uninstrument_app(app)
    found = sessions_by_span(exporter)
    assert found == {"GET /reply": "call-7", "plan": "call-7", "chat gpt-4o": "call-7"}
    server = next(span for span in exporter.get_finished_spans() if span.name == "GET /reply")
    assert server.attributes["gen_ai.conversation.id"] == "call-7"


def test_wsgi_request_header_named_by_the_user(recorder, provider, exporter, monkeypatch):
    monkeypatch.setenv(CAPTURE, "X-Conversation")
    monkeypatch.setenv("OTEL_SESSION_HEADER", "X-Conversation")

    def app(environ, start_response):
        work(provider)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    client = Client(WsgiMiddleware(app, tracer_provider=provider))
    client.get("/reply", headers={"X-Conversation": "conv-9"})
    client.get("/reply")  # no header: no session
    spans = exporter.get_finished_spans()
    by_trace: dict[int, set] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, set()).add(span.attributes.get("session.id"))
    assert sorted(by_trace.values(), key=str) == [{"conv-9"}, {None}]
    assert len(spans) == 6


def test_asgi_request_header(recorder, provider, exporter, capture_header):
    asgi = pytest.importorskip("opentelemetry.instrumentation.asgi")

    async def app(scope, receive, send):
        work(provider)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = asgi.OpenTelemetryMiddleware(app, tracer_provider=provider)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/reply", "raw_path": b"/reply", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"testserver"), (b"x-session-id", b"call-11")],
        "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
    }
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(middleware(scope, receive, send))
    assert sent[0]["status"] == 200
    found = sessions_by_span(exporter)
    assert found and set(found.values()) == {"call-11"}, found
    assert "GET /reply" in found


def test_a_run_inside_a_request_joins_the_header_session(recorder, provider, exporter, capture_header):
    app = Flask(__name__)

    @app.get("/turn")
    def turn():
        with otel_session.run(agent="booking") as run:
            return run.session_id

    FlaskInstrumentor().instrument_app(app, tracer_provider=provider)
    try:
        assert app.test_client().get("/turn", headers={"X-Session-Id": "call-8"}).text == "call-8"
    finally:
        FlaskInstrumentor().uninstrument_app(app)


def test_resource_attributes(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=agent,session.id=res-1")
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create())  # reads OTEL_RESOURCE_ATTRIBUTES, as the SDK's configurator does
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = otel_session.configure(tmp_path, tracer_provider=provider)
    try:
        work(provider)
        with otel_session.run(agent="booking") as run:
            assert run.session_id == "res-1"
        with otel_session.session("explicit"), otel_session.run(agent="booking") as run:
            assert run.session_id == "explicit"  # the context says more than the resource
    finally:
        recorder.shutdown()
    found = sessions_by_span(exporter)
    assert found["plan"] == found["chat gpt-4o"] == "res-1"


def test_zero_code_flask_app_under_opentelemetry_instrument(tmp_path):
    """No line of otel_session in the app: ``opentelemetry-instrument`` loads the Flask
    instrumentor and ours, and the request's header names the session of every span."""
    app = tmp_path / "app.py"
    app.write_text(
        "from flask import Flask\n"
        "from opentelemetry import trace\n"
        "app = Flask(__name__)\n"
        "@app.get('/reply')\n"
        "def reply():\n"
        "    with trace.get_tracer('app').start_as_current_span('plan'):\n"
        "        return 'ok'\n"
        "assert app.test_client().get('/reply', headers={'X-Session-Id': 'zero-1'}).status_code == 200\n"
    )
    env = {
        **os.environ,
        "OTEL_SESSION_DIR": str(tmp_path / "data"),
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        CAPTURE: "X-Session-Id",
    }
    result = subprocess.run(
        [str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable, str(app)],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    spans, decoder, text = [], json.JSONDecoder(), result.stdout.strip()
    while text:
        span, end = decoder.raw_decode(text)
        spans.append(span)
        text = text[end:].strip()
    assert {span["name"]: span["attributes"].get("session.id") for span in spans} == {
        "GET /reply": "zero-1", "plan": "zero-1",
    }


def test_a_trace_no_run_opened_is_a_run_of_the_session_its_spans_name(tmp_path):
    """In process, the collector's rule: an instrumentor's ``chat`` span carrying ``session.id``, on a
    plain SDK provider with no ``otel_session.run()`` around it, is recorded (it was dropped)."""
    from otel_session.testing import bundles

    provider = TracerProvider()
    recorder = otel_session.configure(tmp_path / "bundles", tracer_provider=provider)
    try:
        with provider.get_tracer("some.instrumentor").start_as_current_span("chat gpt-4o-mini", attributes={
            "session.id": "chat-7", "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]),
        }):
            pass
    finally:
        recorder.shutdown()
    (bundle,) = bundles(tmp_path / "bundles")
    assert bundle.session_id == "chat-7" and bundle.status.value == "complete"
    texts = [block["text"] for event in bundle.events if event["type"] == "message_finished"
             for block in event["payload"]["content"]]
    assert texts == ["hi", "hello"]
