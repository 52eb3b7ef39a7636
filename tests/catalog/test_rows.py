"""A run's row: written as it opens and again as it seals, its figures agreeing with its facts."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest

from otel_session.bundle.read import read_bundle
from otel_session.catalog import RunQuery, SqlCatalog
from otel_session.catalog.sync import complete_rows
from otel_session.core.journal import MAX_DEPTH
from otel_session.replay.facts import build_session_facts

from .conftest import BASE_NS, Script, new_run_id, record_booking


def _only_row(catalog: SqlCatalog):
    (row,) = catalog.page(RunQuery()).rows
    return row


def _counted(catalog: SqlCatalog, root: Path):
    """The only row as a list shows it: its figures counted now if the writer left them pending."""
    (row,) = complete_rows(catalog, root, catalog.page(RunQuery()).rows)
    return row


def test_a_row_exists_from_the_first_record_and_is_completed_at_seal(root: Path, writer, catalog):
    run_id = new_run_id()
    run = writer.open_run(session_id="call-1", run_id=run_id, agent="booking", service="tests", created_at_ns=BASE_NS)
    script = Script(run, BASE_NS)
    script("run_started", {"kind": "live", "agent": "booking"})
    assert writer.force_flush(10_000)
    opened = _only_row(catalog)
    assert (opened.run_id, opened.session_id, opened.capture_status, opened.agent) == (run_id, "call-1", "recording", "booking")

    record_booking(script, voice=True)
    script("run_finished", {"status": "ok"})
    run.close()
    assert run.wait_sealed(10) and writer.force_flush(10_000)
    sealed = _only_row(catalog)  # as the writer's hook left it: no record read on the writer thread
    assert (sealed.capture_status, sealed.integrity, sealed.figures_pending) == ("complete", "complete", True)
    assert sealed.event_count == len(read_bundle(run.path).events)
    counted = _counted(catalog, root)  # the first list counts its figures, and keeps them
    assert (counted.status, counted.turns, counted.figures_pending) == ("error", 3, False)  # a tool failed
    assert _only_row(catalog) == counted


@pytest.mark.parametrize("voice", [False, True])
def test_row_figures_agree_with_the_facts_of_the_same_bundle(root: Path, writer, catalog, voice):
    run = writer.open_run(session_id="call-2", run_id=new_run_id(), agent="booking", created_at_ns=BASE_NS)
    script = Script(run, BASE_NS)
    record_booking(script, voice=voice)
    script("run_finished", {"status": "ok"})
    run.close()
    assert run.wait_sealed(10) and writer.force_flush(10_000)
    row = _counted(catalog, root)
    facts = build_session_facts(read_bundle(run.path))
    turns = facts["turns"]
    assert row.turns == len(turns)
    assert row.model_calls == sum(len(turn["model_calls"]) for turn in turns)
    assert row.messages == sum(len(turn["messages"]) for turn in turns)
    assert row.tool_calls == sum(len(turn["tools"]) for turn in turns)
    assert row.tool_errors == sum(tool["status"] == "error" for turn in turns for tool in turn["tools"])
    assert row.guards_blocked == sum(guard["passed"] is False for turn in turns for guard in turn["guards"])
    assert row.repeated_asks == sum(bool(turn["repeated_asks"]) for turn in turns) == 1
    assert (row.input_tokens, row.output_tokens) == (facts["usage_totals"]["input_tokens"], facts["usage_totals"]["output_tokens"])
    latency = facts["latency"]["user_to_agent_ms"]
    assert (row.latency_p50_ms, row.latency_p95_ms) == ((latency["p50"], latency["p95"]) if latency else (None, None))
    assert row.models == (("gpt-4o-mini",) if voice else ())


def test_an_unreadable_bundle_is_a_row_with_its_problem_and_hides_no_other(root: Path, writer, catalog):
    from otel_session.catalog import reindex

    from .conftest import write_runs

    write_runs(writer, 3)
    broken = next((root / "sessions").glob("s1/run-*"))
    (broken / "run.json").write_bytes(b"{not json")
    (broken / "events.ndjson").write_bytes(b"garbage\n")
    reindex(catalog, root)
    rows = catalog.page(RunQuery()).rows
    assert len(rows) == 3
    (bad,) = [row for row in rows if row.integrity == "invalid"]
    assert bad.session_id is None and bad.run_id == broken.name
    assert any(problem["kind"] == "invalid_bundle" for problem in bad.problems)


@pytest.mark.parametrize(("voice", "user_texts"), [
    (False, ("table for 2", "sometime soon", "Friday")),
    (True, ("table for 2", "sometime soon", "Friday")),
    (True, ("a" * 2500, "b" * 2500, "c" * 2500)),  # the search text is full before the last turn's model call
])
def test_the_writers_fast_row_is_the_tolerant_readers_row(root: Path, writer, voice, user_texts):
    from otel_session.catalog.rows import row_of, sealed_row

    run = writer.open_run(session_id="call-3", run_id=new_run_id(), agent="booking", created_at_ns=BASE_NS)
    script = Script(run, BASE_NS)
    record_booking(script, voice=voice, user_texts=user_texts)
    script("upstream_drop", {"dropped_events": 3, "dropped_attributes": 0})
    deep: list = [1]
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    script("slot_write", {"slot": "deep", "value": deep})
    script("run_finished", {"status": "ok"})
    run.close()
    assert run.wait_sealed(10)
    fast = sealed_row(root, run.path)
    assert fast == row_of(root, run.path)
    assert set(fast.diagnostics) == {"upstream_drop", "value_truncated"}


def test_the_fast_row_of_a_long_run_reads_its_journal_a_block_at_a_time(root: Path, writer):
    """A journal of several read blocks: the row is the tolerant reader's, and the read holds a
    block at a time, not the whole file and its lines (at 1M records 584 MiB in a viewer's keeper)."""
    from otel_session.catalog.rows import row_of, sealed_row

    run = writer.open_run(session_id="call-5", run_id=new_run_id(), agent="booking", created_at_ns=BASE_NS)
    script = Script(run, BASE_NS)
    for turn in range(150):
        ids = {"turn_index": turn, "message_id": f"a{turn}"}
        script("turn_started", {"state": "s", "required_slots": []}, turn_index=turn)
        script("message_started", {"role": "assistant"}, **ids)
        for word in range(100):
            script("assistant_delta", {"index": 0, "kind": "text", "delta": f"w{word} " + "x" * 800}, **ids)
        script("message_finished", {"settled": True, "content": [{"index": 0, "kind": "text", "text": "done"}]}, **ids)
        script("turn_finished", {"state": "s", "missing_required_slots": []}, turn_index=turn)
    run.close(run_status="ok")
    assert run.wait_sealed(60)
    journal = (run.path / "events.ndjson").stat().st_size
    assert journal > 12 << 20  # twelve blocks and more
    tracemalloc.start()
    try:
        fast = sealed_row(root, run.path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fast == row_of(root, run.path) and fast.turns == 150
    assert peak < 6 << 20  # a few blocks whatever the journal's size (the whole file and its lines: 2x the journal)


def test_the_fast_row_falls_back_to_the_reader_on_a_bundle_that_is_not_as_sealed(root: Path, writer):
    from otel_session.catalog.rows import sealed_row

    run = writer.open_run(session_id="call-4", run_id=new_run_id(), created_at_ns=BASE_NS)
    run.append("run_started", {"kind": "live"}, at_ns=BASE_NS)
    run.close(run_status="ok")
    assert run.wait_sealed(10)
    with open(run.path / "events.ndjson", "ab") as journal:
        journal.write(b"{not json}\n")
    row = sealed_row(root, run.path)
    assert row.integrity == "invalid" and "count_mismatch" in row.diagnostics


def _sealed_booking(writer, session_id: str, *, last_text: str = "Friday") -> Path:
    run = writer.open_run(session_id=session_id, run_id=new_run_id(), agent="booking", created_at_ns=BASE_NS)
    script = Script(run, BASE_NS)
    record_booking(script, voice=True, user_texts=("table for 2", "sometime soon", last_text))
    script("run_finished", {"status": "ok"})
    run.close()
    assert run.wait_sealed(30)
    return run.path


# Changes to the lines ``at`` and ``at + 1`` of a journal, two records a row does not parse.
def _insert_garbage(lines: list[bytes], at: int) -> None:
    lines.insert(at, b'{"type":"x" garbage')  # not JSON (its seq is no number either)


def _renumber(lines: list[bytes], at: int) -> None:
    lines[at] = lines[at].replace(b'{"seq":%d,' % (at + 1), b'{"seq":%d,' % (at + 9), 1)  # a gap


def _cut_line(lines: list[bytes], at: int) -> None:
    lines[at] = lines[at][: len(lines[at]) // 2]  # a record's line cut short, the next line after it


def _untyped(lines: list[bytes], at: int) -> None:
    lines[at] = b'{"seq":%d,"at":"2025-01-01T00:00:00.000000Z","kind":"assistant_delta"}' % (at + 1)  # no type, ids


def _swapped(lines: list[bytes], at: int) -> None:
    lines[at], lines[at + 1] = lines[at + 1], lines[at]  # two records out of order


@pytest.mark.parametrize(("tamper", "code"), [
    (_insert_garbage, "garbage_line"), (_renumber, "seq_gap"), (_cut_line, "garbage_line"),
    (_untyped, "garbage_line"), (_swapped, "seq_gap"),
])
def test_the_fast_row_of_a_sealed_bundle_changed_since_is_the_tolerant_readers(root: Path, writer, tamper, code):
    """A sealed bundle this writer did not write as it is (copied in, fetched from a store): a line
    that is no record or a seq out of place in the records a row does not parse, its capture's
    count made to match. The fast row checks every line's shape, so its verdict is the reader's
    (before, it parsed only the records it tallied: ``complete``, no problem)."""
    from otel_session.catalog.rows import row_of, sealed_row

    path = _sealed_booking(writer, "call-6")
    journal = path / "events.ndjson"
    lines = journal.read_bytes().split(b"\n")[:-1]
    kinds = [orjson.loads(line)["type"] for line in lines]
    at = kinds.index("assistant_delta") + 1
    assert kinds[at : at + 2] == ["assistant_delta", "assistant_delta"]  # records the row does not parse
    tamper(lines, at)
    journal.write_bytes(b"\n".join(lines) + b"\n")
    capture = orjson.loads((path / "capture.json").read_bytes())
    (path / "capture.json").write_bytes(orjson.dumps({**capture, "event_count": len(lines)}))
    tolerant = row_of(root, path)
    assert tolerant.integrity == "invalid" and code in tolerant.diagnostics
    assert sealed_row(root, path) == tolerant


def test_the_fast_row_reads_a_line_of_several_blocks_as_the_reader_does(root: Path):
    """A record longer than a read block, then a crash's stretch of NULs without a newline longer
    than several blocks: the fast row and the tolerant reader read the same lines (the journal
    by ``bundle.read.iter_line_chunks``, linear in the stretch's length)."""
    from otel_session.bundle.write import BundleWriter
    from otel_session.catalog.rows import row_of, sealed_row
    from otel_session.bundle.recording import WriterLimits

    root.mkdir(parents=True)
    writer = BundleWriter(root, limits=WriterLimits(max_event_bytes=8 << 20, max_queue_bytes=32 << 20))
    try:
        path = _sealed_booking(writer, "call-7", last_text="Friday " + "x" * (3 << 20))
    finally:
        writer.shutdown()
    assert max(map(len, (path / "events.ndjson").read_bytes().split(b"\n"))) > 3 << 20
    fast = sealed_row(root, path)
    assert fast == row_of(root, path) and fast.integrity == "complete" and fast.turns == 3
    with open(path / "events.ndjson", "ab") as journal:
        journal.write(b"\0" * (5 << 20))
    torn = row_of(root, path)
    assert torn.integrity == "invalid" and "torn_tail" in torn.diagnostics
    assert sealed_row(root, path) == torn
    with open(path / "events.ndjson", "ab") as journal:
        journal.write(b"\n")
    garbage = row_of(root, path)
    assert garbage.integrity == "invalid" and "garbage_line" in garbage.diagnostics
    assert sealed_row(root, path) == garbage


@pytest.mark.sqlite_only
def test_in_process_recording_writes_the_row_at_open_and_at_seal(tmp_path: Path):
    import otel_session
    from otel_session.testing import capture_bundle

    root = tmp_path / "inproc"
    with capture_bundle(root) as captured:
        with otel_session.session("call-in-process"), otel_session.run(agent="booking"):
            with otel_session.turn(0, state="greet"):
                pass
            from otel_session.testing import wait_for

            catalog = SqlCatalog(f"sqlite:///{root.resolve() / '.catalog.sqlite3'}")
            try:  # the run is open: its row is there, recording
                opened = wait_for(lambda: catalog.page(RunQuery()).rows, timeout=30)
                assert opened[0].capture_status == "recording" and opened[0].session_id == "call-in-process"
            finally:
                catalog.close()
    catalog = SqlCatalog(f"sqlite:///{root.resolve() / '.catalog.sqlite3'}")
    try:
        assert _only_row(catalog).capture_status == "complete"
        row = _counted(catalog, root)
        assert (row.capture_status, row.integrity, row.turns, row.agent) == ("complete", "complete", 1, "booking")
        assert row.run_id == captured.bundle.run_id
    finally:
        catalog.close()
