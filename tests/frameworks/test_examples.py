"""The framework examples in docs/examples run as their docstrings say — under
``opentelemetry-instrument``, with no otel-session code in them — and leave the bundles they
describe (the instrumentors are found through their ``opentelemetry_instrumentor`` entry points)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from otel_session.replay.facts import build_session_facts, load_session_facts
from otel_session.bundle.read import BundleStatus
from otel_session.testing import bundles

from .conftest import EXAMPLES

pytestmark = pytest.mark.slow


def run_instrumented(example: str, root: Path, **env: str) -> str:
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "OPENAI_"))}
    environment.update(OTEL_SESSION_DIR=str(root), OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
                       OTEL_LOGS_EXPORTER="none", **env)
    done = subprocess.run([str(instrument), sys.executable, str(EXAMPLES / example)], env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_instrumentors_are_registered_for_opentelemetry_instrument():
    names = {point.name: point.value for point in entry_points(group="opentelemetry_instrumentor")}
    assert names["otel_session_langgraph"] == "otel_session.instrument.langgraph:LangGraphInstrumentor"
    assert names["otel_session_agents"] == "otel_session.instrument.agents_sdk:AgentsSdkInstrumentor"


@pytest.mark.parametrize("setting", [
    {"OTEL_SESSION_REQUIRED_SLOTS": "booking=date,party_size"},
    {"OTEL_SESSION_LANGGRAPH_REQUIRED_SLOTS": '{"booking": ["date", "party_size"]}'},  # the deprecated spelling
], ids=["required-slots", "langgraph-required-slots"])
def test_the_langgraph_example(tmp_path, setting):
    pytest.importorskip("langgraph")
    out = run_instrumented("langgraph_booking.py", tmp_path, **setting)
    assert "caller: 'friday then' -> agent: 'Booked for 2 on friday.'" in out
    runs = sorted(bundles(tmp_path), key=lambda run: run.manifest["created_at"])
    assert [run.status for run in runs] == [BundleStatus.COMPLETE] * 3
    assert {run.session_id for run in runs} == {"call-1"}
    turns = [build_session_facts(run)["turns"][0] for run in runs]
    assert [turn["missing_required_slots"] for turn in turns] == [["date"], ["date"], []]
    assert [(turn["verdict"]["from"], turn["verdict"]["to"]) for turn in turns] == [
        ("understand", "ask_date"), ("understand", "ask_date"), ("understand", "confirm")]
    assert [(w["slot"], w["source"]) for w in turns[2]["slot_writes"]] == [("attempts", "understand"), ("date", "understand")]


def test_the_agents_sdk_example(tmp_path):
    pytest.importorskip("agents")
    out = run_instrumented("agents_sdk_booking.py", tmp_path)
    assert "agent: 'check_availability says: 19:00 is free'" in out
    (run,) = bundles(tmp_path)
    assert run.status is BundleStatus.COMPLETE and run.session_id == "table-for-two"
    first, second, third = load_session_facts(tmp_path, "table-for-two")["turns"]
    assert [(g["name"], g["passed"]) for g in first["guards"]] == [("no_card_numbers", True)]
    assert (first["verdict"]["to"], first["verdict"]["candidates"]) == ("booker", ["booker", "billing"])
    assert [tool["name"] for tool in second["tools"]] == ["check_availability"]
    assert [(g["name"], g["passed"]) for g in third["guards"]] == [("polite", True)]
