"""pydantic-ai's structured output read as slots with no code in the app (``normalize/state.py``):
each field of an agent run's ``final_result`` a ``slot_write``, and with required slots declared for
the agent (``OTEL_SESSION_REQUIRED_SLOTS``) the turn's missing ones — from the spans the real
pydantic-ai emitted (``fixtures/frameworks/pydanticai/spans-slots.jsonl``, recorded by
``pydanticai_slots.py``), live through a collector, and in process with only ``configure()``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.core.config import ENV_REQUIRED_SLOTS
from otel_session.normalize import SpanData, normalize_span
from otel_session.redact import RedactionPolicy, Redactor
from otel_session.replay.facts import build_session_facts
from otel_session.testing import bundles, running_collectors, wait_for

from ..collector.thirdparty_venv import framework_python
from .journals import messages, recorded_runs

HERE = Path(__file__).resolve().parent
FIXTURE = "pydanticai/spans-slots.jsonl"
DECLARED = "booker=party_size,date,time"
CONTACT = "ann@example.com"


def facts_of(root: Path) -> dict[str, Any]:
    (bundle,) = bundles(root)
    return build_session_facts(bundle)


def assert_booking_slots(facts: dict[str, Any], *, declared: bool = True) -> None:
    first, second = facts["turns"]
    assert (first["ask"], second["ask"]) == ("a table for two please, mail [email]", "friday at seven")
    for turn in (first, second):
        assert [(w["slot"], w["source"]) for w in turn["slot_writes"]] == [
            ("party_size", "output"), ("contact", "output"), ("date", "output"), ("time", "output")]
        assert all(isinstance(w["value"], str) and w["value"].startswith("hmac-sha256:")
                   for w in turn["slot_writes"] if w["slot"] in ("party_size", "contact"))  # the slot policy's hash
    if declared:
        assert first["required_slots_in_state"] == second["required_slots_in_state"] == ["party_size", "date", "time"]
        assert first["missing_required_slots"] == ["date", "time"]
        assert second["missing_required_slots"] == []
    else:
        assert first["missing_required_slots"] is second["missing_required_slots"] is None
        assert first["required_slots_in_state"] == []


def assert_no_canary(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert CONTACT.encode() not in path.read_bytes(), path


def test_the_recorded_output_is_slots_and_the_declaration_gives_the_missing_ones(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, DECLARED)
    (events,) = recorded_runs(FIXTURE, tmp_path)
    # The tool's return sent back with the next ask is the tool's message, not the user's words.
    assert [m for m in messages(events) if m[0] in ("user", "tool")] == [
        ("user", "a table for two please, mail [email]"), ("tool", "Final result processed."), ("user", "friday at seven")]
    assert_booking_slots(facts_of(tmp_path))
    assert_no_canary(tmp_path)
    table = CliRunner().invoke(main, ["facts", "pydanticai-booking", "--dir", str(tmp_path)]).output.splitlines()
    header = next(line for line in table if line.startswith("turn"))
    assert header.split()[:7] == ["turn", "ask", "reply", "tools", "slots", "written", "missing"]
    rows = [line for line in table if line[:1] in ("0", "1")]
    assert [row.split("  ")[0] for row in rows] == ["0", "1"]
    assert "party_size, contact, date, time  date, time" in rows[0] and rows[1].count(" - ") >= 2


def test_without_a_declaration_the_slots_are_written_and_nothing_is_called_missing(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_REQUIRED_SLOTS, raising=False)
    monkeypatch.delenv("OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS", raising=False)
    (events,) = recorded_runs(FIXTURE, tmp_path)
    assert not [e for e in events if e["type"] == "turn_finished"]
    assert_booking_slots(facts_of(tmp_path), declared=False)


def test_a_declaration_for_another_agent_leaves_this_one_alone(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, "support=order_id")
    recorded_runs(FIXTURE, tmp_path)
    assert_booking_slots(facts_of(tmp_path), declared=False)


@pytest.mark.parametrize(("final_result", "written", "missing"), [
    ('{"date": "friday", "time": null}', [("date", "friday"), ("time", None)], ["party_size", "time"]),
    ("a plain text answer", [], ["party_size", "date", "time"]),  # text output: no slot filled
    (None, [], ["party_size", "date", "time"]),  # the run failed before its output
])
def test_an_agent_run_span_maps_its_output(monkeypatch, final_result, written, missing):
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, DECLARED)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booker", "agent_name": "booker"}
    if final_result is not None:
        attributes["final_result"] = final_result
    span = SpanData(1, 2, 3, "invoke_agent booker", 10, 20, attributes, scope_name="pydantic-ai")
    events = normalize_span(span)
    assert [(e.payload["slot"], e.payload["value"]) for e in events if e.type == "slot_write"] == written
    (finished,) = [e for e in events if e.type == "turn_finished"]
    assert finished.payload == {"required_slots": ["party_size", "date", "time"], "missing_required_slots": missing}
    assert finished.at_ns == 20


def test_inside_a_turn_the_app_records_the_writes_are_that_turns_and_it_says_what_it_requires(monkeypatch):
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, DECLARED)
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "booker",
                  "final_result": '{"date": "friday"}', "otel_session.turn.index": 3}
    events = normalize_span(SpanData(1, 2, 3, "invoke_agent booker", 10, 20, attributes, scope_name="pydantic-ai"))
    assert [(e.type, e.turn_index, e.payload.get("slot")) for e in events] == [("slot_write", 3, "date")]


@pytest.mark.slow
def test_live_through_the_collector(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_REQUIRED_SLOTS, DECLARED)  # the collector's setting: it maps the spans
    python = framework_python("pydanticai")
    root = tmp_path / "collected"
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2,
                            redactor=Redactor(RedactionPolicy(), key=b"state-slots")) as make:
        collector = make(root)
        done = subprocess.run([str(python), str(HERE / "pydanticai_slots.py"), "--otlp", f"127.0.0.1:{collector.grpc_port}"],
                              env=os.environ.copy(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        wait_for(lambda: [b for b in bundles(root) if b.capture and b.capture.get("status") != "recording"], timeout=60)
    assert_booking_slots(facts_of(root))
    assert_no_canary(root)


@pytest.mark.slow
def test_in_process_with_only_configure(tmp_path):
    python = framework_python("pydanticai")
    root = tmp_path / "bundles"
    done = subprocess.run([str(python), str(HERE / "pydanticai_slots.py"), "--dir", str(root)],
                          env={**os.environ, ENV_REQUIRED_SLOTS: DECLARED}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_booking_slots(facts_of(root))
    assert_no_canary(root)
