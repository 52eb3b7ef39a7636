"""``RunRecorder.close(reorder=...)``: the journal rewritten in order before terminal capture."""

from __future__ import annotations

import uuid

import orjson

from otel_session.core.journal import format_timestamp
from otel_session.bundle.read import BundleStatus, read_bundle
from otel_session.bundle.write import AppendResult, BundleWriter


def _open(tmp_path, writer):
    return writer.open_run(session_id="s", run_id=f"run-{uuid.uuid4()}", service="test")


def test_close_with_reorder_rewrites_in_key_order_and_renumbers(tmp_path):
    writer = BundleWriter(tmp_path)
    run = _open(tmp_path, writer)
    for at_ns, name in [(3_000_000, "c"), (1_000_000, "a"), (2_000_000, "b"), (1_000_000, "a2")]:
        assert run.append("turn_started", {"state": name, "required_slots": []}, at_ns=at_ns) is AppendResult.ACCEPTED
    run.close(run_status="ok", reorder=lambda record: (record["at"], record["seq"]), capture_extras={"order": "event_time"})
    assert run.wait_sealed(5)
    writer.shutdown()

    result = read_bundle(run.path)
    assert result.status is BundleStatus.COMPLETE, result.diagnostics
    assert [event["seq"] for event in result.events] == [1, 2, 3, 4, 5]
    assert [event.get("payload", {}).get("state") for event in result.events] == ["a", "a2", "b", "c", None]
    assert result.events[0]["at"] == format_timestamp(1_000_000)
    capture = orjson.loads((run.path / "capture.json").read_bytes())
    assert capture["event_count"] == 5 and capture["order"] == "event_time" and capture["resequenced"] is True
    assert not list(run.path.glob(".*.tmp"))
    assert run.append("turn_started", {}) is AppendResult.CAPTURE_STOPPED


def test_a_journal_already_in_order_is_not_rewritten_nor_renumbered(tmp_path):
    """A live follower's seq numbers stay true: only a seal that moves records says "resequenced"."""
    writer = BundleWriter(tmp_path)
    run = _open(tmp_path, writer)
    for at_ns in (1_000_000, 2_000_000):
        run.append("turn_started", {"state": str(at_ns), "required_slots": []}, at_ns=at_ns)
    writer.force_flush()
    inode = (run.path / "events.ndjson").stat().st_ino
    run.close(reorder=lambda record: (record["at"], record["seq"]), capture_extras={"order": "event_time"})
    assert run.wait_sealed(5)
    writer.shutdown()
    capture = orjson.loads((run.path / "capture.json").read_bytes())
    assert capture["order"] == "event_time" and "resequenced" not in capture
    assert (run.path / "events.ndjson").stat().st_ino == inode


def test_a_failing_key_keeps_the_appended_journal(tmp_path, caplog):
    writer = BundleWriter(tmp_path)
    run = _open(tmp_path, writer)
    run.append("turn_started", {"state": "x"}, at_ns=2_000_000)
    run.append("turn_started", {"state": "y"}, at_ns=1_000_000)

    def broken_key(record):
        raise RuntimeError("bad key")

    run.close(reorder=broken_key)
    assert run.wait_sealed(5)
    writer.shutdown()
    result = read_bundle(run.path)
    assert result.status is BundleStatus.COMPLETE
    assert [event["payload"]["state"] for event in result.events] == ["x", "y"]
    assert "could not rewrite" in caplog.text


def test_reorder_after_reopen_continues_the_same_journal(tmp_path):
    run_id = f"run-{uuid.uuid4()}"
    first = BundleWriter(tmp_path)
    run = first.open_run(session_id="s", run_id=run_id)
    run.append("turn_started", {"state": "late"}, at_ns=5_000_000)
    first.force_flush()
    # A crash: the writer lets go of the run (its journal, its mark); the bundle stays "recording" with a torn tail.
    events = run.path / "events.ndjson"
    run._writer.forget(run)
    with open(events, "ab") as handle:
        handle.write(b'{"seq": 2, "at": "torn')
    second = BundleWriter(tmp_path)
    again = second.open_run(session_id="s", run_id=run_id)
    assert again.recovered_torn_bytes > 0
    again.append("turn_started", {"state": "early"}, at_ns=1_000_000)
    again.close(reorder=lambda record: (record["at"], record["seq"]))
    assert again.wait_sealed(5)
    second.shutdown()
    first.shutdown()
    result = read_bundle(run.path)
    assert result.status is BundleStatus.COMPLETE, result.diagnostics
    assert [event["payload"]["state"] for event in result.events] == ["early", "late"]


def test_refusing_a_sealed_run_leaves_its_bundle_byte_for_byte_unchanged(tmp_path):
    import pytest

    from otel_session.bundle.write import RunSealedError

    writer = BundleWriter(tmp_path)
    run = _open(tmp_path, writer)
    run.close(run_status="ok")
    assert run.wait_sealed(5)
    before = {path.name: path.read_bytes() for path in run.path.iterdir()}
    with pytest.raises(RunSealedError):
        writer.open_run(session_id="s", run_id=run.run_id)
    writer.shutdown()
    assert {path.name: path.read_bytes() for path in run.path.iterdir()} == before
