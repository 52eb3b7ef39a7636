"""``otel-session facts`` and ``otel-session replay`` through click's CliRunner."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.bundle.read import read_bundle
from otel_session.replay.reduce import canonical_json, replay_state

SCRIPT = [
    ("run_started", {"kind": "live", "agent": "booking"}, {}),
    ("turn_started", {"state": "greet", "required_slots": ["date"]}, {"turn_index": 0}),
    ("message_started", {"role": "assistant"}, {"turn_index": 0, "message_id": "a0"}),
    ("assistant_delta", {"index": 0, "kind": "text", "delta": "Which "}, {"turn_index": 0, "message_id": "a0"}),
    ("assistant_delta", {"index": 0, "kind": "text", "delta": "day?"}, {"turn_index": 0, "message_id": "a0"}),
    ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "Which day?"}]},
     {"turn_index": 0, "message_id": "a0"}),
    ("slot_write", {"slot": "party_size", "value": "hmac:4", "source": "nlu"}, {"turn_index": 0}),
    ("slot_diff", {"slot": "phone", "value": "mask:str:11"}, {"turn_index": 0}),
    ("transition_verdict", {"from": "greet", "to": "ask_date", "reason": "date missing", "candidates": []}, {"turn_index": 0}),
    ("turn_finished", {"state": "ask_date", "required_slots": ["date"], "missing_required_slots": ["date"]}, {"turn_index": 0}),
    ("turn_started", {"state": "ask_date", "required_slots": ["date"]}, {"turn_index": 1}),
    ("message_started", {"role": "assistant"}, {"turn_index": 1, "message_id": "a1"}),
    ("assistant_delta", {"index": 0, "kind": "text", "delta": "And the day?"}, {"turn_index": 1, "message_id": "a1"}),
    ("turn_finished", {"state": "ask_date", "required_slots": ["date"], "missing_required_slots": ["date"]}, {"turn_index": 1}),
]


@pytest.fixture
def recorded(tmp_path, record_run):
    return record_run("call-7", SCRIPT)


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_facts_prints_a_turn_table(tmp_path, recorded):
    result = _invoke("facts", "call-7", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"session call-7  run {recorded.name}  (latest run: no --run given)"
    assert lines[1] == "integrity: complete"
    header = lines[2].split()
    assert header[:2] == ["turn", "state"]
    assert lines[3].split() == ["0", "greet", "→", "ask_date", "party_size,", "phone*", "date", "ask_date", "(date", "missing)",
                                "-", "-"]
    assert lines[4].split()[-2:] == ["date", "-"]  # turn 1 asked for the date again; no model call recorded


def test_facts_json_with_an_explicit_run(tmp_path, recorded):
    result = _invoke("facts", "call-7", "--run", recorded.name, "--dir", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    facts = json.loads(result.output)
    assert (facts["run_id"], facts["fallback_to_latest_run"]) == (recorded.name, False)
    assert [turn["repeated_asks"] for turn in facts["turns"]] == [[], ["date"]]


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["facts", "nobody"], 1, "session 'nobody' has no runs"),
        (["facts", "call-7", "--run", f"run-{uuid.UUID(int=1)}"], 1, "not found in session 'call-7'"),
        (["facts", "call-7", "--run", "run-nope"], 2, "malformed run id"),
        (["replay", "call-7", "not-a-run", "--at", "3"], 2, "malformed run id"),
        (["replay", "nobody", f"run-{uuid.UUID(int=1)}"], 1, "session 'nobody' has no runs"),
        (["replay", "call-7"], 2, "Missing argument"),
    ],
)
def test_unknown_or_malformed_ids(tmp_path, recorded, args, exit_code, message):
    result = _invoke(*args, "--dir", str(tmp_path))
    assert result.exit_code == exit_code
    assert message in result.output


def test_run_of_another_session_names_both(tmp_path, recorded, record_run):
    other = record_run("call-8", SCRIPT[:2])
    result = _invoke("facts", "call-7", "--run", other.name, "--dir", str(tmp_path))
    assert result.exit_code == 1
    assert "call-8" in result.output and "call-7" in result.output and other.name in result.output


def test_replay_at_seq_shows_the_partial_message(tmp_path, recorded):
    result = _invoke("replay", "call-7", recorded.name, "--at", "4", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert f"run {recorded.name} at seq 4 of {len(SCRIPT)}" in result.output
    assert "assistant a0  [partial]" in result.output and "text: Which \n" in result.output


def test_replay_json_is_the_canonical_state(tmp_path, recorded):
    result = _invoke("replay", "call-7", recorded.name, "--at", "9", "--dir", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    expected = canonical_json(replay_state(read_bundle(recorded).events, 9))
    assert result.output.encode() == expected + b"\n"
    assert json.loads(result.output)["slots"] == {"party_size": "hmac:4", "phone": "mask:str:11"}
