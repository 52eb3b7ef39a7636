"""The bundle writer against real files and real threads (SPEC §5.1–5.4)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import uuid

import orjson
import pytest

from otel_session.core import layout
from otel_session.bundle.read import BundleStatus, DiagnosticCode, iter_runs, read_bundle
from otel_session.bundle.write import (
    AppendResult,
    BundleWriter,
    FailureCode,
    RunLockedError,
    RunSealedError,
    WriterClosedError,
    write_json_atomic,
)

FIXED_NS = 1_796_000_000_123_456_000


def new_run_id() -> str:
    return f"run-{uuid.uuid4()}"


def _journal(path) -> list[dict]:
    return [orjson.loads(line) for line in (path / layout.EVENTS_FILE).read_bytes().splitlines()]


def _capture(path) -> dict:
    return orjson.loads((path / layout.CAPTURE_FILE).read_bytes())


def _delta(run, n: int, **kwargs):
    return run.append("assistant_delta", {"index": 0, "kind": "text", "delta": f"d{n}"}, message_id="m1", **kwargs)


def test_layout_and_manifest(writer, root, run_id):
    run = writer.open_run(session_id="call-42", run_id=run_id, agent="booking", service="svc")
    assert run.path == root / "sessions" / "call-42" / run_id
    manifest = orjson.loads((run.path / layout.RUN_FILE).read_bytes())
    assert manifest["schema"] == "otel-session.run.v1"
    assert (manifest["session_id"], manifest["run_id"], manifest["kind"]) == ("call-42", run_id, "live")
    assert (manifest["agent"], manifest["service"]) == ("booking", "svc")
    assert manifest["created_at"].endswith("Z") and len(manifest["created_at"]) == 27
    assert _capture(run.path) == {"schema": "otel-session.capture.v1", "status": "recording", "event_count": 0}


def test_eval_runs_live_under_evals_and_never_in_the_live_index(writer, root, run_id):
    run = writer.open_run(session_id="s1", run_id=run_id, kind="eval", eval_id="nightly-7")
    assert run.path == root / "evals" / "nightly-7" / "sessions" / "s1" / run_id
    run.close(run_status="ok")
    writer.force_flush()
    assert list(iter_runs(root)) == []
    assert [info.run_id for info in iter_runs(root, include_evals=True)] == [run_id]
    with pytest.raises(ValueError):
        writer.open_run(session_id="s1", run_id=new_run_id(), kind="eval")


def test_records_are_stamped_at_enqueue_and_complete_on_close(writer, run_id):
    run = writer.open_run(session_id="s", run_id=run_id)
    assert run.append("run_started", {"kind": "live"}, at_ns=FIXED_NS, trace_id="ab" * 16) is AppendResult.ACCEPTED
    assert _delta(run, 1, turn_index=0, at_ns=FIXED_NS + 1000) is AppendResult.ACCEPTED
    run.close(run_status="ok")
    assert run.wait_sealed(5)
    records = _journal(run.path)
    assert records[0] == {
        "seq": 1,
        "at": "2026-11-30T00:53:20.123456Z",
        "type": "run_started",
        "session_id": "s",
        "run_id": run_id,
        "trace_id": "ab" * 16,
        "payload": {"kind": "live"},
    }
    assert records[1]["at"] == "2026-11-30T00:53:20.123457Z"
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[2]["type"] == "run_finished" and records[2]["payload"] == {"status": "ok"}
    assert _capture(run.path) == {"schema": "otel-session.capture.v1", "status": "complete", "event_count": 3}
    assert read_bundle(run.path).status is BundleStatus.COMPLETE


def test_concurrent_producers_get_gapless_sequence(writer, run_id):
    run = writer.open_run(session_id="s", run_id=run_id)
    # Fewer records in all than the queue bound: a starved writer thread must not turn this into a
    # bound test on a loaded machine.
    threads_n, per_thread = 8, 750

    def produce(worker: int) -> None:
        for i in range(per_thread):
            run.append("slot_write", {"slot": f"w{worker}", "value": i, "previous": None, "source": "t"})

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.close()
    assert run.wait_sealed(10)
    records = _journal(run.path)
    assert [r["seq"] for r in records] == list(range(1, threads_n * per_thread + 1))
    for worker in range(threads_n):
        values = [r["payload"]["value"] for r in records if r["payload"]["slot"] == f"w{worker}"]
        assert values == list(range(per_thread)), "each producer's records keep their order"
    assert _capture(run.path)["event_count"] == threads_n * per_thread


@pytest.mark.parametrize("batch_records,batch_bytes", [(1, 1 << 30), (7, 1 << 30), (256, 300), (256, 256 * 1024)])
def test_batch_boundaries_never_change_records(make_writer, batch_records, batch_bytes):
    writer = make_writer(batch_records=batch_records, batch_bytes=batch_bytes)
    run_id = "run-00000000-0000-0000-0000-000000000001"
    run = writer.open_run(session_id="s", run_id=run_id)
    for i in range(1_000):
        _delta(run, i, at_ns=FIXED_NS + i)
    run.close()
    assert run.wait_sealed(10)
    data = (run.path / layout.EVENTS_FILE).read_bytes()
    expected = b"".join(
        orjson.dumps(
            {
                "seq": i + 1,
                "at": f"2026-11-30T00:53:20.{123456 + (i // 1000):06d}Z",
                "type": "assistant_delta",
                "session_id": "s",
                "run_id": run_id,
                "message_id": "m1",
                "payload": {"index": 0, "kind": "text", "delta": f"d{i}"},
            }
        )
        + b"\n"
        for i in range(1_000)
    )
    assert data == expected
    assert 1 <= run.batches_written <= 1_000


def test_flush_happens_without_close_within_the_interval(writer, run_id):
    run = writer.open_run(session_id="s", run_id=run_id)
    _delta(run, 1)
    assert writer.force_flush(5_000)
    assert len(_journal(run.path)) == 1
    run.close()


class _FailingWrites:
    """Let ``allow`` writes through, then write half of the next chunk and fail with ``error``."""

    def __init__(self, writer: BundleWriter, allow: int, error: int, torn: bool) -> None:
        self.writer, self.allow, self.error, self.torn = writer, allow, error, torn
        self.real = writer._write

    def __call__(self, fd, data):
        if self.allow > 0:
            self.allow -= 1
            return self.real(fd, data)
        if self.torn:
            self.torn = False
            return self.real(fd, data[: len(data) // 2 + 7])
        raise OSError(self.error, os.strerror(self.error))


@pytest.mark.parametrize(
    "error,code",
    [
        (errno.ENOSPC, FailureCode.DISK_FULL),
        (errno.EACCES, FailureCode.PERMISSION_DENIED),
        (errno.EIO, FailureCode.IO_ERROR),
    ],
)
def test_append_error_fails_capture_with_at_most_one_torn_line(make_writer, error, code):
    writer = make_writer(batch_records=10)
    failing = writer.open_run(session_id="s", run_id=new_run_id())
    healthy = writer.open_run(session_id="s", run_id=new_run_id())
    writer._write = _FailingWrites(writer, allow=0, error=error, torn=True)
    real_write = writer._write.real
    for i in range(10):  # the first full batch: half written, then the error
        assert _delta(failing, i) is AppendResult.ACCEPTED
    writer.force_flush()
    assert failing.failure is not None and failing.failure.code is code
    assert _delta(failing, 99) is AppendResult.CAPTURE_STOPPED, "later events are refused, not raised"
    writer._write = real_write
    for i in range(5):
        assert _delta(healthy, i) is AppendResult.ACCEPTED
    healthy.close()
    failing.close()
    writer.force_flush()
    data = (failing.path / layout.EVENTS_FILE).read_bytes()
    assert data.count(b"\n") == data[: data.rfind(b"\n") + 1].count(b"\n")
    assert not data.endswith(b"\n"), "the torn half line stays, nothing is appended after it"
    capture = _capture(failing.path)
    assert capture["status"] == "failed" and capture["failure"]["code"] == code.value
    assert capture["event_count"] == data.count(b"\n")
    result = read_bundle(failing.path)
    assert result.status is BundleStatus.FAILED
    assert [d.code for d in result.diagnostics] == [DiagnosticCode.TORN_TAIL]
    assert read_bundle(healthy.path).status is BundleStatus.COMPLETE, "other runs go on"


def test_error_after_good_batches_keeps_earlier_lines(make_writer):
    writer = make_writer(batch_records=4)
    run = writer.open_run(session_id="s", run_id=new_run_id())
    writer._write = _FailingWrites(writer, allow=2, error=errno.ENOSPC, torn=False)
    for i in range(12):
        _delta(run, i)
        if i % 4 == 3:
            writer.force_flush()
    run.close()
    writer.force_flush()
    records = _journal(run.path)
    assert [r["seq"] for r in records] == list(range(1, 9))
    capture = _capture(run.path)
    assert capture["status"] == "failed" and capture["event_count"] == 8
    assert "a batch of 4 records was not (fully) written" in capture["failure"]["message"]


def _stalled_writer(make_writer, **limits):
    """A writer whose thread waits an hour between flushes, so the queue only grows."""
    return make_writer(flush_interval_s=3600, batch_records=1 << 30, batch_bytes=1 << 40, **limits)


@pytest.mark.parametrize(
    "limits,payload_size,code",
    [
        ({"max_queue_records": 50}, 10, FailureCode.QUEUE_RECORDS_EXCEEDED),
        ({"max_queue_bytes": 10_000}, 500, FailureCode.QUEUE_BYTES_EXCEEDED),
        ({"max_event_bytes": 2_000}, 5_000, FailureCode.EVENT_TOO_LARGE),
    ],
)
def test_each_bound_fails_capture_with_its_code(make_writer, limits, payload_size, code):
    writer = _stalled_writer(make_writer, **limits)
    run = writer.open_run(session_id="s", run_id=new_run_id())
    results = [run.append("assistant_delta", {"delta": "x" * payload_size}) for _ in range(100)]
    accepted = results.count(AppendResult.ACCEPTED)
    assert AppendResult.CAPTURE_STOPPED in results
    assert results[accepted:] == [AppendResult.CAPTURE_STOPPED] * (100 - accepted), "nothing after the bound"
    assert run.failure.code is code
    writer.force_flush()
    capture = _capture(run.path)
    assert capture["status"] == "failed" and capture["failure"]["code"] == code.value
    assert capture["event_count"] == accepted == len(_journal(run.path)), "accepted records are all on disk"
    assert run.peak_queued_records <= writer.limits.max_queue_records
    assert run.peak_queued_bytes <= writer.limits.max_queue_bytes


def test_nothing_changes_after_terminal_capture(writer, root, run_id):
    run = writer.open_run(session_id="s", run_id=run_id)
    _delta(run, 1)
    run.close()
    writer.force_flush()
    before = {name: (run.path / name).read_bytes() for name in os.listdir(run.path)}
    assert _delta(run, 2) is AppendResult.CAPTURE_STOPPED
    run.close(run_status="ok")
    writer.force_flush()
    assert {name: (run.path / name).read_bytes() for name in os.listdir(run.path)} == before
    assert sorted(before) == [layout.CAPTURE_FILE, layout.EVENTS_FILE, layout.RUN_FILE]  # no lock file left
    with pytest.raises(RunSealedError):
        writer.open_run(session_id="s", run_id=run_id)


def test_second_writer_in_this_process_is_refused(make_writer, run_id):
    first, second = make_writer(), make_writer()
    first.open_run(session_id="s", run_id=run_id)
    with pytest.raises(RunLockedError, match="one writer per run"):
        second.open_run(session_id="s", run_id=run_id)
    with pytest.raises(RunLockedError):
        first.open_run(session_id="s", run_id=run_id)


def test_second_writer_in_another_process_is_refused(writer, root, run_id):
    writer.open_run(session_id="s", run_id=run_id)
    script = textwrap.dedent(
        f"""
        from otel_session.bundle.write import BundleWriter, RunLockedError
        writer = BundleWriter({str(root)!r})
        try:
            writer.open_run(session_id="s", run_id={run_id!r})
        except RunLockedError as exc:
            print("refused:", exc)
        writer.shutdown()
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused:")


def test_reopening_a_recording_run_continues_after_a_torn_tail(root, run_id):
    # A real crash: the process dies (SIGKILL) mid-line, holding its lock and files.
    script = textwrap.dedent(
        f"""
        import os, signal
        from otel_session.bundle.write import BundleWriter
        writer = BundleWriter({str(root)!r})
        run = writer.open_run(session_id="s", run_id={run_id!r})
        for i in range(3):
            run.append("assistant_delta", {{"index": i, "kind": "text", "delta": "x"}}, message_id="m1")
        writer.force_flush()
        with open(run.path / "events.ndjson", "ab") as handle:
            handle.write(b'{{"seq":4,"at":"2026-')
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == -signal.SIGKILL, out.stderr

    writer = BundleWriter(root)
    try:
        again = writer.open_run(session_id="s", run_id=run_id)
        assert again.recovered_torn_bytes == len(b'{"seq":4,"at":"2026-')
        _delta(again, 3)
        again.close(run_status="interrupted")
        writer.force_flush()
    finally:
        writer.shutdown()
    assert [r["seq"] for r in _journal(again.path)] == [1, 2, 3, 4, 5]
    assert read_bundle(again.path).status is BundleStatus.COMPLETE


def test_shutdown_finishes_open_runs_as_interrupted_and_leaves_nothing_behind(root):
    fds_before = set(os.listdir("/proc/self/fd"))
    threads_before = set(threading.enumerate())
    writer = BundleWriter(root)
    runs = [writer.open_run(session_id=f"s{i}", run_id=new_run_id()) for i in range(3)]
    for run in runs:
        _delta(run, 1)
    runs[0].close(run_status="ok")
    writer.shutdown()
    writer.shutdown()  # idempotent
    assert set(threading.enumerate()) == threads_before
    assert set(os.listdir("/proc/self/fd")) == fds_before
    for run in runs:
        records = _journal(run.path)
        assert records[-1]["type"] == "run_finished"
        assert _capture(run.path)["status"] == "complete"
    assert [_journal(run.path)[-1]["payload"]["status"] for run in runs] == ["ok", "interrupted", "interrupted"]
    with pytest.raises(WriterClosedError):
        writer.open_run(session_id="s", run_id=new_run_id())
    assert writer.force_flush(100)


def test_process_exit_without_shutdown_drains_at_exit(root, run_id):
    script = textwrap.dedent(
        f"""
        from otel_session.bundle.write import BundleWriter
        writer = BundleWriter({str(root)!r})
        run = writer.open_run(session_id="s", run_id={run_id!r})
        for i in range(1000):
            run.append("assistant_delta", {{"index": 0, "kind": "text", "delta": str(i)}})
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    path = root / "sessions" / "s" / run_id
    result = read_bundle(path)
    assert result.status is BundleStatus.COMPLETE
    assert len(result.events) == 1001 and result.events[-1]["payload"] == {"status": "interrupted"}


def test_permissions_are_private(writer, root, run_id):
    run = writer.open_run(session_id="s", run_id=run_id)
    _delta(run, 1)
    run.close()
    writer.force_flush()
    (run.path / layout.FEEDBACK_FILE).touch()  # not the writer's: only its own files are checked
    for directory in (root, root / "sessions", run.path.parent, run.path):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for name in (layout.RUN_FILE, layout.EVENTS_FILE, layout.CAPTURE_FILE):
        assert stat.S_IMODE((run.path / name).stat().st_mode) == 0o600, name


def test_atomic_replace_keeps_the_old_document_when_the_write_fails(tmp_path, monkeypatch):
    target = tmp_path / "capture.json"
    write_json_atomic(target, {"status": "recording"})
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(errno.EIO, "boom")))
    with pytest.raises(OSError):
        write_json_atomic(target, {"status": "complete"})
    assert orjson.loads(target.read_bytes()) == {"status": "recording"}
    monkeypatch.undo()
    write_json_atomic(target, {"status": "complete"})
    assert orjson.loads(target.read_bytes()) == {"status": "complete"}
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".tmp")) == ["capture.json"]


HOSTILE_SESSION_IDS = [
    "..",
    ".",
    "../../etc",
    "/etc/passwd",
    "a/b",
    "nul\x00byte",
    "x" * 10_240,
    "ünïcødé-☎",
    "%2e%2e",
    "%2e%2e%2f%2e%2e",
    "..\\..\\windows",
    "",
]


def test_session_ids_that_are_not_text_are_refused(writer):
    with pytest.raises(ValueError, match="not valid Unicode"):
        writer.open_run(session_id="\ud800", run_id=new_run_id())


@pytest.mark.parametrize("session_id", HOSTILE_SESSION_IDS, ids=lambda s: repr(s)[:20])
def test_hostile_session_ids_never_escape_the_root(writer, root, session_id):
    run = writer.open_run(session_id=session_id, run_id=new_run_id())
    _delta(run, 1)
    run.close()
    writer.force_flush()
    real_root = os.path.realpath(root / "sessions")
    assert os.path.dirname(os.path.realpath(run.path.parent)) == real_root
    assert len(run.path.parent.name) <= 128
    info = [i for i in iter_runs(root) if i.run_id == run.run_id]
    assert [i.session_id for i in info] == [session_id], "the true id is kept in run.json"


@pytest.mark.parametrize("run_id", ["../x", "run-../../x", "RUN-1", "run-00000000-0000-0000-0000-00000000000G"])
def test_malformed_run_ids_are_refused(writer, run_id):
    with pytest.raises(layout.UnsafePathError):
        writer.open_run(session_id="s", run_id=run_id)


def test_values_that_json_cannot_encode_do_not_reach_the_producer(writer, run_id):
    run = writer.open_run(session_id="s", run_id=run_id)
    assert run.append("slot_write", {"slot": "x", "value": {1, 2}, "previous": object(), 3: b"\xff"}) is AppendResult.ACCEPTED
    run.close()
    writer.force_flush()
    payload = _journal(run.path)[0]["payload"]
    assert payload["value"] == [1, 2] and payload["3"] == "\ufffd" and payload["previous"].startswith("<object")


def test_lone_surrogates_in_payloads_are_replaced_not_raised(writer, run_id):
    run = writer.open_run(session_id="s", run_id=run_id)
    assert run.append("assistant_delta", {"delta": "a\ud800b"}, message_id="m\udfff") is AppendResult.ACCEPTED
    run.close()
    writer.force_flush()
    record = _journal(run.path)[0]
    assert (record["payload"]["delta"], record["message_id"]) == ("a?b", "m?")


def test_a_forked_child_writes_its_own_runs_and_leaves_the_parents_alone(writer, run_id):
    """gunicorn --preload forks after configuring: the child needs a writer thread of its own."""
    parents = writer.open_run(session_id="s", run_id=run_id)
    _delta(parents, 0)
    child_run_id = new_run_id()
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code only
        code = 1
        try:
            refused = _delta(parents, 1) is AppendResult.CAPTURE_STOPPED
            mine = writer.open_run(session_id="s", run_id=child_run_id)
            _delta(mine, 0)
            mine.close(run_status="ok")
            code = 0 if refused and writer.force_flush(10_000) and mine.sealed else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    _delta(parents, 1)
    parents.close(run_status="ok")
    assert writer.force_flush()
    child_bundle = read_bundle(layout.run_path(writer.root, "s", child_run_id))
    parent_bundle = read_bundle(parents.path)
    assert child_bundle.status is BundleStatus.COMPLETE and len(child_bundle.events) == 2
    assert parent_bundle.status is BundleStatus.COMPLETE
    assert [event["seq"] for event in parent_bundle.events] == [1, 2, 3]  # the child added nothing


def test_a_session_directory_removed_while_the_writer_runs_is_made_again(writer, root):
    """Retention jobs delete old sessions; the writer's memory of made directories must not outlive them."""
    first = writer.open_run(session_id="s", run_id=new_run_id())
    first.close(run_status="ok")
    assert writer.force_flush()
    shutil.rmtree(first.path.parent)
    again = writer.open_run(session_id="s", run_id=new_run_id())
    _delta(again, 0)
    again.close(run_status="ok")
    assert writer.force_flush()
    assert read_bundle(again.path).status is BundleStatus.COMPLETE


def test_sessions_removed_whole_while_the_writer_runs_is_made_again_and_checked(writer, root, tmp_path):
    """A new session's directory is made with one ``mkdir`` once ``<root>/sessions`` was checked; a
    ``sessions`` removed since is made again, and one replaced by a symlink is refused again."""
    first = writer.open_run(session_id="s1", run_id=new_run_id())
    first.close(run_status="ok")
    assert writer.force_flush()
    shutil.rmtree(root / "sessions")
    again = writer.open_run(session_id="s2", run_id=new_run_id())
    again.close(run_status="ok")
    assert writer.force_flush()
    assert read_bundle(again.path).status is BundleStatus.COMPLETE
    assert stat.S_IMODE(os.stat(root / "sessions").st_mode) == 0o700
    shutil.rmtree(root / "sessions")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sessions").symlink_to(outside, target_is_directory=True)
    with pytest.raises(layout.UnsafePathError, match="symlink"):
        writer.open_run(session_id="s3", run_id=new_run_id())
    assert list(outside.iterdir()) == []


def test_an_eval_sessions_path_replaced_by_a_symlink_on_the_way_is_refused_at_the_next_session(writer, root, tmp_path):
    """A new eval session's parent (``<root>/evals/<eval>/sessions``) is deeper than one ``lstat``
    sees: ``<root>/evals`` replaced by a symlink after the first session must still be refused."""
    first = writer.open_run(session_id="s1", run_id=new_run_id(), kind="eval", eval_id="e1")
    first.close(run_status="ok")
    assert writer.force_flush()
    outside = tmp_path / "outside"
    shutil.move(root / "evals", outside)
    (root / "evals").symlink_to(outside, target_is_directory=True)
    with pytest.raises(layout.UnsafePathError, match="evals"):
        writer.open_run(session_id="s2", run_id=new_run_id(), kind="eval", eval_id="e1")
    assert [path.name for path in (outside / "e1" / "sessions").iterdir()] == ["s1"]


def test_bundles_a_dead_process_left_half_made_are_removed(writer, root):
    """A crash between making a bundle aside and renaming it into place leaves a hidden directory."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)
    session = root / "sessions" / "s"
    dead = session / f".{new_run_id()}.{dead_pid}.1.new"
    live = session / f".{new_run_id()}.{os.getppid()}.1.new"  # a live process (pytest's parent) is building it
    for building in (dead, live):
        building.mkdir(parents=True)
        (building / layout.RUN_FILE).write_text("{}")
    assert writer.remove_abandoned_builds() == 1
    assert not dead.exists() and live.exists()


@pytest.mark.parametrize("linked, eval_id", [("sessions", None), ("evals", "e1"), ("evals/e1/sessions", "e1")])
def test_a_symlinked_sessions_or_evals_directory_is_refused_not_followed(tmp_path, root, writer, run_id, linked, eval_id):
    """Whole bundles must not land outside the root through ``<root>/sessions`` (or ``evals``) linked elsewhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    link = root / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    kind = "eval" if eval_id else "live"
    with pytest.raises(layout.UnsafePathError, match="symlink"):
        writer.open_run(session_id="s", run_id=run_id, kind=kind, eval_id=eval_id)
    assert list(outside.iterdir()) == []


def test_the_collector_rejects_spans_for_a_symlinked_sessions_directory(tmp_path, root):
    from otel_session.collector.counters import RejectReason
    from otel_session.collector.sink import BundleSink
    from otel_session.normalize import SpanData
    from otel_session.redact import RedactionPolicy, Redactor

    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "sessions").symlink_to(outside, target_is_directory=True)
    writer = BundleWriter(root)
    sink = BundleSink(writer, Redactor(RedactionPolicy(), key=b"k"))
    span = SpanData(trace_id=7, span_id=1, parent_span_id=None, name="root", start_time_ns=1, end_time_ns=2,
                    attributes={"session.id": "s"})
    result = sink.submit([span])
    writer.shutdown()
    assert result.rejected_by == {RejectReason.INVALID_ID: 1} and "not a plain directory" in result.error_message
    assert list(outside.iterdir()) == []


def test_a_slow_run_hook_never_holds_up_the_writer(tmp_path):
    """A catalog locked by a viewer, a database across the network: the writer's queues are bounded,
    so a hook that waits must not make a burst of records overflow them (it runs on its own thread)."""
    import threading

    from otel_session.bundle.write import BundleWriter

    released = threading.Event()
    told: list[tuple[int, int]] = []

    class SlowHooks:
        def runs_passed(self, opened, sealed):
            released.wait(60)
            told.append((len(opened), len(sealed)))

        def close(self):
            pass

    writer = BundleWriter(tmp_path, hooks=SlowHooks())
    try:
        run = writer.open_run(session_id="burst", run_id="run-00000000-0000-4000-8000-000000000001")
        for number in range(20_000):  # more than the 8,192-record queue, faster than a hook that waits
            run.append("assistant_delta", {"index": 0, "kind": "text", "delta": f"{number} "}, at_ns=10**18 + number)
        run.close()
        assert writer.force_flush(timeout_millis=200) is False  # written, but the hooks not told yet
        released.set()
        assert writer.force_flush()
    finally:
        released.set()
        writer.shutdown()
    capture = (run.path / "capture.json").read_text()
    assert '"status":"complete"' in capture.replace(" ", "") and told and sum(sealed for _, sealed in told) == 1


def test_a_run_opened_is_told_with_its_own_seal_and_a_live_one_at_a_flush(tmp_path):
    """The catalog writes one transaction a call, and a run opened and sealed in one call as one
    row: so the hooks hear of a run's opening with its own seal (a short run), or ``hold_s`` after
    it opened (here an hour) or at a flush while it still records (a live run)."""
    import threading

    from otel_session.bundle.hooks import HookTeller, SealedRun

    told: list[tuple[list[str], list[str]]] = []
    heard = threading.Event()

    class Hooks:
        def runs_passed(self, opened, sealed):
            told.append(([path for path, _ in opened], [run.directory for run in sealed]))
            heard.set()

        def close(self):
            pass

    teller = HookTeller(Hooks(), hold_s=3600.0)
    try:
        teller.opened("s/run-a", {})
        teller.opened("s/run-b", {})
        assert not heard.wait(0.2)  # nothing sealed yet: nothing told (can only fail early)
        teller.passed([SealedRun("s/run-a", {}, None)])
        assert heard.wait(60)
        assert told == [(["s/run-a"], ["s/run-a"])]  # run-b still records: held
        assert teller.flush(60) and told[-1] == (["s/run-b"], [])  # a flush tells it now
    finally:
        teller.close(60)


def test_the_hooks_are_told_each_sealed_run_s_manifest_and_capture_as_written(tmp_path):
    """What the writer holds of a run it sealed reaches its hooks (the catalog reads nothing back)."""
    import json

    from otel_session.bundle.write import BundleWriter

    told = []

    class Hooks:
        def runs_passed(self, opened, sealed):
            told.extend(sealed)

        def close(self):
            pass

    writer = BundleWriter(tmp_path, hooks=Hooks())
    try:
        run = writer.open_run(session_id="told", run_id="run-00000000-0000-4000-8000-000000000002", agent="booking")
        run.append("run_started", {"kind": "live"}, at_ns=10**18)
        run.close(run_status="ok")
        assert writer.force_flush()
    finally:
        writer.shutdown()
    (sealed,) = told
    assert sealed.directory == run.directory
    assert sealed.manifest == json.loads((run.path / "run.json").read_text())
    assert sealed.capture == json.loads((run.path / "capture.json").read_text())
    assert sealed.capture["status"] == "complete" and sealed.capture["event_count"] == 2
