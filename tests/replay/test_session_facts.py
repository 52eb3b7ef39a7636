"""Facts of a whole session (SPEC §7.2, issue 18): a chat service makes one run per user message,
so "why did it ask for the date twice?" spans runs. Real bundles through the real writer; the CLI
through click's runner; the viewer's API through its test client."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from otel_session.cli import main
from otel_session.replay.facts import build_session_facts, build_session_wide_facts
from otel_session.bundle.read import read_bundle
from otel_session.replay.resolve import SessionNotFound
from otel_session.viewer import create_app

T0 = 1_800_000_000_000_000_000
SECOND = 10**9


def _run_id(n: int) -> str:
    return f"run-{uuid.UUID(int=n)}"


def one_turn(user: str, assistant: str, *, state: str, missing: list[str], writes=()) -> list[tuple]:
    """One run of a chat service: one user message, one turn, the agent's reply."""
    turn = {"turn_index": 0}
    steps = [("run_started", {"kind": "live", "agent": "booking"}, {}),
             ("turn_started", {"state": "ask", "required_slots": ["date", "party_size"]}, turn),
             ("message_started", {"role": "user"}, {**turn, "message_id": "u"}),
             ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": user}]},
              {**turn, "message_id": "u"})]
    steps += [("slot_write", {"slot": slot, "value": value, "previous": None, "source": "nlu"}, turn) for slot, value in writes]
    steps += [("message_started", {"role": "assistant"}, {**turn, "message_id": "a"}),
              ("assistant_delta", {"index": 0, "kind": "text", "delta": assistant}, {**turn, "message_id": "a"}),
              ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": assistant}]},
               {**turn, "message_id": "a"}),
              ("turn_finished", {"state": state, "required_slots": ["date", "party_size"], "missing_required_slots": missing}, turn),
              ("run_finished", {"status": "ok"}, {})]
    return steps


@pytest.fixture
def chat(record_run):
    """Session ``chat-1``: three runs of one turn each, written out of order; the date is asked for
    in run 1 and again in run 2, then given in run 3. ``chat-2`` (another session) lies between."""
    third = record_run("chat-1", one_turn("Friday", "Booked.", state="done", missing=[], writes=[("date", "h:fri")]),
                       run_id=_run_id(3), created_at_ns=T0 + 3 * SECOND)
    first = record_run("chat-1", one_turn("table for 2", "Which day?", state="ask", missing=["date"],
                                          writes=[("party_size", "h:2")]),
                       run_id=_run_id(1), created_at_ns=T0 + 1 * SECOND)
    record_run("chat-2", one_turn("hi", "Which day?", state="ask", missing=["date"]), run_id=_run_id(9),
               created_at_ns=T0 + 2 * SECOND)
    second = record_run("chat-1", one_turn("soon", "Sorry, which day?", state="ask", missing=["date"]),
                        run_id=_run_id(2), created_at_ns=T0 + 2 * SECOND + 1000)
    return first, second, third


def test_repeated_asks_are_found_across_run_boundaries(tmp_path, chat):
    first, second, _third = chat
    facts = build_session_wide_facts(tmp_path, "chat-1")
    assert facts["scope"] == "session" and facts["session_id"] == "chat-1"
    assert [run["run_id"] for run in facts["runs"]] == [_run_id(1), _run_id(2), _run_id(3)]  # created_at ascending
    assert {key: facts["runs"][0][key] for key in ("kind", "agent")} == {"kind": "live", "agent": "booking"}
    assert [(turn["run_id"], turn["turn_index"]) for turn in facts["turns"]] == [(_run_id(n), 0) for n in (1, 2, 3)]
    assert [turn["repeated_asks"] for turn in facts["turns"]] == [[], ["date"], []]
    assert facts["repeated_asks"] == [{"run_id": _run_id(2), "turn_index": 0, "slots": ["date"],
                                       "asked_before_in": {"run_id": _run_id(1), "turn_index": 0}}]
    # Each run alone cannot tell: the repeat is only visible across runs.
    assert build_session_facts(read_bundle(second))["turns"][0]["repeated_asks"] == []
    # Isolation: no turn, message or slot of chat-2 appears; a turn's slots are its own run's.
    assert [message["text"] for turn in facts["turns"] for message in turn["messages"]] == [
        "table for 2", "Which day?", "soon", "Sorry, which day?", "Friday", "Booked."]
    assert facts["turns"][1]["slots"] == {} and facts["turns"][0]["slots"] == {"party_size": "h:2"}
    assert facts["turns"][1]["state_before"] == "ask"


def test_a_session_with_no_runs_is_not_found(tmp_path, chat):
    with pytest.raises(SessionNotFound):
        build_session_wide_facts(tmp_path, "nobody")


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_cli_all_runs_names_each_turns_run(tmp_path, chat):
    result = _invoke("facts", "chat-1", "--all-runs", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "session chat-1  3 run(s), oldest first"
    assert lines[1].split()[:3] == ["run", "1", _run_id(1)] and lines[1].endswith("integrity: complete")
    assert lines[4].split()[:2] == ["run", "turn"]
    assert lines[6].split()[:2] == ["2", "0"] and lines[6].split()[-2:] == ["date", "-"]  # run 2 asked again
    assert "asked again in run 2 turn 0: date (already missing after run 1 turn 0)" in lines
    as_json = json.loads(_invoke("facts", "chat-1", "--all-runs", "--json", "--dir", str(tmp_path)).output)
    assert as_json == build_session_wide_facts(tmp_path, "chat-1")


def test_cli_all_runs_refuses_a_run_id(tmp_path, chat):
    result = _invoke("facts", "chat-1", "--all-runs", "--run", _run_id(1), "--dir", str(tmp_path))
    assert result.exit_code == 2 and "exclude each other" in result.output


@pytest.fixture
def eval_session(tmp_path, writer):
    run = writer.open_run(session_id="ev-1", run_id=_run_id(5), kind="eval", eval_id="nightly", created_at_ns=T0)
    for event_type, payload, ids in one_turn("x", "Which day?", state="ask", missing=["date"]):
        run.append(event_type, payload, at_ns=T0, **ids)
    run.close()
    writer.force_flush()


@pytest.mark.parametrize("extra", [[], ["--all-runs"]])
def test_facts_on_an_eval_session_say_it_is_one_and_how_to_ask(tmp_path, eval_session, extra):
    result = _invoke("facts", "ev-1", *extra, "--dir", str(tmp_path))
    assert result.exit_code == 1
    assert "eval session (eval 'nightly')" in result.output and "--evals" in result.output
    found = _invoke("facts", "ev-1", *extra, "--evals", "--json", "--dir", str(tmp_path))
    assert found.exit_code == 0, found.output
    facts = json.loads(found.output)
    assert (facts["runs"][0] if extra else facts)["kind"] == "eval"


def test_session_wide_facts_never_mix_live_and_eval_runs(tmp_path, chat, writer):
    """An eval episode of a live session's id is no turn that followed the live conversation."""
    run = writer.open_run(session_id="chat-1", run_id=_run_id(6), kind="eval", eval_id="nightly", created_at_ns=T0)
    for event_type, payload, ids in one_turn("x", "Which day?", state="ask", missing=["date"]):
        run.append(event_type, payload, at_ns=T0, **ids)
    run.close()
    writer.force_flush()
    live = build_session_wide_facts(tmp_path, "chat-1")
    evals = build_session_wide_facts(tmp_path, "chat-1", include_evals=True)
    assert [entry["run_id"] for entry in live["runs"]] == [_run_id(1), _run_id(2), _run_id(3)]
    assert [(entry["run_id"], entry["kind"]) for entry in evals["runs"]] == [(_run_id(6), "eval")]
    assert evals["repeated_asks"] == []


def test_an_eval_run_asked_for_by_id_says_how_to_ask(tmp_path, eval_session):
    result = _invoke("replay", "ev-1", _run_id(5), "--dir", str(tmp_path))
    assert result.exit_code == 1 and "is an eval run (eval 'nightly')" in result.output and "--evals" in result.output
    assert _invoke("replay", "ev-1", _run_id(5), "--evals", "--dir", str(tmp_path)).exit_code == 0


@pytest.mark.parametrize("command", [["facts", "chat-1"], ["facts", "chat-1", "--all-runs"], ["replay", "chat-1", _run_id(1)]])
def test_a_dir_pointing_nowhere_says_so(tmp_path, command):
    missing = tmp_path / "no-such-root"
    result = _invoke(*command, "--dir", str(missing))
    assert result.exit_code == 1
    assert f"no bundle root at {missing} (--dir)" in result.output and "no runs" not in result.output


def test_api_session_scope(tmp_path, chat):
    client = create_app({"BUNDLE_DIR": str(tmp_path), "TESTING": True}).test_client()
    response = client.get("/api/sessions/chat-1/facts?scope=session")
    assert response.status_code == 200
    assert response.get_json() == build_session_wide_facts(tmp_path, "chat-1")
    run_scope = client.get("/api/sessions/chat-1/facts?scope=run").get_json()
    assert run_scope["run_id"] == _run_id(3) and run_scope["fallback_to_latest_run"] is True
    for url, status, code in [
        ("/api/sessions/chat-1/facts?scope=session&run_id=" + _run_id(1), 400, "bad_parameter"),
        ("/api/sessions/chat-1/facts?scope=everything", 400, "bad_parameter"),
        ("/api/sessions/nobody/facts?scope=session", 404, "session_not_found"),
    ]:
        answer = client.get(url)
        assert (answer.status_code, answer.get_json()["error"]) == (status, code), url
