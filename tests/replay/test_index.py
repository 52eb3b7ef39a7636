"""The derived read data of a sealed run (``replay.index``): slices, checkpointed states, views,
facts, and what happens when the index is missing, stale, corrupt or cannot be written."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import orjson
import pytest

from otel_session.bundle.read import read_bundle
from otel_session.bundle.write import BundleWriter
from otel_session.replay.facts import build_session_facts, run_events
from otel_session.replay.fold import State
from otel_session.replay.index import ChildBuild, IndexStale, IndexStatus, build_in_child, index_path, open_run_index
from otel_session.replay.reduce import CHECKPOINT_INTERVAL, Replayer, canonical_json

START_NS = 1_800_000_000_000_000_000


def long_script(turns: int) -> list[tuple[str, dict, dict]]:
    """Turns of ~70 records: streamed replies, slots, verdicts, and tools whose updates and finish
    land several checkpoints after their start (a long tool), a message finished unsettled then
    settled, and deltas after a finish (diagnostics)."""
    steps: list[tuple[str, dict, dict]] = [("run_started", {"kind": "live", "agent": "booking"}, {})]
    for turn in range(turns):
        ids = {"turn_index": turn}
        reply = {**ids, "message_id": f"a{turn}"}
        steps += [
            ("turn_started", {"state": f"s{turn % 3}", "required_slots": ["date"]}, ids),
            ("message_started", {"role": "user"}, {**ids, "message_id": f"u{turn}"}),
            ("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": f"hi {turn}"}]},
             {**ids, "message_id": f"u{turn}"}),
            ("slot_write", {"slot": f"slot{turn % 4}", "value": turn, "previous": None, "source": "nlu"}, ids),
            ("tool_execution_started", {"name": "lookup", "arguments": {"turn": turn}}, {**ids, "tool_call_id": f"t{turn}"}),
        ]
        if turn >= 6:  # the tool started six turns ago gets an update and finishes now
            old = {"turn_index": turn - 6, "tool_call_id": f"t{turn - 6}"}
            steps += [("tool_execution_updated", {}, old),
                      ("tool_execution_finished", {"status": "error" if turn % 5 == 0 else "ok", "result": turn}, old)]
        steps.append(("message_started", {"role": "assistant"}, reply))
        steps += [("assistant_delta", {"index": 0, "kind": "text", "delta": f"w{n} "}, reply) for n in range(50)]
        if turn % 4 == 1:
            steps.append(("message_finished", {"settled": False, "content": []}, reply))
            steps.append(("assistant_delta", {"index": 0, "kind": "text", "delta": "late"}, reply))
        steps.append(("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "final"}]}, reply))
        steps.append(("transition_verdict", {"from": f"s{turn % 3}", "to": f"s{(turn + 1) % 3}", "reason": "r",
                                              "candidates": []}, ids))
        steps.append(("turn_finished", {"state": f"s{(turn + 1) % 3}", "missing_required_slots": []}, ids))
    steps.append(("run_finished", {"status": "ok"}, {}))
    return steps


def record(root: Path, script: list[tuple[str, dict, dict]], *, seal: bool = True) -> Path:
    writer = BundleWriter(root)
    try:
        run = writer.open_run(session_id="long", run_id=f"run-{uuid.uuid4()}", agent="booking")
        for number, (event_type, payload, ids) in enumerate(script):
            run.append(event_type, payload, at_ns=START_NS + number * 1_000_000, **ids)
            if number % 2048 == 2047:
                writer.force_flush()
        if seal:
            run.close(run_status="ok")
            assert run.wait_sealed(60)
        else:
            writer.force_flush()
    finally:
        if seal:
            writer.shutdown()
    return run.path


@pytest.fixture(scope="module")
def sealed(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("index")
    return root, record(root, long_script(40))


def test_slices_and_states_match_a_fold_of_the_whole_journal(sealed):
    root, path = sealed
    index = open_run_index(root, path)
    events = run_events(read_bundle(path))
    assert index.count == len(events) > 9 * CHECKPOINT_INTERVAL
    replayer = Replayer(events)
    seqs = [0, 1, 255, 256, 257, 511, 512, 513, 1000, 1777, index.last_seq - 1, index.last_seq, index.last_seq + 5, None]
    for seq in seqs:
        assert canonical_json(index.state(seq)) == canonical_json(replayer.state_at(seq)), seq
        after = seq or 0
        rest = [event for event in events if event["seq"] > after]
        page, next_after = index.events(after, 300)
        assert page == rest[:300], seq
        assert next_after == (rest[299]["seq"] if len(rest) > 300 else None), seq


def test_a_view_folded_forward_is_the_state_of_what_it_holds(sealed):
    """The page's contract: a view at seq N plus the records after its base, folded on it (as
    reducer.js does), gives every message and tool it holds exactly as the full state has them."""
    root, path = sealed
    index = open_run_index(root, path)
    events = run_events(read_bundle(path))
    replayer = Replayer(events)
    for seq in (300, 1300, 2000, index.last_seq):
        through = min(index.last_seq, seq + 700)
        view = index.view(seq, recent=5, through=through)
        assert view["base_seq"] <= seq
        state = State()
        folded = set(view["folded"])
        state.adopt([(message, message["message_id"] in folded) for message in view["state"]["messages"]],
                    view["state"]["tools"])
        state.slots, state.verdicts, state.diagnostics = dict(view["state"]["slots"]), [], []
        for name in ("seq", "run_id", "turn_index", "state", "run_status"):
            setattr(state, name, view["state"][name])
        for event in events:
            if view["base_seq"] < event["seq"] <= through:
                state.apply(event)
        full = replayer.state_at(through)
        mine = state.render()
        by_id = {message["message_id"]: message for message in full["messages"]}
        assert mine["messages"] and all(by_id[message["message_id"]] == message for message in mine["messages"])
        tools = {tool["tool_call_id"]: tool for tool in full["tools"]}
        assert all(tools[tool["tool_call_id"]] == tool for tool in mine["tools"])
        assert (mine["slots"], mine["state"], mine["turn_index"]) == (full["slots"], full["state"], full["turn_index"])
        assert full["diagnostics"][-len(mine["diagnostics"]):] == mine["diagnostics"] if mine["diagnostics"] else True
        assert view["omitted"]["messages"] == len(replayer.state_at(view["base_seq"])["messages"]) - len(view["state"]["messages"])


def test_facts_integrity_and_turns_are_kept_and_read_back(sealed):
    root, path = sealed
    open_run_index(root, path)
    again = open_run_index(root, path)
    assert again.status is IndexStatus.LOADED
    bundle = read_bundle(path)
    expected = orjson.loads(orjson.dumps(build_session_facts(bundle, fallback_to_latest_run=True)))
    expected["integrity"]["capture"] = bundle.capture
    assert orjson.loads(again.facts_json(fallback_to_latest_run=True)) == expected
    assert again.facts() == {key: value for key, value in expected.items() if key != "fallback_to_latest_run"}
    assert again.integrity()["status"] == bundle.status.value == "complete"
    turns = again.turns()
    assert [turn["turn_index"] for turn in turns] == list(range(40))
    assert turns[4]["tool_errors"] == 1 and not turns[4]["open"]  # its tool failed in turn 10, records of turn 4


def _copy_run(root: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A fresh root holding a copy of the sealed run (each corruption test spoils its own)."""
    source_root, source = root
    target = tmp_path / source.relative_to(source_root)
    target.mkdir(parents=True)
    for name in ("run.json", "events.ndjson", "capture.json"):
        (target / name).write_bytes((source / name).read_bytes())
        os.utime(target / name, ns=(os.stat(source / name).st_mtime_ns,) * 2)
    return tmp_path, target


@pytest.mark.parametrize("spoil", ["seek_digest", "checkpoint_bytes", "facts_bytes", "missing_file", "journal_grew"])
def test_a_stale_or_corrupt_index_is_detected_and_rebuilt(sealed, tmp_path, spoil):
    root, path = _copy_run(sealed, tmp_path)
    built = open_run_index(root, path)
    expected = canonical_json(built.state(900))
    directory = index_path(root, path)
    if spoil == "seek_digest":
        seek = orjson.loads((directory / "seek.json").read_bytes())
        seek["offsets"][3] += 7
        (directory / "seek.json").write_bytes(orjson.dumps(seek))
    elif spoil in ("checkpoint_bytes", "facts_bytes"):
        name = "checkpoints.ndjson" if spoil == "checkpoint_bytes" else "facts.json"
        data = bytearray((directory / name).read_bytes())
        data[len(data) // 2] ^= 0x01  # same size, one bit off
        (directory / name).write_bytes(bytes(data))
    elif spoil == "missing_file":
        (directory / "objects.json").unlink()
    else:
        with open(path / "events.ndjson", "ab") as journal:
            journal.write(b'{"not": "a record"}\n')
    if spoil == "facts_bytes":  # found only when read: the index loads, its facts are refused
        with pytest.raises(IndexStale):
            open_run_index(root, path).facts()
        assert open_run_index(root, path, rebuild=True).facts()["run_id"] == read_bundle(path).run_id
        return
    reopened = open_run_index(root, path)
    assert reopened.status is IndexStatus.REBUILT
    assert canonical_json(reopened.state(900)) == expected
    assert open_run_index(root, path).status is IndexStatus.LOADED


def test_a_forged_offset_with_a_matching_digest_fails_the_slice_check(sealed, tmp_path):
    """An index whose digests agree but whose offsets lie is caught by the first slice read."""
    import hashlib

    root, path = _copy_run(sealed, tmp_path)
    open_run_index(root, path)
    directory = index_path(root, path)
    seek = orjson.loads((directory / "seek.json").read_bytes())
    seek.pop("digest")
    seek["offsets"][2] = seek["offsets"][1]
    seek["digest"] = hashlib.blake2b(orjson.dumps(seek, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()
    (directory / "seek.json").write_bytes(orjson.dumps(seek))
    index = open_run_index(root, path)
    assert index.status is IndexStatus.LOADED
    with pytest.raises(IndexStale):
        index.events(seek["seqs"][2], 10)
    seek.pop("digest")
    seek["offsets"][2] = (path / "events.ndjson").stat().st_size + 10  # past the end of the journal
    seek["digest"] = hashlib.blake2b(orjson.dumps(seek, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()
    (directory / "seek.json").write_bytes(orjson.dumps(seek))
    with pytest.raises(IndexStale):
        open_run_index(root, path).events(seek["seqs"][2], 10)


def test_recording_and_unsound_runs_get_no_index(tmp_path):
    recording = record(tmp_path / "a", long_script(1), seal=False)
    assert open_run_index(tmp_path / "a", recording) is None
    sealed = record(tmp_path / "b", long_script(1))
    lines = (sealed / "events.ndjson").read_bytes().splitlines(keepends=True)
    lines[3], lines[4] = lines[4], lines[3]  # two records out of seq order on disk
    (sealed / "events.ndjson").write_bytes(b"".join(lines))
    assert open_run_index(tmp_path / "b", sealed) is None


def test_garbage_lines_and_a_torn_tail_are_skipped_and_reported(tmp_path):
    path = record(tmp_path, long_script(8))
    lines = (path / "events.ndjson").read_bytes().splitlines(keepends=True)
    (path / "events.ndjson").write_bytes(b"".join(lines[:300] + [b"garbage\n"] + lines[300:]) + b'{"seq": 9')
    index = open_run_index(tmp_path, path)
    bundle = read_bundle(path)
    assert index.integrity()["diagnostics"] == [d.as_json() for d in bundle.diagnostics]
    assert {d["code"] for d in index.integrity()["diagnostics"]} >= {"garbage_line", "torn_tail"}
    events = run_events(bundle)
    assert index.events(250, 100)[0] == [event for event in events if event["seq"] > 250][:100]
    assert canonical_json(index.state(None)) == canonical_json(Replayer(events).state_at(None))


def test_a_root_that_cannot_be_written_keeps_the_index_in_memory(sealed, tmp_path):
    root, path = _copy_run(sealed, tmp_path)
    (root / ".index").write_bytes(b"")  # a file where the index directory would go (root ignores modes)
    index = open_run_index(root, path)
    assert index.status is IndexStatus.BUILT and (root / ".index").is_file()
    assert index.facts()["run_id"] == read_bundle(path).run_id
    assert index.events(0, 3)[0][0]["seq"] == 1
    assert canonical_json(index.state(700)) == canonical_json(Replayer(run_events(read_bundle(path))).state_at(700))


def test_a_large_journal_is_indexed_by_a_child_process(sealed, tmp_path):
    """The whole read of a large journal happens in a spawned interpreter; this process loads the files."""
    root, path = _copy_run(sealed, tmp_path)
    index = open_run_index(root, path, child_build_bytes=1)
    assert index.status is IndexStatus.BUILT and index._contents is None  # read from the files the child wrote
    assert (index_path(root, path) / "seek.json").exists()
    assert canonical_json(index.state(1234)) == canonical_json(Replayer(run_events(read_bundle(path))).state_at(1234))
    spoiled = index_path(root, path) / "facts.json"
    spoiled.write_bytes(spoiled.read_bytes()[:-1] + b" ")
    assert open_run_index(root, path, rebuild=True, child_build_bytes=1).status is IndexStatus.REBUILT
    assert open_run_index(root, path).facts()["run_id"] == read_bundle(path).run_id
    lines = (path / "events.ndjson").read_bytes().splitlines(keepends=True)
    (path / "events.ndjson").write_bytes(b"".join([lines[1], lines[0], *lines[2:]]))  # unsound: out of order
    assert build_in_child(root, path) is ChildBuild.NOT_INDEXABLE
    assert open_run_index(root, path, child_build_bytes=1) is None


def test_a_journal_of_many_read_blocks_reads_as_one_parse_and_holds_only_its_records(tmp_path):
    """The build's read (``read_bundle`` with offsets) goes a block at a time: it holds little
    besides the records (before: the file's bytes, a copy and all its lines, 2.2x the journal), and
    lines across blocks, one longer than a block, a garbage line and a torn tail read as a parse of
    the whole file does."""
    import tracemalloc

    from otel_session.bundle.read import parse_journal

    path = Path(record(tmp_path, long_script(600)))
    journal = path / "events.ndjson"
    tracemalloc.start()
    try:
        read = read_bundle(path, record_offsets=True)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read.status.value == "complete" and peak - kept < journal.stat().st_size // 2, (peak, kept)
    del read

    lines = journal.read_bytes().splitlines(keepends=True)
    long_line = orjson.loads(lines[5])
    long_line["payload"]["text"] = "x" * (3 << 20)  # longer than two blocks
    lines[5] = orjson.dumps(long_line) + b"\n"
    lines[700] = b"{not json\n"
    journal.write_bytes(b"".join(lines) + b'{"torn')
    data = journal.read_bytes()
    assert len(data) > 3 * (1 << 20)
    offsets: list[int] = []
    records, garbage, torn = parse_journal(data, offsets=offsets)
    read = read_bundle(path, record_offsets=True)
    assert read.events == records and read.offsets == offsets and torn == b'{"torn'
    assert [d.line for d in read.diagnostics if d.code.value == "garbage_line"] == [d.line for d in garbage] == [701]
    assert [d.line for d in read.diagnostics if d.code.value == "torn_tail"] == [len(lines) + 1]


def test_parsed_records_share_the_ids_and_types_they_repeat(tmp_path):
    """What a build holds is its parsed records: the session and run ids, types and message ids
    every record repeats are one string each, so they hold under 3.5x the journal (before: 4x)."""
    import tracemalloc

    path = Path(record(tmp_path, long_script(200)))
    tracemalloc.start()
    try:
        read = read_bundle(path)
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert read.status.value == "complete" and kept < 3.5 * (path / "events.ndjson").stat().st_size
    assert read.events == [orjson.loads(line) for line in (path / "events.ndjson").read_bytes().splitlines()]
