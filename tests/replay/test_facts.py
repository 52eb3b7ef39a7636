"""Session facts over real bundles written by the real BundleWriter, and run resolution."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest

from otel_session.replay.facts import (
    DERIVED_TURNS_NOTE,
    NO_BOUNDARIES_NOTE,
    build_session_facts,
    load_session_facts,
    run_events,
)
from otel_session.bundle.read import read_bundle
from otel_session.replay.reduce import replay_state
from otel_session.replay.resolve import InvalidId, RunNotFound, RunSessionMismatch, SessionNotFound, resolve_run
from otel_session.core.semconv import CAP_PER_TURN as GUARD_CAP

REPO = Path(__file__).resolve().parents[2]


def _turn(index: int, *, state_before: str, state: str, required: list[str], missing: list[str] | None,
          user: str, assistant: list[str], writes=(), diffs=(), guards=(), verdict=None, tools=(), ids=True) -> list[tuple]:
    """One turn of a booking conversation as (type, payload, ids) steps."""
    turn = {"turn_index": index} if ids else {}
    steps: list[tuple] = [("turn_started", {"state": state_before, "required_slots": required, "source": "user"}, turn)]
    steps += [("message_started", {"role": "user"}, {**turn, "message_id": f"u{index}"}),
              ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": user}]},
               {**turn, "message_id": f"u{index}"})]
    for slot, value, source in writes:
        steps.append(("slot_write", {"slot": slot, "value": value, "previous": None, "source": source}, turn))
    for slot, value in diffs:
        steps.append(("slot_diff", {"slot": slot, "value": value, "previous": None}, turn))
    for name, passed in guards:
        steps.append(("guard_evaluated", {"name": name, "passed": passed, "state": state_before}, turn))
    if verdict is not None:
        steps.append(("transition_verdict", verdict, turn))
    for call_id, name, status in tools:
        steps.append(("tool_execution_started", {"name": name, "arguments": {"q": "hmac:00"}}, {**turn, "tool_call_id": call_id}))
        steps.append(("tool_execution_updated", {}, {**turn, "tool_call_id": call_id}))
        steps.append(("tool_execution_finished", {"status": status}, {**turn, "tool_call_id": call_id}))
    message = {**turn, "message_id": f"a{index}"}
    steps.append(("message_started", {"role": "assistant"}, message))
    for chunk in assistant:
        steps.append(("assistant_delta", {"index": 0, "kind": "text", "delta": chunk}, message))
    steps.append(("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "".join(assistant)}]},
                  message))
    finished = {"state": state, "required_slots": required}
    if missing is not None:
        finished["missing_required_slots"] = missing
    steps.append(("turn_finished", finished, turn))
    return steps


def _booking_script(ids: bool = True) -> list[tuple]:
    return [
        ("run_started", {"kind": "live", "agent": "booking"}, {}),
        *_turn(0, state_before="greet", state="ask_date", required=["date", "party_size"], missing=["date"],
               user="Table for 4 please", assistant=["Which ", "day?"], writes=[("party_size", "hmac:4a", "extract_party")],
               diffs=[("phone", "mask:str:11")], guards=[("has_party_size", True), ("has_date", False)],
               verdict={"from": "greet", "to": "ask_date", "reason": "date missing", "candidates": ["ask_date", "confirm"]},
               tools=[("c1", "check_availability", "ok")], ids=ids),
        *_turn(1, state_before="ask_date", state="ask_date", required=["date", "party_size"], missing=["date"],
               user="Is there parking?", assistant=["Yes. ", "Which day?"], guards=[("has_date", False)],
               verdict={"from": "ask_date", "to": "ask_date", "reason": "date still missing", "candidates": ["ask_date"]},
               ids=ids),
        *_turn(2, state_before="ask_date", state="confirm", required=[], missing=[], user="Friday",
               assistant=["Booked."], writes=[("date", "hmac:fr", "extract_date")],
               verdict={"from": "ask_date", "to": "confirm", "reason": "all slots", "candidates": ["confirm"]}, ids=ids),
        ("run_finished", {"status": "ok"}, {}),
    ]


def test_booking_run_facts_answer_why_it_asked_twice(record_run):
    path = record_run("call-42", _booking_script())
    facts = build_session_facts(read_bundle(path))

    assert (facts["session_id"], facts["run_id"], facts["fallback_to_latest_run"]) == ("call-42", path.name, False)
    assert facts["integrity"] == {"status": "complete", "diagnostics": []}
    assert facts["notes"] == []
    first, second, third = facts["turns"]
    assert [turn["turn_index"] for turn in facts["turns"]] == [0, 1, 2]
    assert (first["state_before"], first["state"]) == ("greet", "ask_date")
    assert first["required_slots_in_state"] == ["date", "party_size"]
    assert first["missing_required_slots"] == ["date"]
    assert [(w["slot"], w["value"], w["source"]) for w in first["slot_writes"]] == [("party_size", "hmac:4a", "extract_party")]
    assert isinstance(first["slot_writes"][0]["seq"], int)
    assert [(d["slot"], d["value"]) for d in first["unattributed_diffs"]] == [("phone", "mask:str:11")]
    assert first["slots"] == {"party_size": "hmac:4a", "phone": "mask:str:11"}
    assert [(g["name"], g["passed"]) for g in first["guards"]] == [("has_party_size", True), ("has_date", False)]
    assert first["guards_truncated"] == 0
    assert first["verdict"]["to"] == "ask_date" and first["verdict"]["candidates"] == ["ask_date", "confirm"]
    assert [(m["role"], m["text"]) for m in first["messages"]] == [("user", "Table for 4 please"), ("assistant", "Which day?")]
    assert [(t["name"], t["status"]) for t in first["tools"]] == [("check_availability", "ok")]
    assert first["tools"][0]["duration_ms"] == pytest.approx(2.0)  # the fixture clock ticks 1 ms per event
    assert first["repeated_asks"] == []

    assert second["repeated_asks"] == ["date"]
    assert second["slot_writes"] == [] and second["slots"] == first["slots"]

    assert (third["state_before"], third["state"], third["missing_required_slots"]) == ("ask_date", "confirm", [])
    assert third["slots"]["date"] == "hmac:fr"
    assert third["repeated_asks"] == []


def test_turn_boundaries_group_events_without_turn_indexes(record_run):
    path = record_run("call-43", _booking_script(ids=False))
    facts = build_session_facts(read_bundle(path))
    assert [turn["turn_index"] for turn in facts["turns"]] == [0, 1, 2]
    assert facts["turns"][1]["repeated_asks"] == ["date"]
    assert [m["text"] for m in facts["turns"][2]["messages"]] == ["Friday", "Booked."]


def test_missing_slots_are_never_inferred(record_run):
    script = [step for step in _turn(0, state_before="ask_date", state="ask_date", required=["date"], missing=None,
                                     user="hi", assistant=["Which day?"]) if step[0] != "turn_finished"]
    facts = build_session_facts(read_bundle(record_run("call-44", script)))
    (turn,) = facts["turns"]
    assert turn["missing_required_slots"] is None
    assert turn["finished"] is False
    assert turn["required_slots_in_state"] == ["date"]
    assert turn["repeated_asks"] == []


def test_guards_are_capped_and_the_rest_counted(record_run):
    guards = [(f"guard_{n}", n % 2 == 0) for n in range(GUARD_CAP + 6)]
    candidates = [f"state_{n}" for n in range(30)]
    script = _turn(0, state_before="a", state="b", required=[], missing=[], user="x", assistant=["y"], guards=guards,
                   verdict={"from": "a", "to": "b", "reason": "r", "candidates": candidates, "candidates_truncated": 2})
    (turn,) = build_session_facts(read_bundle(record_run("call-45", script)))["turns"]
    assert len(turn["guards"]) == GUARD_CAP and turn["guards_truncated"] == 6
    assert turn["guards"][-1]["name"] == f"guard_{GUARD_CAP - 1}"
    assert len(turn["verdict"]["candidates"]) == GUARD_CAP and turn["verdict"]["candidates_truncated"] == 2 + 6


def test_journal_without_boundaries_is_one_turn_and_says_so(record_run):
    script = [("run_started", {"kind": "live"}, {}),
              ("message_started", {"role": "assistant"}, {"message_id": "m"}),
              ("assistant_delta", {"index": 0, "kind": "text", "delta": "hello"}, {"message_id": "m"}),
              ("slot_write", {"slot": "date", "value": "hmac:1", "source": "tool"}, {})]
    facts = build_session_facts(read_bundle(record_run("call-46", script)))
    assert facts["notes"] == [NO_BOUNDARIES_NOTE]
    (turn,) = facts["turns"]
    assert turn["turn_index"] == 0 and turn["missing_required_slots"] is None
    assert [m["text"] for m in turn["messages"]] == ["hello"]
    assert turn["slot_writes"][0]["slot"] == "date"


def _message(message_id: str, role: str, text: str, *, deltas=(), **payload) -> list[tuple]:
    ids = {"message_id": message_id}
    return [("message_started", {"role": role}, ids),
            *[("assistant_delta", {"index": 0, "kind": "text", "delta": delta}, ids) for delta in deltas],
            ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": text}], **payload}, ids)]


def test_a_journal_without_turns_gets_one_turn_per_user_message(record_run):
    # What a plain OpenAI-SDK app records with no code: messages, model calls and tools, no turns.
    script = [("run_started", {"kind": "live"}, {}),
              *_message("s", "system", "You book tables."),
              *_message("u1", "user", "A table for two?"),
              *_message("a1", "assistant", "Which day?", deltas=["Which ", "day?"], model="gpt-4o-mini",
                        usage={"input_tokens": 12, "output_tokens": 3}),
              *_message("u2", "user", "Friday"),
              ("tool_execution_started", {"name": "book", "arguments": {}}, {"tool_call_id": "c1"}),
              ("tool_execution_finished", {"status": "error", "error": "full"}, {"tool_call_id": "c1"}),
              *_message("a2", "assistant", "Sorry, Friday is full.", model="gpt-4o-mini"),
              ("run_finished", {"status": "ok"}, {})]
    facts = build_session_facts(read_bundle(record_run("call-zero-code", script)))
    assert facts["notes"] == [DERIVED_TURNS_NOTE]
    first, second = facts["turns"]
    assert (first["turn_index"], first["source"], first["ask"], first["reply"]) == (0, "derived", "A table for two?", "Which day?")
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    assert first["model_calls"] == [{"message_id": "a1", "model": "gpt-4o-mini", "usage": {"input_tokens": 12, "output_tokens": 3}}]
    # The clock of record_run ticks once a record: the user message's start to the first delta.
    assert first["time_to_first_token_ms"] is not None and first["time_to_first_token_ms"] > 0
    assert first["duration_ms"] is not None and first["duration_ms"] >= first["time_to_first_token_ms"]
    assert first["errors"] == []
    assert (second["turn_index"], second["ask"], second["reply"]) == (1, "Friday", "Sorry, Friday is full.")
    assert second["time_to_first_token_ms"] is None  # not streamed
    assert second["errors"] == [{"tool": "book", "tool_call_id": "c1"}]
    assert [tool["status"] for tool in second["tools"]] == ["error"]


def test_recorded_turns_say_so_and_give_the_ask_and_reply(record_run):
    facts = build_session_facts(read_bundle(record_run("call-42b", _booking_script())))
    turn = facts["turns"][0]
    assert (turn["source"], turn["ask"], turn["reply"]) == ("recorded", "Table for 4 please", "Which day?")


def test_facts_of_one_run_never_include_another_runs_events(record_run):
    script_a = _booking_script()
    script_b = [("turn_started", {"state": "leak", "required_slots": ["secret"]}, {"turn_index": 0}),
                ("slot_write", {"slot": "secret", "value": "hmac:bb", "source": "b"}, {"turn_index": 0}),
                ("turn_finished", {"state": "leak", "required_slots": ["secret"], "missing_required_slots": []}, {"turn_index": 0})]
    path_a = record_run("call-47", script_a)
    path_b = record_run("call-47", script_b)
    # A record of run B that ended up in run A's journal (e.g. a misrouted write) must not leak.
    foreign = read_bundle(path_b).events[1]
    with open(path_a / "events.ndjson", "ab") as journal:
        journal.write(orjson.dumps({**foreign, "seq": 10_000}) + b"\n")

    facts_a = build_session_facts(read_bundle(path_a))
    dumped = orjson.dumps(facts_a["turns"])
    assert b"hmac:bb" not in dumped and b"leak" not in dumped
    assert facts_a["integrity"]["status"] == "invalid"
    assert any("another session or run" in note for note in facts_a["notes"])
    replayed = replay_state(run_events(read_bundle(path_a)))
    assert replayed["run_id"] == path_a.name and "secret" not in replayed["slots"]
    facts_b = build_session_facts(read_bundle(path_b))
    assert b"hmac:4a" not in orjson.dumps(facts_b) and len(facts_b["turns"]) == 1


def test_integrity_of_a_recording_run_with_a_torn_tail(record_run):
    path = record_run("call-48", _booking_script()[:8], close=False)
    with open(path / "events.ndjson", "ab") as journal:
        journal.write(b'{"seq": 9, "at": "2026-')
    facts = build_session_facts(read_bundle(path))
    assert facts["integrity"]["status"] == "recording"
    assert [d["code"] for d in facts["integrity"]["diagnostics"]] == ["torn_tail"]
    assert facts["turns"][0]["finished"] is False


# -- run resolution ------------------------------------------------------------------------------

SAME_TIME = 1_900_000_000_000_000_000


def _run_id(n: int) -> str:
    return f"run-{uuid.UUID(int=n)}"


@pytest.fixture
def three_runs(record_run):
    """Session ``s1`` with runs 1 (oldest), then 2 and 3 created at the same instant; ``s2`` with run 9."""
    record_run("s1", [], run_id=_run_id(1), created_at_ns=SAME_TIME - 10**9)
    record_run("s1", [], run_id=_run_id(3), created_at_ns=SAME_TIME)
    record_run("s1", [], run_id=_run_id(2), created_at_ns=SAME_TIME)
    record_run("s2", [], run_id=_run_id(9), created_at_ns=SAME_TIME + 10**9)


@pytest.mark.parametrize(
    ("session_id", "run_id", "expected_run", "fallback"),
    [
        ("s1", None, _run_id(3), True),  # created_at tie: run_id descending wins
        ("s1", _run_id(1), _run_id(1), False),
        ("s1", _run_id(2), _run_id(2), False),
        ("s2", None, _run_id(9), True),
    ],
)
def test_resolve_run_binds_the_requested_or_latest_run(tmp_path, three_runs, session_id, run_id, expected_run, fallback):
    resolved = resolve_run(tmp_path, session_id, run_id)
    assert (resolved.session_id, resolved.run_id, resolved.fallback_to_latest_run) == (session_id, expected_run, fallback)
    assert resolved.path.name == expected_run and resolved.run.session_id == session_id


@pytest.mark.parametrize(
    ("session_id", "run_id", "error", "status", "words"),
    [
        ("s1", _run_id(9), RunSessionMismatch, 409, ["s1", "s2", _run_id(9)]),
        ("nobody", None, SessionNotFound, 404, ["nobody"]),
        ("nobody", _run_id(7), SessionNotFound, 404, ["nobody"]),
        ("s1", _run_id(7), RunNotFound, 404, [_run_id(7), "s1"]),
        ("s1", "run-../../etc", InvalidId, 400, ["malformed run id"]),
        ("s1", "RUN-00000000-0000-0000-0000-000000000001", InvalidId, 400, ["malformed run id"]),
        ("", None, InvalidId, 400, ["malformed session id"]),
        ("bad\x00id", None, InvalidId, 400, ["control characters"]),
    ],
)
def test_resolve_run_errors(tmp_path, three_runs, session_id, run_id, error, status, words):
    with pytest.raises(error) as raised:
        resolve_run(tmp_path, session_id, run_id)
    assert raised.value.http_status == status
    assert all(word in str(raised.value) for word in words)
    if error is InvalidId:
        assert isinstance(raised.value, ValueError)


def test_eval_runs_resolve_only_when_asked(tmp_path, writer):
    run = writer.open_run(session_id="s-eval", run_id=_run_id(5), kind="eval", eval_id="nightly")
    run.close()
    writer.force_flush()
    with pytest.raises(SessionNotFound):
        resolve_run(tmp_path, "s-eval")
    assert resolve_run(tmp_path, "s-eval", include_evals=True).run.kind == "eval"


def test_load_session_facts_reports_the_fallback(tmp_path, record_run):
    older = record_run("s3", _booking_script(), created_at_ns=SAME_TIME)
    newer = record_run("s3", _booking_script()[:3], created_at_ns=SAME_TIME + 10**6)
    latest = load_session_facts(tmp_path, "s3")
    assert (latest["run_id"], latest["fallback_to_latest_run"]) == (newer.name, True)
    chosen = load_session_facts(tmp_path, "s3", older.name)
    assert (chosen["run_id"], chosen["fallback_to_latest_run"], len(chosen["turns"])) == (older.name, False, 3)


@pytest.mark.parametrize(
    "journal",
    sorted(p for p in (REPO / "fixtures" / "replay").glob("*.ndjson") if not p.name.endswith(".expected.ndjson")),
    ids=lambda path: path.stem,
)
def test_facts_of_every_shared_fixture_journal_never_raise(tmp_path, journal):
    (tmp_path / "events.ndjson").write_bytes(journal.read_bytes())
    bundle = read_bundle(tmp_path)  # no run.json or capture.json: invalid, yet its events still have facts
    facts = build_session_facts(bundle)
    assert facts["integrity"]["status"] == "invalid"
    assert facts["run_id"] == bundle.events[0]["run_id"]
    orjson.dumps(facts)


@pytest.mark.parametrize(
    "journal",
    sorted(p for p in (REPO / "fixtures" / "replay").glob("*.ndjson") if not p.name.endswith(".expected.ndjson")),
    ids=lambda path: path.stem,
)
def test_facts_messages_and_tools_are_the_replay_states(tmp_path, journal):
    """Facts fold each turn's conversation with shortcuts (settled messages skip their deltas):
    every message and tool of the run still reads as the reducer folds the whole journal."""
    (tmp_path / "events.ndjson").write_bytes(journal.read_bytes())
    bundle = read_bundle(tmp_path)
    events = run_events(bundle)
    full = replay_state(events)
    turns = build_session_facts(bundle)["turns"]
    turn_of: dict = {}  # messages whose every record names the same turn are folded whole in it
    for event in events:
        if isinstance(event.get("message_id"), str):
            turn_of.setdefault(event["message_id"], set()).add(event.get("turn_index"))
    messages = {message["message_id"]: message for turn in turns for message in turn["messages"]}
    tools = {tool["tool_call_id"]: tool for turn in turns for tool in turn["tools"]}
    for message in full["messages"]:
        if message["message_id"] in messages and len(turn_of[message["message_id"]]) == 1 and None not in turn_of[message["message_id"]]:
            text = "".join(block["text"] for block in message["blocks"] if block["kind"] == "text")
            assert messages[message["message_id"]] == {"message_id": message["message_id"], "role": message["role"],
                                                       "settled": message["settled"], "text": text}
    for tool in full["tools"]:
        if tool["tool_call_id"] in tools:
            assert (tools[tool["tool_call_id"]]["name"], tools[tool["tool_call_id"]]["status"]) == (tool["name"], tool["status"])
    assert set(messages) <= {message["message_id"] for message in full["messages"]}


def test_a_short_run_id_as_the_viewer_shows_it_binds_its_run(record_run, tmp_path):
    from click.testing import CliRunner

    from otel_session.cli import main
    from otel_session.replay.resolve import AmbiguousRunId

    first = "run-45757dbf-0000-4000-8000-000000000001"
    twin = "run-45757dbf-0000-4000-8000-000000000002"
    other = "run-9abc0000-0000-4000-8000-000000000003"
    for run_id in (first, twin, other):
        record_run("call-short", _booking_script(), run_id=run_id)
    assert resolve_run(tmp_path, "call-short", "run-9abc").run_id == other
    assert resolve_run(tmp_path, "call-short", "run-45757dbf-0000-4000-8000-000000000001").run_id == first
    with pytest.raises(AmbiguousRunId) as ambiguous:
        resolve_run(tmp_path, "call-short", "run-45757dbf")
    assert ambiguous.value.http_status == 400 and ambiguous.value.matches == [first, twin]
    assert first in str(ambiguous.value) and twin in str(ambiguous.value)
    with pytest.raises(InvalidId):
        resolve_run(tmp_path, "call-short", "run-457")  # shorter than 4 characters of the UUID
    with pytest.raises(RunNotFound):
        resolve_run(tmp_path, "call-short", "run-ffff")

    runner = CliRunner()
    shown = runner.invoke(main, ["facts", "call-short", "--run", "run-9abc0000", "--dir", str(tmp_path)])
    assert shown.exit_code == 0 and f"run {other}" in shown.output, shown.output
    replayed = runner.invoke(main, ["replay", "call-short", "run-9abc0000", "--at", "3", "--dir", str(tmp_path)])
    assert replayed.exit_code == 0, replayed.output
    refused = runner.invoke(main, ["facts", "call-short", "--run", "run-45757dbf", "--dir", str(tmp_path)])
    assert refused.exit_code != 0 and "is ambiguous" in refused.output and first in refused.output
