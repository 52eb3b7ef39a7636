"""Pipecat's own tracing → sessions, turns, messages, tools, interruptions and voice latency.

The real pipecat-ai pipeline (``tests/voice/pipecat_app.py``: its OpenAI LLM service against the
loopback mock, only STT/TTS replaced since no cloud service runs here), recorded both ways a user
would: exporting to ``otel-session collect`` with the official OTLP exporter, and in process with
``otel_session.configure()`` on the app's tracer provider.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otel_session import cli
from otel_session.replay.facts import build_session_wide_facts, load_session_facts
from otel_session.replay.latency import ENV_SLOW_TURN_MS
from otel_session.testing import bundles, running_collectors, wait_for

from .conftest import CANARY_EMAIL, run_pipecat

pytestmark = pytest.mark.slow


def _sealed(root: Path) -> None:
    wait_for(lambda: any(b.capture and b.capture.get("status") != "recording" for b in bundles(root)))


@pytest.fixture(scope="module")
def collected(mock_llm, tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("collected")
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2) as make:
        collector = make(root)
        run_pipecat(mock_llm.base_url, "call-collected", "--otlp", f"127.0.0.1:{collector.grpc_port}")
        _sealed(root)
    return root, "call-collected"


@pytest.fixture(scope="module")
def in_process(mock_llm, tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("in-process")
    run_pipecat(mock_llm.base_url, "call-in-process", "--in-process", str(root))
    return root, "call-in-process"


@pytest.fixture(scope="module")
def in_process_no_code(mock_llm, tmp_path_factory) -> tuple[Path, str]:
    """Only ``otel_session.configure(tracer_provider=…)`` on the provider Pipecat traces to: no
    session or run opened in the app (the collector's rule, in process)."""
    root = tmp_path_factory.mktemp("in-process-no-code")
    run_pipecat(mock_llm.base_url, "call-no-code", "--in-process", str(root), "--no-code")
    return root, "call-no-code"


@pytest.fixture(params=["collected", "in_process", "in_process_no_code"])
def recorded(request) -> tuple[Path, str]:
    return request.getfixturevalue(request.param)


@pytest.fixture
def facts(recorded) -> dict[str, Any]:
    return load_session_facts(*recorded)


def test_the_conversation_is_a_session_with_one_run_of_its_turns(facts):
    assert facts["session_id"] in ("call-collected", "call-in-process", "call-no-code")
    assert facts["integrity"]["status"] == "complete"
    assert [turn["turn_index"] for turn in facts["turns"]] == [0, 1, 2]
    assert all(turn["finished"] for turn in facts["turns"])
    assert facts["notes"] == []


def test_each_turn_holds_the_callers_words_and_the_agents_reply(facts):
    said = [[(m["role"], m["text"]) for m in turn["messages"] if m["role"] in ("user", "assistant") and m["text"]]
            for turn in facts["turns"]]
    assert said[0] == [("user", "what is the weather"), ("assistant", 'get_weather says: {"forecast": "sunny"}')]
    assert said[1][0] == ("user", "and tomorrow")
    assert said[2][0][0] == "user" and said[2][0][1].startswith("thanks, mail it to ")


def test_what_the_caller_says_is_redacted_before_it_reaches_disk(recorded, facts):
    root, _ = recorded
    assert not any(CANARY_EMAIL.encode() in path.read_bytes() for path in root.rglob("*") if path.is_file())
    assert all(CANARY_EMAIL not in m["text"] for turn in facts["turns"] for m in turn["messages"])


def test_a_tool_call_seen_only_in_the_next_model_input_is_a_tool_execution(facts):
    (tool,) = facts["turns"][0]["tools"]
    assert (tool["name"], tool["status"]) == ("get_weather", "ok")
    roles = [message["role"] for message in facts["turns"][0]["messages"]]
    assert roles.index("user") < roles.index("tool") < len(roles) - 1  # call, result, then the spoken reply


def test_the_caller_cutting_the_bot_off_is_an_interruption(facts):
    assert facts["turns"][0]["interrupted"] is False  # the bot had finished when the caller spoke again
    assert facts["turns"][1]["interrupted"] is True  # the caller spoke over the bot's reply


def test_voice_latency_per_turn_and_per_run(facts):
    for turn in facts["turns"][:2]:
        latency = turn["latency"]
        assert 0 < latency["llm_ttft_ms"] < latency["user_to_agent_ms"]  # the model answers inside the wait
    summary = facts["latency"]
    measured = sorted(turn["latency"]["user_to_agent_ms"] for turn in facts["turns"] if turn["latency"]
                      and "user_to_agent_ms" in turn["latency"])
    assert summary["user_to_agent_ms"] == {"count": len(measured), "p50": measured[(len(measured) + 1) // 2 - 1],
                                           "p95": measured[-1]}
    assert summary["slow_threshold_ms"] == 1500.0


def test_turns_over_the_threshold_are_flagged_slow(recorded, monkeypatch):
    root, session_id = recorded
    latencies = {turn["turn_index"]: turn["latency"]["user_to_agent_ms"]
                 for turn in load_session_facts(root, session_id)["turns"] if "user_to_agent_ms" in (turn["latency"] or {})}
    threshold = min(latencies.values())  # every measured turn but the quickest is over it
    expected = [index for index, value in sorted(latencies.items()) if value > threshold]
    assert expected  # the caller's three turns are not all equally quick

    flagged = load_session_facts(root, session_id, slow_turn_ms=threshold)
    assert [turn["turn_index"] for turn in flagged["turns"] if turn["slow"]] == expected
    assert [slow["turn_index"] for slow in flagged["latency"]["slow_turns"]] == expected
    monkeypatch.setenv(ENV_SLOW_TURN_MS, str(threshold))  # the same through the environment
    assert load_session_facts(root, session_id)["latency"]["slow_turns"] == flagged["latency"]["slow_turns"]
    everywhere = build_session_wide_facts(root, session_id)
    assert [(slow["run_id"], slow["turn_index"]) for slow in everywhere["latency"]["slow_turns"]] == [
        (flagged["run_id"], index) for index in expected]

    shown = CliRunner().invoke(cli.main, ["facts", session_id, "--dir", str(root), "--slow-turn-ms", str(threshold)])
    assert shown.exit_code == 0, shown.output
    assert [line.split(":")[0] for line in shown.output.splitlines() if line.startswith("slow turn")] == [
        f"slow turn {index}" for index in expected]
    assert f"p95 {max(latencies.values()):.0f} ms" in shown.output
    monkeypatch.setenv(ENV_SLOW_TURN_MS, "soon")
    refused = CliRunner().invoke(cli.main, ["facts", session_id, "--dir", str(root)])
    assert refused.exit_code == 2 and ENV_SLOW_TURN_MS in refused.output


def test_a_turn_sent_before_the_services_inside_it_keeps_their_records_and_latency(mock_llm, tmp_path):
    """One OTLP request holding a turn's span and the spans inside it lists the turn's scope first
    (the exporter groups by scope): the collector journals them in end order all the same."""
    with running_collectors(grpc_address="127.0.0.1:0", http_address="127.0.0.1:0", seal_after_s=0.2) as make:
        collector = make(tmp_path)
        run_pipecat(mock_llm.base_url, "call-regrouped", "--otlp", f"127.0.0.1:{collector.grpc_port}", "--otlp-turn-pairs")
        _sealed(tmp_path)
    turns = load_session_facts(tmp_path, "call-regrouped")["turns"]
    assert [turn["turn_index"] for turn in turns] == [0, 1, 2]
    assert [m["text"] for m in turns[1]["messages"] if m["role"] == "user"] == ["and tomorrow"]
    assert {"user_to_agent_ms", "llm_ttft_ms"} <= set(turns[1]["latency"])  # turn 1 came ahead of its llm spans
