"""OpenTelemetry-native integration: opentelemetry-instrument, the span exporter, Flask."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from flask import Flask
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_session
from otel_session.instrument.exporter import SessionBundleExporter
from otel_session.instrument.flask import FlaskOtelSession
from otel_session.bundle.read import BundleStatus, find_bundles, read_bundle
from otel_session.testing import capture_bundle

from .test_api import booking_run

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent

TINY_APP = textwrap.dedent(
    """
    import otel_session
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    recorder = otel_session.current_recorder()
    assert recorder is not None, "the instrumentor configured recording before the app ran"
    assert recorder.tracer_provider is trace.get_tracer_provider()
    assert isinstance(recorder.tracer_provider, TracerProvider)
    with otel_session.session("zero-code"):
        with otel_session.run(agent="tiny") as run:
            with otel_session.turn(0, state="greet", required_slots=["email"], slots={}) as turn:
                with otel_session.message("user") as m:
                    m.text("I'm jane@example.com")
                with otel_session.message("assistant") as m:
                    m.delta("Hi ")
                    m.delta("there")
                with trace.get_tracer("somebody.else").start_as_current_span("other work"):
                    pass
                turn.finish(state="done")
    print(run.run_id)
    """
)


def test_opentelemetry_instrument_leaves_a_complete_bundle(tmp_path):
    app = tmp_path / "app.py"
    app.write_text(TINY_APP)
    env = {
        **os.environ,
        "OTEL_SESSION_DIR": str(tmp_path / "data"),
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "tiny-agent",
    }
    result = subprocess.run(
        [str(BIN / "opentelemetry-instrument"), sys.executable, str(app)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip().splitlines()[0]
    bundles = [read_bundle(path) for path in find_bundles([tmp_path / "data"])]
    assert len(bundles) == 1
    bundle = bundles[0]
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.run_id == run_id and bundle.manifest["service"] == "tiny-agent"
    assert [e["type"] for e in bundle.events][0] == "run_started"
    assert [e["type"] for e in bundle.events][-1] == "run_finished"
    assert "jane@example.com" not in (bundle.path / "events.ndjson").read_text()
    # the console exporter printed the foreign span with the session ids stamped
    assert '"session.id": "zero-code"' in result.stdout
    assert f'"otel_session.run.id": "{run_id}"' in result.stdout


def test_entry_points_are_registered():
    instrumentors = entry_points(group="opentelemetry_instrumentor", name="otel_session")
    exporters = entry_points(group="opentelemetry_traces_exporter", name="otel_session")
    assert [ep.load().__name__ for ep in instrumentors] == ["OtelSessionInstrumentor"]
    assert [ep.load() for ep in exporters] == [SessionBundleExporter]


def test_instrumentor_on_an_explicit_provider(tmp_path, monkeypatch, exporter, provider):
    from otel_session.instrument.instrumentor import OtelSessionInstrumentor

    monkeypatch.setenv("OTEL_SESSION_DIR", str(tmp_path))
    instrumentor = OtelSessionInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        booking_run()
    finally:
        instrumentor.uninstrument()
    bundles = list(find_bundles([tmp_path]))
    assert len(bundles) == 1 and read_bundle(bundles[0]).status is BundleStatus.COMPLETE
    assert otel_session.current_recorder() is None


def test_span_exporter_writes_bundles_at_span_end(tmp_path, monkeypatch):
    """Built with no arguments (as OTEL_TRACES_EXPORTER does), configured from the environment."""
    monkeypatch.setenv("OTEL_SESSION_DIR", str(tmp_path / "exported"))
    span_exporter = SessionBundleExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    with capture_bundle(tmp_path / "live", tracer_provider=provider) as captured:
        run_id = booking_run()
        with provider.get_tracer("no.session").start_as_current_span("unrelated"):
            pass
    # the spans again, now that no in-process recorder claims their run
    for span in captured.spans:
        span_exporter.export([span])
    provider.shutdown()
    # The recorder records every trace in process ("unrelated" too, as a session of its own): the
    # exporter wrote none of them while it was on, then every one but "unrelated" (no session).
    assert span_exporter.spans_recorded_in_process == len(captured.spans)
    exported = [read_bundle(path) for path in find_bundles([tmp_path / "exported"])]
    assert len(exported) == 1 and exported[0].run_id == run_id
    assert exported[0].status is BundleStatus.COMPLETE, exported[0].diagnostics
    assert span_exporter.spans_without_session == 1  # "unrelated", exported again

    def shape(events):
        return [(e["type"], e.get("payload"), e.get("turn_index")) for e in events]

    recorded = {bundle.run_id: bundle for bundle in captured.bundles}
    assert shape(exported[0].events) == shape(recorded.pop(run_id).events)
    # In process too, the trace no run opened and that names no session is a run of its own.
    (unrelated,) = recorded.values()
    assert unrelated.manifest["session_derived"] is True and unrelated.status is BundleStatus.COMPLETE


def _flask_app(**options):
    app = Flask(__name__)
    FlaskOtelSession(app, agent="booking", **options)

    @app.post("/chat")
    def chat():
        with otel_session.turn(0, state="greet") as turn:
            with otel_session.message("assistant") as m:
                m.delta("hello")
            turn.finish(state="ask_date")
        return {"run_id": otel_session.current_run().run_id}

    @app.get("/boom")
    def boom():
        raise RuntimeError("boom")

    return app


def test_flask_session_and_run_per_request(provider):
    from opentelemetry.instrumentation.flask import FlaskInstrumentor

    app = _flask_app()
    FlaskInstrumentor().instrument_app(app, tracer_provider=provider)
    try:
        with capture_bundle(tracer_provider=provider) as captured:
            client = app.test_client()
            first = client.post("/chat", headers={"X-Session-Id": "web-1"})
            second = client.post("/chat", headers={"X-Session-Id": "web-1"})
            ctx = baggage.set_baggage("session.id", "from-baggage", context.Context())
            headers: dict[str, str] = {}
            propagate.inject(headers, context=ctx)
            third = client.post("/chat", headers=headers)
            anonymous = client.post("/chat")
            client.application.testing = False
            failed = client.get("/boom", headers={"X-Session-Id": "web-2"})
    finally:
        FlaskInstrumentor().uninstrument_app(app)
    assert anonymous.status_code == 500  # no session, no run: the view's current_run() is None
    assert failed.status_code == 500
    for response in (first, second, third):
        assert response.status_code == 200
        assert response.headers["X-Run-Id"] == response.get_json()["run_id"]
    by_run = {bundle.run_id: bundle for bundle in captured.bundles}
    assert by_run[first.headers["X-Run-Id"]].session_id == "web-1"
    assert by_run[second.headers["X-Run-Id"]].session_id == "web-1"
    assert by_run[third.headers["X-Run-Id"]].session_id == "from-baggage"
    boom = by_run[failed.headers["X-Run-Id"]]
    assert boom.events[-1]["payload"] == {"status": "error"}
    assert all(bundle.status is BundleStatus.COMPLETE for bundle in captured.bundles)
    server_spans = [span for span in captured.spans if span.name.startswith("POST /chat")]
    assert [span.attributes.get("session.id") for span in server_spans] == ["web-1", "web-1", "from-baggage", None]


def test_flask_session_id_callable():
    app = _flask_app(session_id=lambda request: request.args.get("call"))
    with capture_bundle() as captured:
        response = app.test_client().post("/chat?call=abc")
    assert response.status_code == 200
    assert captured.bundle.session_id == "abc"


@pytest.mark.parametrize("disabled", ["otel_session"])
def test_instrumentor_can_be_disabled(tmp_path, disabled):
    app = tmp_path / "app.py"
    app.write_text("import otel_session\nprint(otel_session.current_recorder())\n")
    env = {
        **os.environ,
        "OTEL_SESSION_DIR": str(tmp_path / "data"),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled,
    }
    result = subprocess.run(
        [str(BIN / "opentelemetry-instrument"), sys.executable, str(app)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.stdout.strip() == "None", result.stderr


def test_plain_python_configures_itself_from_the_environment(tmp_path):
    app = tmp_path / "app.py"
    app.write_text(
        "import otel_session\n"
        "with otel_session.session('auto'), otel_session.run(agent='a') as run:\n"
        "    otel_session.guard('g', passed=True)\n"
        "print(run.run_id)\n"
    )
    env = {**os.environ, "OTEL_SESSION_DIR": str(tmp_path / "data"), "OTEL_SESSION_REDACTION_KEY": "k"}
    result = subprocess.run([sys.executable, str(app)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    bundle = read_bundle(next(find_bundles([tmp_path / "data"])))
    assert bundle.status is BundleStatus.COMPLETE and bundle.run_id == result.stdout.strip()
    assert not (tmp_path / "data" / ".redaction-key").exists()  # the key came from the environment


def test_nothing_is_recorded_after_shutdown(tmp_path, provider, exporter, caplog):
    recorder = otel_session.configure(tmp_path, tracer_provider=provider)
    recorder.shutdown()
    recorder.shutdown()  # idempotent
    with otel_session.session("s"), otel_session.run(agent="a") as run:
        otel_session.guard("g", passed=True)
    assert run.run_id is None
    assert list(find_bundles([tmp_path])) == []
    assert exporter.get_finished_spans() == ()
    assert any("shut down" in record.getMessage() for record in caplog.records)


LOG_EVENTS_APP = textwrap.dedent(
    """
    import otel_session
    from opentelemetry import _logs, trace
    from opentelemetry._logs import LogRecord

    logger = _logs.get_logger("genai.instrumentation")
    tracer = trace.get_tracer("genai.instrumentation")
    with otel_session.session("log-events"):
        with otel_session.run(agent="tiny") as run:
            with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
                logger.emit(LogRecord(event_name="gen_ai.user.message", body={"content": "I'm jane@example.com"}))
                logger.emit(LogRecord(event_name="gen_ai.choice", body={
                    "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi Jane"}}))
    print(run.run_id)
    """
)


def test_opentelemetry_instrument_joins_genai_log_events_to_their_spans(tmp_path):
    """With logs on, the instrumentor finds the global SDK LoggerProvider the distro set up, and
    the messages an instrumentation emits as log events land in the run's bundle."""
    app = tmp_path / "app.py"
    app.write_text(LOG_EVENTS_APP)
    env = {**os.environ, "OTEL_SESSION_DIR": str(tmp_path / "data"), "OTEL_TRACES_EXPORTER": "none",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "console", "OTEL_SERVICE_NAME": "tiny-agent"}
    result = subprocess.run([str(BIN / "opentelemetry-instrument"), sys.executable, str(app)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (path,) = find_bundles([tmp_path / "data"])
    bundle = read_bundle(path)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    finished = [e["payload"] for e in bundle.events if e["type"] == "message_finished"]
    assert [block["text"] for payload in finished for block in payload["content"]] == ["I'm [email]", "Hi Jane"]
    assert "jane@example.com" not in (bundle.path / "events.ndjson").read_text()


def test_log_events_in_this_packages_own_spans_are_not_kept(tmp_path, provider):
    """A GenAI log event emitted while one of otel_session's own spans is current (the API records
    those facts itself) is let go when that span ends: nothing is kept for a span that ended."""
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import LoggerProvider

    logger_provider = LoggerProvider()
    recorder = otel_session.configure(tmp_path, tracer_provider=provider, logger_provider=logger_provider)
    logger = logger_provider.get_logger("genai")
    with otel_session.session("own"), otel_session.run(agent="own") as run:
        with otel_session.turn(0, state="greet", required_slots=[], slots={}):
            span_context = trace.get_current_span().get_span_context()
            logger.emit(LogRecord(event_name="gen_ai.user.message", body={"content": "hello"}))
    assert recorder.take_log_events(span_context.trace_id, span_context.span_id) == []
    assert run.run_id


LOGGING_SET_UP_LATER_APP = textwrap.dedent(
    """
    import sys
    import otel_session
    from opentelemetry import _logs, trace
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    recorder = otel_session.configure(sys.argv[1])        # before the app's logging is set up
    _logs.set_logger_provider(LoggerProvider())
    tracer = trace.get_tracer("genai.instrumentation")
    with otel_session.session("later"), otel_session.run(agent="tiny"):
        with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
            _logs.get_logger("genai").emit(LogRecord(event_name="gen_ai.user.message", body={"content": "hi"}))
    recorder.shutdown()
    """
)


def test_a_global_logger_provider_set_after_configure_is_read_from_the_next_run(tmp_path):
    app = tmp_path / "app.py"
    app.write_text(LOGGING_SET_UP_LATER_APP)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    result = subprocess.run([sys.executable, str(app), str(tmp_path / "data")], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (path,) = find_bundles([tmp_path / "data"])
    finished = [e["payload"] for e in read_bundle(path).events if e["type"] == "message_finished"]
    assert [block["text"] for payload in finished for block in payload["content"]] == ["hi"]
