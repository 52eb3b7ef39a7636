"""Ids that hold PII (issue 15 §5): a caller's phone number as the session id, an e-mail address in
the run label or the service name. Every writer (the API, the bundle-writing span exporter, the
collector) stores them as ``Redactor.identifier`` gives them (a stable keyed hash of the PII,
the rest kept), and the CLI and the viewer find the session by the original id."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_session
from otel_session.replay import resolve
from otel_session.instrument.exporter import SessionBundleExporter
from otel_session.redact import Redactor
from otel_session.testing import bundles, capture_bundle
from viewer.store import BundleStore

CALLER = "call-+1 415 555 0142"
PHONE_DIGITS = ("555 0142", "5550142", "555-0142")
EMAIL = "jane.canary@example.com"
PLAIN_CALLER = "call-14155550142"
"""A caller id a directory name holds as it is (no character the layout must encode)."""


def _assert_no_pii(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        for text in (str(path.relative_to(root)), *([path.read_bytes().decode("utf-8", "replace")] if path.is_file() else [])):
            for canary in (*PHONE_DIGITS, EMAIL):
                assert canary not in text, f"{canary!r} in {path}"


def _assert_found_by_original_id(root: Path, count: int = 1) -> None:
    """The CLI, the viewer and ``resolve`` take the caller's original id."""
    stored = Redactor.from_env(root).identifier(CALLER)
    assert stored.startswith("call-hmac-sha256:")
    runs = resolve.session_runs(root, CALLER)
    assert len(runs) == count and {run.session_id for run in runs} == {stored}
    run = runs[0]
    assert resolve.resolve_run(root, CALLER).session_id == stored
    assert [info.session_id for info in BundleStore(root).runs(CALLER)] == [stored] * count
    assert BundleStore(root).resolve(CALLER).run_id == run.run_id
    answer = orjson.dumps(BundleStore(root).session_facts(CALLER)).decode()
    assert stored in answer and not any(canary in answer for canary in (*PHONE_DIGITS, EMAIL))
    env = {**os.environ, "OTEL_SESSION_DIR": str(root)}
    for command in (["facts", CALLER], ["facts", CALLER, "--all-runs"], ["replay", CALLER, run.run_id, "--at", "1"]):
        result = subprocess.run([sys.executable, "-m", "otel_session.cli", *command], env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        assert not any(canary in result.stdout + result.stderr for canary in (*PHONE_DIGITS, EMAIL))


@pytest.fixture
def pii_service(monkeypatch):
    monkeypatch.delenv("OTEL_SESSION_REDACTION_KEY", raising=False)
    monkeypatch.delenv("OTEL_SESSION_REDACT_IDENTIFIERS", raising=False)
    monkeypatch.setenv("OTEL_SERVICE_NAME", f"svc-{EMAIL}")


def test_the_api_stores_ids_holding_pii_hashed(tmp_path, pii_service):
    with capture_bundle(tmp_path):
        for _ in range(2):  # the same caller, the same session directory
            with otel_session.session(CALLER), otel_session.run(agent=f"agent-{EMAIL}"):
                pass
    found = bundles(tmp_path)
    assert len(found) == 2 and len({bundle.path.parent for bundle in found}) == 1
    manifest = found[0].manifest
    assert "hmac-sha256:" in manifest["agent"] and "hmac-sha256:" in manifest["service"]
    _assert_no_pii(tmp_path)
    _assert_found_by_original_id(tmp_path, count=2)


def test_the_bundle_writing_exporter_stores_ids_holding_pii_hashed(tmp_path, pii_service):
    exporter = SessionBundleExporter(tmp_path)
    provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{EMAIL}"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent", attributes={"session.id": CALLER, "gen_ai.agent.name": f"agent-{EMAIL}"}):
        pass
    provider.shutdown()
    (bundle,) = bundles(tmp_path)
    assert bundle.session_id.startswith("call-hmac-sha256:")
    _assert_no_pii(tmp_path)
    _assert_found_by_original_id(tmp_path)


def test_a_uuid_is_an_id_not_a_phone_number():
    """A UUID's digit groups are random: neither an id nor a text loses one as ``[phone]`` (one
    UUID in twelve did), so a session named by a UUID, or a derived one (its run id), is kept."""
    redactor = Redactor()
    for value in ("run-48407148-a2d5-43a9-86f3-3da1475d71aa", "5499d87f-835a-4488-9856-ec9f34b41436"):
        assert redactor.identifier(value) == value and redactor.text(f"request {value}") == f"request {value}"
    assert redactor.text("call 48407148 about 48407148-a2d5-43a9-86f3-3da1475d71aa") == (
        "call [phone] about 48407148-a2d5-43a9-86f3-3da1475d71aa")


def _export_one(endpoint: str, trace_id: int | None = None) -> None:
    """One root span of the caller's session, over the official OTLP/gRPC exporter."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class SameTrace(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            return trace_id if trace_id is not None else super().generate_trace_id()

    provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{EMAIL}"}), id_generator=SameTrace())
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    with provider.get_tracer("test").start_as_current_span("invoke_agent", attributes={"session.id": PLAIN_CALLER}):
        pass
    provider.shutdown()


@pytest.mark.parametrize("identifiers", ["hash", "keep"])
def test_the_collectors_log_lines_hold_no_id_holding_pii(tmp_path, pii_service, caplog, monkeypatch, identifiers):
    """Opening, sealing, a late span of a sealed run (known in memory, then from disk), and a root whose sessions directory is a
    file (an exception text naming the path): every line at DEBUG, none names the caller, even
    when ids are kept as given (the paths then hold the number)."""
    monkeypatch.setenv("OTEL_SESSION_REDACT_IDENTIFIERS", identifiers)
    from otel_session.testing import running_collectors, wait_for

    caplog.set_level(logging.DEBUG)
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "sessions").write_text("a file where the sessions directory goes")
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.1) as make:
        collector = make(tmp_path / "bundles")
        _export_one(f"127.0.0.1:{collector.grpc_port}", trace_id=0xB1)
        wait_for(lambda: [bundle for bundle in bundles(tmp_path / "bundles") if bundle.capture.get("status") != "recording"])
        wait_for(lambda: collector.sink.open_run_count == 0)
        _export_one(f"127.0.0.1:{collector.grpc_port}", trace_id=0xB1)  # late: the run is sealed
        wait_for(lambda: collector.counters.snapshot()["rejected"] == 1)
        restarted = make(tmp_path / "bundles")  # knows the sealed run only from disk: its path
        _export_one(f"127.0.0.1:{restarted.grpc_port}", trace_id=0xB1)
        wait_for(lambda: restarted.counters.snapshot()["rejected"] == 1)
        refused = make(blocked)
        _export_one(f"127.0.0.1:{refused.grpc_port}")
        wait_for(lambda: refused.counters.snapshot()["rejected"] == 1)
    assert "a sealed bundle never changes (" in caplog.text and "(invalid_id)" in caplog.text  # the lines under test were logged
    for canary in (*PHONE_DIGITS, EMAIL):
        assert canary not in caplog.text, f"{canary!r} logged"



class _CallId(str):
    """An app's own id type (a ``str`` subclass, as ``enum.StrEnum`` members and id newtypes are)."""


@pytest.mark.parametrize("field", ["tool_call_id", "message_id"])
def test_an_id_of_a_str_subclass_is_redacted_like_a_str(field):
    """The redactor passed a record's tool call or message id through unchanged unless it was an
    exact ``str`` (and an int as it was: digits are a phone number too)."""
    from otel_session.normalize import JournalEvent

    redactor = Redactor()
    for value, expected in ((_CallId(f"call {EMAIL}"), redactor.identifier(f"call {EMAIL}")),
                            (14155550142, redactor.identifier("14155550142"))):
        (event,) = redactor.redact_events([JournalEvent("tool_execution_started", 1, {"name": "t"}, **{field: value})])
        assert getattr(event, field) == expected and type(getattr(event, field)) is str
        assert EMAIL not in getattr(event, field) and "14155550142" not in getattr(event, field)
