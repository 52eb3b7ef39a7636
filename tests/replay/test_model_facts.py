"""Model calls in facts (issue 16 §3, interfaces §2/§3): each assistant message of a model call
carries ``model`` and ``usage`` in its ``message_finished``; facts list them per turn, total them
per run (and per session), and the CLI table shows them."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.replay.facts import build_session_facts, build_session_wide_facts
from otel_session.bundle.read import read_bundle


def _reply(turn: int, message_id: str, text: str, **model_fields) -> list[tuple]:
    ids = {"turn_index": turn, "message_id": message_id}
    return [("message_started", {"role": "assistant"}, ids),
            ("assistant_delta", {"index": 0, "kind": "text", "delta": text}, ids),
            ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": text}], **model_fields},
             ids)]


def _script(usage_first: dict, usage_second: dict) -> list[tuple]:
    steps: list[tuple] = [("run_started", {"kind": "live", "agent": "a"}, {})]
    for turn in (0, 1):
        steps.append(("turn_started", {"state": "ask", "required_slots": ["date"]}, {"turn_index": turn}))
        steps += [("message_started", {"role": "user"}, {"turn_index": turn, "message_id": f"u{turn}"}),
                  ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "hi"}]},
                   {"turn_index": turn, "message_id": f"u{turn}"})]
        if turn == 0:
            steps += _reply(0, "a0", "Let me check.", model="gpt-4o-mini", usage=usage_first)
            steps += _reply(0, "a0b", "Which day?", model="gpt-4o-mini-2024-07-18", usage=usage_second)
        else:
            steps += _reply(1, "a1", "Which day, again?", model="local-llm")  # the model is known, its usage is not
            steps += _reply(1, "a1b", "Still there?", usage={"input_tokens": True, "output_tokens": "7"})  # not counts
        steps.append(("turn_finished", {"state": "ask", "required_slots": ["date"], "missing_required_slots": ["date"]},
                      {"turn_index": turn}))
    return steps


@pytest.fixture
def recorded(record_run):
    return record_run("m-1", _script({"input_tokens": 120, "output_tokens": 35}, {"output_tokens": 12}),
                      run_id=f"run-{uuid.UUID(int=1)}")


def test_model_calls_per_turn_and_usage_totals_per_run(recorded):
    facts = build_session_facts(read_bundle(recorded))
    assert [turn["model_calls"] for turn in facts["turns"]] == [
        [{"message_id": "a0", "model": "gpt-4o-mini", "usage": {"input_tokens": 120, "output_tokens": 35},
          "cost_usd": 120 * 0.15e-6 + 35 * 0.60e-6},
         {"message_id": "a0b", "model": "gpt-4o-mini-2024-07-18", "usage": {"output_tokens": 12}, "cost_usd": 12 * 0.60e-6}],
        [{"message_id": "a1", "model": "local-llm", "usage": {}, "cost_usd": None}],
    ]
    assert facts["usage_totals"] == {"input_tokens": 120, "output_tokens": 47}
    # A model with no price says so: it is never counted as 0.
    assert facts["cost"] == {"usd": 0.0000462, "priced_calls": 2, "unpriced_models": ["local-llm"],
                             "prices_as_of": "2025-08-15"}
    assert facts["turns"][1]["cost"]["usd"] is None and facts["turns"][1]["cost"]["unpriced_models"] == ["local-llm"]


def test_a_run_without_model_calls_knows_no_totals(record_run):
    path = record_run("m-0", [("run_started", {"kind": "live", "agent": "a"}, {})])
    assert build_session_facts(read_bundle(path))["usage_totals"] == {"input_tokens": None, "output_tokens": None}


def test_session_wide_facts_total_every_run(tmp_path, recorded, record_run):
    record_run("m-1", _script({"input_tokens": 1, "output_tokens": 2}, {"input_tokens": 3}),
               run_id=f"run-{uuid.UUID(int=2)}")
    facts = build_session_wide_facts(tmp_path, "m-1")
    assert [run["usage_totals"] for run in facts["runs"]] == [{"input_tokens": 120, "output_tokens": 47},
                                                             {"input_tokens": 4, "output_tokens": 2}]
    assert facts["usage_totals"] == {"input_tokens": 124, "output_tokens": 49}
    assert len([call for turn in facts["turns"] for call in turn["model_calls"]]) == 6


def test_the_cli_table_shows_model_calls_and_usage(tmp_path, recorded):
    result = CliRunner().invoke(main, ["facts", "m-1", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "usage: 120 input tokens, 47 output tokens" in lines
    header = next(line for line in lines if line.startswith("turn"))
    assert header.endswith("model calls (tokens in/out)")
    rows = [line for line in lines if line[:1].isdigit()]
    assert rows[0].endswith("gpt-4o-mini 120/35 $0.000039, gpt-4o-mini-2024-07-18 ?/12 $0.000007")
    assert rows[1].endswith("local-llm ?/?")  # no price: no cost, never $0
    assert "cost: $0.000046 (list prices of 2025-08-15); no price for local-llm" in lines
    as_json = json.loads(CliRunner().invoke(main, ["facts", "m-1", "--json", "--dir", str(tmp_path)]).output)
    assert as_json["usage_totals"] == {"input_tokens": 120, "output_tokens": 47}
    session = CliRunner().invoke(main, ["facts", "m-1", "--all-runs", "--dir", str(tmp_path)]).output.splitlines()
    assert session.count("usage: 120 input tokens, 47 output tokens") == 1  # the session's total
    assert "    usage: 120 input tokens, 47 output tokens" in session  # the run's
