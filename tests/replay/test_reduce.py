"""The Python reducer: its rules, its checkpoints, canonical JSON, and the shared fixtures."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from otel_session.bundle.read import parse_journal
from otel_session.replay.reduce import (
    CHECKPOINT_INTERVAL,
    Replayer,
    canonical_json,
    expected_states,
    iter_states,
    replay_state,
)

NODE = shutil.which("node")
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "replay"
JOURNALS = sorted(path for path in FIXTURES.glob("*.ndjson") if not path.name.endswith(".expected.ndjson"))


def load_events(journal: Path) -> list[dict]:
    events, _garbage, _torn = parse_journal(journal.read_bytes())
    return events


def _event(seq: int, event_type: str, payload: dict | None = None, at: str = "2026-11-29T22:52:00.000000Z", **ids) -> dict:
    record = {"seq": seq, "at": at, "type": event_type, "session_id": "s", "run_id": "run-x", **ids}
    if payload is not None:
        record["payload"] = payload
    return record


def _delta(seq: int, message_id: str, text: str, index: int = 0, kind: str = "text", **fields) -> dict:
    return _event(seq, "assistant_delta", {"index": index, "kind": kind, "delta": text}, message_id=message_id, **fields)


def _codes(state: dict) -> list[str]:
    return [diagnostic["code"] for diagnostic in state["diagnostics"]]


@pytest.mark.parametrize("journal", JOURNALS, ids=lambda path: path.stem)
def test_stored_expectations_match_the_current_reducer(journal: Path):
    stored = journal.with_name(journal.stem + ".expected.ndjson").read_bytes()
    assert expected_states(journal.read_bytes()) == stored, (
        "stale fixture: run `python -m otel_session.replay.reduce --regenerate fixtures/replay` and review the diff"
    )


@pytest.mark.parametrize("journal", JOURNALS, ids=lambda path: path.stem)
def test_replayer_seeks_to_the_same_state_as_the_fold(journal: Path):
    events = load_events(journal)
    states = list(iter_states(events))
    seqs = [0] + sorted(event["seq"] for event in events)
    replayer = Replayer(events)
    for position in reversed(range(len(seqs))):
        if position + 1 < len(seqs) and seqs[position + 1] == seqs[position]:
            continue  # the state "at" a repeated seq includes both records
        expected = canonical_json(states[position])
        assert canonical_json(replayer.state_at(seqs[position])) == expected
        assert canonical_json(replay_state(events, seqs[position])) == expected


def test_fixtures_cover_every_event_type_and_failure_mode():
    from otel_session.core.journal import EventType

    seen = {event["type"] for journal in JOURNALS for event in load_events(journal)}
    assert {member.value for member in EventType} <= seen
    codes = {code for journal in JOURNALS for code in _codes(replay_state(load_events(journal)))}
    assert {"seq_gap", "duplicate_seq", "reconcile_mismatch", "delta_after_finish", "malformed_event", "upstream_drop"} <= codes
    torn = (FIXTURES / "torn_tail_partial_message.ndjson").read_bytes()
    assert not torn.endswith(b"\n")


@pytest.mark.skipif(NODE is None, reason="node is not installed: the JavaScript reducer parity tests did NOT run")
def test_javascript_reducer_matches_the_fixtures_byte_for_byte():
    completed = subprocess.run(
        [NODE, "--test", str(REPO / "tests" / "replay" / "js" / "reducer.test.mjs")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    assert "# fail 0" in completed.stdout


def test_deltas_fold_by_message_and_block_index():
    events = [
        _event(1, "message_started", {"role": "assistant"}, message_id="a"),
        _delta(2, "a", "Hel"),
        _delta(3, "b", "other"),
        _delta(4, "a", "lo", index=0),
        _delta(5, "a", "{\"x\":", index=1, kind="tool_call"),
        _delta(6, "a", "1}", index=1, kind="tool_call"),
    ]
    state = replay_state(events)
    first, second = state["messages"]
    assert first["blocks"] == [{"index": 0, "kind": "text", "text": "Hello"}, {"index": 1, "kind": "tool_call", "text": "{\"x\":1}"}]
    assert (first["settled"], first["finished"]) == (False, False)
    assert second == {"message_id": "b", "role": "assistant", "turn_index": None, "settled": False, "finished": False,
                      "blocks": [{"index": 0, "kind": "text", "text": "other"}]}
    assert replay_state(events, 3)["messages"][0]["blocks"] == [{"index": 0, "kind": "text", "text": "Hel"}]


@pytest.mark.parametrize(
    ("final_text", "codes"),
    [("Hello", []), ("Hello!", ["reconcile_mismatch"]), ("", ["reconcile_mismatch"])],
)
def test_settled_final_content_wins(final_text, codes):
    events = [
        _delta(1, "a", "Hel"),
        _delta(2, "a", "lo"),
        _event(3, "message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": final_text}]},
               message_id="a"),
    ]
    state = replay_state(events)
    assert state["messages"][0]["blocks"][0]["text"] == final_text
    assert state["messages"][0]["settled"] is True
    assert _codes(state) == codes


def test_unsealed_message_stays_partial_and_later_deltas_change_nothing():
    events = [
        _delta(1, "a", "I was interr"),
        _event(2, "message_finished", {"settled": False, "content": [{"index": 0, "kind": "text", "text": "x"}]},
               message_id="a"),
        _delta(3, "a", "upted"),
    ]
    state = replay_state(events)
    message = state["messages"][0]
    assert (message["settled"], message["finished"], message["blocks"][0]["text"]) == (False, True, "I was interr")
    assert _codes(state) == ["delta_after_finish"]


def test_unknown_types_keep_position_and_change_nothing():
    known = [_event(1, "turn_started", {"state": "greet"}, turn_index=0), _delta(3, "a", "hi")]
    with_unknown = [known[0], _event(2, "something_new", {"state": "other", "slot": "x", "value": 1}), known[1]]
    a, b = replay_state(with_unknown), replay_state([known[0], {**known[1], "seq": 2}])
    assert a["seq"] == 3 and replay_state(with_unknown, 2)["seq"] == 2
    assert {**a, "seq": 0} == {**b, "seq": 0}


def test_seq_order_wins_over_file_order_and_timestamps():
    events = [
        _delta(2, "a", " world", at="2026-11-29T22:00:00.000000Z"),
        _delta(1, "a", "hello", at="2026-11-29T23:00:00.000000Z"),
        _delta(3, "a", "!", at="2026-11-29T23:00:00.000000Z"),
    ]
    assert replay_state(events)["messages"][0]["blocks"][0]["text"] == "hello world!"
    assert replay_state(list(reversed(events))) == replay_state(events)


def test_gaps_and_duplicates_are_diagnosed():
    events = [_event(1, "run_started"), _event(4, "turn_started", {"state": "a"}), _event(4, "turn_started", {"state": "b"})]
    state = replay_state(events)
    assert _codes(state) == ["seq_gap", "duplicate_seq"]
    assert state["state"] == "a"
    assert state["diagnostics"][0] == {"code": "seq_gap", "severity": "error", "message": "expected seq 2, found 4", "seq": 4}


def test_tools_track_status_updates_and_times():
    events = [
        _event(1, "tool_execution_started", {"name": "lookup", "arguments": {"q": "hmac:1"}}, at="2026-11-29T22:52:01.000000Z",
               tool_call_id="c1", turn_index=2),
        _event(2, "tool_execution_updated", {}, tool_call_id="c1"),
        _event(3, "tool_execution_updated", {}, tool_call_id="c1"),
    ]
    running = replay_state(events)["tools"][0]
    assert (running["name"], running["status"], running["updates"], running["turn_index"]) == ("lookup", "running", 2, 2)
    assert running["started_at"] == "2026-11-29T22:52:01.000000Z" and running["finished_at"] is None
    events.append(_event(4, "tool_execution_finished", {"status": "error", "error": "timeout"},
                         at="2026-11-29T22:52:02.500000Z", tool_call_id="c1"))
    done = replay_state(events)["tools"][0]
    assert (done["status"], done["error"], done["finished_at"]) == ("error", "timeout", "2026-11-29T22:52:02.500000Z")


def test_replayer_states_are_independent_of_later_seeks():
    events = [_event(1, "message_started", {"role": "assistant"}, message_id="a")]
    events += [_delta(seq, "a", f"{seq} ") for seq in range(2, 3 * CHECKPOINT_INTERVAL + 10)]
    events.append(_event(3 * CHECKPOINT_INTERVAL + 10, "slot_write", {"slot": "date", "value": "hmac:1"}))
    replayer = Replayer(events)
    early = replayer.state_at(300)
    early_bytes = canonical_json(early)
    replayer.state_at(None)
    replayer.state_at(299)
    replayer.state_at(CHECKPOINT_INTERVAL * 2 + 1)
    assert canonical_json(early) == early_bytes
    assert canonical_json(replayer.state_at(300)) == early_bytes == canonical_json(replay_state(events, 300))
    assert replayer.state_at(None) == replay_state(events)
    assert replayer.last_seq == 3 * CHECKPOINT_INTERVAL + 10


def test_replayer_extend_out_of_order_matches_a_fresh_fold():
    events = [_delta(seq, "a", f"{seq},") for seq in range(1, 2000)]
    replayer = Replayer(events[::2])
    replayer.state_at(None)
    replayer.extend(events[1::2])
    assert replayer.state_at(None) == replay_state(events)
    assert replayer.state_at(1000) == replay_state(events, 1000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": None}, b'{"a":null,"b":1}'),
        ([1e21, 1e20, 1e-7, 1e-6, 0.1 + 0.2, 100.0, -0.0, float("nan")],
         b"[1e+21,100000000000000000000,1e-7,0.000001,0.30000000000000004,100,0,null]"),
        (2**60, b"1152921504606847000"),
        ({"\U0001f600": 1, "\uffff": 2}, '{"\U0001f600":1,"\uffff":2}'.encode()),
        ("tab\t\x01\x7f\u2028\"\\é", b'"tab\\t\\u0001\x7f\xe2\x80\xa8\\"\\\\\xc3\xa9"'),
        ("\ud800", b'"\\ud800"'),
        (True, b"true"),
    ],
)
def test_canonical_json_table(value, expected):
    assert canonical_json(value) == expected


def _random_value(rng: random.Random, depth: int = 0):
    choice = rng.randrange(9 if depth < 3 else 6)
    if choice == 0:
        return rng.choice([None, True, False])
    if choice == 1:
        return rng.randint(-(2**70), 2**70) if rng.random() < 0.3 else rng.randint(-1000, 1000)
    if choice == 2:
        return rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30), 1e21, 5e-7])
    if choice in (3, 4, 5):
        alphabet = "ab\t\n\"\\\x00\x1f\x7f é中\u2028\U0001f600\uffff\ue000"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
    if choice in (6, 7):
        keys = ("".join(rng.choice("aZ_é1\U0001f600\uffff") for _ in range(rng.randint(0, 4))) for _ in range(4))
        return {key: _random_value(rng, depth + 1) for key in keys}
    return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


@pytest.mark.skipif(NODE is None, reason="node is not installed: the JavaScript canonical JSON parity test did NOT run")
def test_canonical_json_matches_javascript_on_random_values():
    rng = random.Random(5)
    values = [_random_value(rng) for _ in range(400)]
    script = (
        "import { canonicalJson } from './viewer/static/reducer.js';"
        "let input = ''; process.stdin.on('data', (chunk) => { input += chunk; });"
        "process.stdin.on('end', () => { for (const value of JSON.parse(input)) process.stdout.write(canonicalJson(value) + '\\n'); });"
    )
    completed = subprocess.run(
        [NODE, "--input-type=module", "-e", script], cwd=REPO, input=json.dumps(values).encode(), capture_output=True,
        timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split(b"\n")[:-1] == [canonical_json(value) for value in values]


def test_replayer_matches_the_fold_on_a_long_random_journal():
    """Many messages and tools alive across checkpoints: seeks patch the checkpoint's rendering."""
    rng = random.Random(11)
    events, seq = [], 0
    for step in range(3000):
        seq += 1
        roll = rng.random()
        message_id, call_id = f"m{rng.randrange(40)}", f"c{rng.randrange(25)}"
        if roll < 0.6:
            events.append(_delta(seq, message_id, f"{step} ", index=rng.randrange(3), kind=rng.choice(["text", "thinking"])))
        elif roll < 0.65:
            events.append(_event(seq, "message_finished", {"settled": rng.random() < 0.5, "content": [
                {"index": 0, "kind": "text", "text": str(step)}]}, message_id=message_id))
        elif roll < 0.8:
            kind = rng.choice(["tool_execution_started", "tool_execution_updated", "tool_execution_finished"])
            events.append(_event(seq, kind, {"name": "t", "status": "ok"}, tool_call_id=call_id))
        elif roll < 0.9:
            events.append(_event(seq, "slot_write", {"slot": f"s{rng.randrange(5)}", "value": step}))
        else:
            events.append(_event(seq, "turn_started", {"state": f"st{step}"}))
    replayer = Replayer(events)
    for target in [rng.randrange(0, seq + 1) for _ in range(60)] + [seq, 256, 257, 512]:
        assert replayer.state_at(target) == replay_state(events, target), target


@pytest.mark.parametrize("journal", JOURNALS, ids=lambda path: path.stem)
def test_the_reducer_never_changes_its_input(journal: Path):
    events = load_events(journal)
    before = json.dumps(events, sort_keys=True)
    list(iter_states(events))
    replayer = Replayer(events)
    replayer.state_at(None)
    replayer.state_at(1)
    assert json.dumps(events, sort_keys=True) == before


def _random_journal(rng: random.Random, length: int) -> list[dict]:
    """A journal of plausible and broken records alike: every rule and edge gets exercised."""
    types = ["run_started", "turn_started", "message_started", "assistant_delta", "assistant_delta", "assistant_delta",
             "message_finished", "tool_execution_started", "tool_execution_updated", "tool_execution_finished",
             "slot_write", "slot_diff", "guard_evaluated", "transition_verdict", "turn_finished", "run_finished",
             "upstream_drop", "not_a_known_type"]
    odd = [None, 1.5, 2.0, -1, "x", [], {"k": 1}, True, 10**22, 1e-9]
    events, seq = [], 0
    for _ in range(length):
        seq += rng.choice([1, 1, 1, 1, 1, 1, 0, 2])  # mostly sound, with repeats and gaps
        event_type = rng.choice(types)
        record = {"seq": seq, "at": f"2026-11-29T22:52:{rng.randrange(60):02d}.000000Z", "type": event_type,
                  "session_id": "s", "run_id": rng.choice(["run-a", "run-a", "run-a", 7])}
        if rng.random() < 0.8:
            record["message_id"] = rng.choice(["m1", "m2", "m3", "", None, ["m"]] if rng.random() < 0.1 else ["m1", "m2"])
        if rng.random() < 0.5:
            record["tool_call_id"] = rng.choice(["c1", "c2", 3])
        if rng.random() < 0.5:
            record["turn_index"] = rng.choice([0, 1, 2, 2.0, "1", None])
        payload = {
            "index": rng.choice([0, 1, 2, 1.0, "0"]) if rng.random() < 0.95 else rng.choice(odd),
            "kind": rng.choice(["text", "thinking", "tool_call", "text", "audio", None]),
            "delta": rng.choice(["Hé", "llo ", "\u2028", "😀", "\x00", ""]) if rng.random() < 0.95 else rng.choice(odd),
            "settled": rng.choice([True, True, False, None, 1]),
            "content": rng.choice([
                [{"index": 0, "kind": "text", "text": "Héllo "}, {"index": 1, "kind": "thinking", "text": "hm"}],
                [{"kind": "tool_call", "text": "{}"}, "junk", {"index": 0}],
                "not a list",
            ]),
            "role": rng.choice(["user", "assistant", "", None]),
            "state": rng.choice(["greet", "ask_date", "", None, ["x"]]),
            "status": rng.choice(["ok", "error", "weird", None]),
            "name": rng.choice(["lookup", None, 4]),
            "slot": rng.choice(["date", "size", "😀", "\uffff", None]),
            "value": rng.choice(odd + ["hmac:1"]),
            "to": rng.choice(["confirm", None, 3]),
            "from": rng.choice(["greet", None]),
            "candidates": rng.choice([["a", "b"], "all", None]),
            "dropped_events": rng.choice(odd),
        }
        if rng.random() < 0.9:
            record["payload"] = {key: payload[key] for key in rng.sample(sorted(payload), rng.randrange(4, len(payload)))}
        elif rng.random() < 0.5:
            record["payload"] = "not an object"
        events.append(record)
    rng.shuffle(events)  # file order must not matter
    return events


@pytest.mark.skipif(NODE is None, reason="node is not installed: the JavaScript reducer parity test did NOT run")
def test_javascript_reducer_matches_python_on_random_journals():
    rng = random.Random(20261129)
    journals = [_random_journal(rng, rng.randrange(5, 120)) for _ in range(30)]
    script = (
        "import { iterStates, canonicalJson, Replayer } from './viewer/static/reducer.js';"
        "let input = ''; process.stdin.on('data', (chunk) => { input += chunk; });"
        "process.stdin.on('end', () => { for (const events of JSON.parse(input)) {"
        "  for (const state of iterStates(events)) process.stdout.write(canonicalJson(state) + '\\n');"
        "  const replayer = new Replayer(events); process.stdout.write(canonicalJson(replayer.stateAt(null)) + '\\n'); } });"
    )
    completed = subprocess.run(
        [NODE, "--input-type=module", "-e", script], cwd=REPO, input=json.dumps(journals).encode(), capture_output=True,
        timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    expected = []
    for events in journals:
        expected += [canonical_json(state) for state in iter_states(events)]
        expected.append(canonical_json(Replayer(events).state_at(None)))
    actual = completed.stdout.split(b"\n")[:-1]
    assert len(actual) == len(expected)
    for position, (js, py) in enumerate(zip(actual, expected)):
        assert js == py, f"state #{position} differs\njs: {js[:2000]!r}\npy: {py[:2000]!r}"


def test_the_fast_canonical_path_writes_the_exact_bytes():
    """canonical_json writes plain values (no floats, safe integers, ASCII keys) with the C encoder
    and anything else with its own: under a non-ASCII key a value always takes the second path,
    so both must write it byte for byte alike."""
    rng = random.Random(3)
    values = [_random_value(rng) for _ in range(300)] + [load_events(journal) for journal in JOURNALS]
    values += [{"a": [1, "x", None, True, {"b": -(2**53)}]}, ["\u2028", "\ud800"]]  # plain ones, surely
    for value in values:
        assert canonical_json({"\u00e9": value}) == b'{"\xc3\xa9":' + canonical_json(value) + b"}"


def test_replayer_follows_a_recording_run_through_the_tail_reader(tmp_path):
    from otel_session.bundle.read import JournalTail, read_bundle
    from otel_session.bundle.write import BundleWriter

    writer = BundleWriter(tmp_path)
    try:
        run = writer.open_run(session_id="live", run_id="run-00000000-0000-4000-8000-00000000000a")
        tail = JournalTail(run.path / "events.ndjson")
        replayer = Replayer()
        run.append("turn_started", {"state": "greet", "required_slots": []}, turn_index=0)
        run.append("message_started", {"role": "assistant"}, turn_index=0, message_id="m")
        for round_number in range(3):
            for chunk in range(300):  # crosses checkpoints while recording
                run.append("assistant_delta", {"index": 0, "kind": "text", "delta": f"{round_number}.{chunk} "},
                           turn_index=0, message_id="m")
            writer.force_flush()
            replayer.extend(tail.poll())
            partial = replayer.state_at(None)
            assert partial["seq"] == replayer.last_seq == 2 + 300 * (round_number + 1)
            assert partial["messages"][0]["settled"] is False
            assert partial == replay_state(read_bundle(run.path).events)
        run.close(run_status="ok")
        writer.force_flush()
        replayer.extend(tail.poll())
    finally:
        writer.shutdown()
    final = replayer.state_at(None)
    assert final["run_status"] == "ok" and final == replay_state(read_bundle(run.path).events)
    assert replayer.state_at(302) == replay_state(read_bundle(run.path).events, 302)
