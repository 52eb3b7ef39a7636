"""Group commit of seals (otel_session.bundle.seal): the runs one writer pass closes are synced together.

Real files, the real ``syncfs(2)`` through ctypes, real threads. The sync a writer is built with is
the seam: a recording or failing one wraps the real strategy; nothing private is patched.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest

from otel_session.core import layout
from otel_session.bundle.read import BundleStatus, read_bundle
from otel_session.bundle.seal import (
    FsyncEach,
    SealPlan,
    SealSync,
    SyncFs,
    libc_syncfs,
    seal_sync_from_env,
    syncfs_reports_errors,
)
from otel_session.bundle.write import BundleWriter

FIXED_NS = 1_796_000_000_123_456_000
SYNCFS = libc_syncfs()
needs_syncfs = pytest.mark.skipif(SYNCFS is None, reason="no syncfs(2) here")


class Recording:
    """Wraps a strategy: counts the groups it syncs; the first group's ``files`` can be held."""

    def __init__(self, inner: SealSync, *, hold_first: bool = False) -> None:
        self.inner = inner
        self.name = inner.name
        self.groups: list[int] = []
        self.renamed: list[int] = []
        self.holding = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()

    def files(self, plans: Sequence[SealPlan]) -> None:
        if not self.groups:
            self.holding.set()
            assert self.release.wait(30)
        self.groups.append(len(plans))
        self.inner.files(plans)

    def renames(self, plans: Sequence[SealPlan]) -> None:
        self.renamed.append(len(plans))
        self.inner.renames(plans)


def _run_id(n: int) -> str:
    return f"run-{uuid.UUID(int=n + 1)}"


def _record(run, n: int, *, reverse: bool = False) -> None:
    for k in range(6):
        at = FIXED_NS + ((5 - k) if reverse else k) * 1000
        payload = {"index": 0, "kind": "text", "delta": f"run {n} part {k}"}
        run.append("assistant_delta", payload, at_ns=at, message_id="m1")


def _by_at(record: dict) -> str:
    return record["at"]


def _open(writer: BundleWriter, n: int):
    return writer.open_run(session_id=f"s{n // 3}", run_id=_run_id(n), created_at_ns=FIXED_NS, service="svc")


def _close(run, n: int) -> None:
    """Every third run rewritten in order (its records were appended backwards), the rest as appended."""
    run.append("run_finished", {"status": "ok"}, at_ns=FIXED_NS + 10_000)
    run.close(reorder=_by_at if n % 3 == 0 else None, capture_extras={"order": "event_time"})


def _seal_in_one_pass(writer: BundleWriter, sync: Recording, count: int) -> None:
    """Run 0 seals first and holds the writer in its sync; runs 1…count-1 close meanwhile and are
    sealed by the next writer pass, as one group."""
    first = _open(writer, 0)
    _record(first, 0, reverse=True)
    _close(first, 0)
    assert sync.holding.wait(30)
    runs = [_open(writer, n) for n in range(1, count)]
    for n, run in enumerate(runs, start=1):
        _record(run, n, reverse=n % 3 == 0)
        _close(run, n)
    sync.release.set()
    assert writer.force_flush(30_000)
    assert all(run.sealed for run in [first, *runs])


def _seal_one_by_one(writer: BundleWriter, count: int) -> None:
    for n in range(count):
        run = _open(writer, n)
        _record(run, n, reverse=n % 3 == 0)
        _close(run, n)
        assert run.wait_sealed(30)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _writer(root: Path, sync: SealSync) -> BundleWriter:
    return BundleWriter(root, identifier=lambda value: value, seal_sync=sync)


@pytest.mark.parametrize("strategy", [
    pytest.param(lambda: SyncFs(SYNCFS), id="syncfs", marks=needs_syncfs), pytest.param(FsyncEach, id="fsync"),
])
def test_a_group_seal_writes_the_bundles_single_seals_write(tmp_path, strategy: Callable[[], SealSync]):
    grouped = Recording(strategy(), hold_first=True)
    writer = _writer(tmp_path / "grouped", grouped)
    try:
        _seal_in_one_pass(writer, grouped, 10)
    finally:
        writer.shutdown()
    assert grouped.groups == [1, 9] and grouped.renamed == [1, 9]

    alone = Recording(strategy())
    writer = _writer(tmp_path / "alone", alone)
    try:
        _seal_one_by_one(writer, 10)
    finally:
        writer.shutdown()
    assert alone.groups == [1] * 10

    tree = _tree(tmp_path / "grouped")
    assert tree == _tree(tmp_path / "alone")
    assert len(tree) == 30, "three files a bundle, no temporary left"
    captures = [orjson.loads(data) for name, data in tree.items() if name.endswith(layout.CAPTURE_FILE)]
    assert {capture["status"] for capture in captures} == {"complete"}
    assert sum(capture.get("resequenced", False) for capture in captures) == 4  # runs 0, 3, 6, 9
    for path in (tmp_path / "grouped" / "sessions").glob("*/run-*"):
        bundle = read_bundle(path)
        assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
        assert [event["at"] for event in bundle.events] == sorted(event["at"] for event in bundle.events)


class FailingSyncfs:
    """The real syncfs, failing with EIO on the calls numbered in ``fail`` (1-based)."""

    def __init__(self, *fail: int) -> None:
        self.fail = set(fail)
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.calls in self.fail:
            raise OSError(errno.EIO, "syncfs: Input/output error")
        SYNCFS(fd)


@needs_syncfs
@pytest.mark.parametrize("failing_call,step", [(3, "syncfs of the bundle before its seal failed"),
                                               (4, "syncfs of the sealed bundle failed")])
def test_a_failed_sync_fails_every_member_of_the_group(tmp_path, failing_call: int, step: str):
    """Calls 1 and 2 sync run 0's group; 3 (files) and 4 (renames) the group of runs 1…5."""
    sync = Recording(SyncFs(FailingSyncfs(failing_call)), hold_first=True)
    writer = _writer(tmp_path, sync)
    try:
        _seal_in_one_pass(writer, sync, 6)
    finally:
        writer.shutdown()
    failed = {}
    for path in (tmp_path / "sessions").glob("*/run-*"):
        bundle = read_bundle(path)
        assert sorted(p.name for p in path.iterdir()) == ["capture.json", "events.ndjson", "run.json"]
        if bundle.capture["status"] == "failed":
            assert bundle.status is BundleStatus.FAILED
            assert bundle.capture["failure"]["code"] == "io_error"
            assert bundle.capture["event_count"] == len(bundle.events) == 7, "the records stay"
            failed[path.name] = bundle.capture["failure"]["message"]
        else:
            assert path.name == _run_id(0) and bundle.status is BundleStatus.COMPLETE
    assert sorted(failed) == sorted(_run_id(n) for n in range(1, 6)), "every member of the failed group"
    assert all(message.startswith(f"{step}: [Errno 5]") for message in failed.values())


class FailingFsync:
    """The real fsync, failing with EIO from the ``fail``-th call on (1-based)."""

    def __init__(self, fail: int) -> None:
        self.fail = fail
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        with self.lock:
            self.calls += 1
            failing = self.calls >= self.fail
        if failing:
            raise OSError(errno.EIO, "Input/output error")
        os.fsync(fd)


def test_a_failed_fsync_in_the_fallback_fails_every_member_of_the_group(tmp_path):
    """Run 0's group makes 3 + 3 + 1 fsyncs (journal, capture, run.json; its session directory,
    ``sessions/``, the root; the run directory); the second group's first fails."""
    sync = Recording(FsyncEach(fsync=FailingFsync(8)), hold_first=True)
    writer = _writer(tmp_path, sync)
    try:
        _seal_in_one_pass(writer, sync, 6)
    finally:
        writer.shutdown()
    statuses = {path.name: read_bundle(path).capture for path in (tmp_path / "sessions").glob("*/run-*")}
    assert statuses.pop(_run_id(0))["status"] == "complete"
    assert {capture["status"] for capture in statuses.values()} == {"failed"} and len(statuses) == 5
    assert {capture["failure"]["code"] for capture in statuses.values()} == {"io_error"}
    assert all(capture["failure"]["message"].startswith("fsync of the bundle before its seal failed")
               for capture in statuses.values())


def test_the_fsync_fallback_is_chosen_by_the_setting_or_where_syncfs_cannot_report(monkeypatch):
    monkeypatch.setenv("OTEL_SESSION_SEAL_SYNC", "fsync")
    assert isinstance(seal_sync_from_env(), FsyncEach)
    monkeypatch.setenv("OTEL_SESSION_SEAL_SYNC", "auto")
    expected = SyncFs if SYNCFS is not None and syncfs_reports_errors() else FsyncEach
    assert isinstance(seal_sync_from_env(), expected)
    assert not syncfs_reports_errors("5.4.0-150-generic") and not syncfs_reports_errors("4.19.0")
    assert syncfs_reports_errors("5.8.0") == syncfs_reports_errors("6.18.44") == (os.uname().sysname == "Linux")


def test_a_process_killed_in_the_middle_of_a_group_seal_leaves_bundles_that_continue(tmp_path):
    """SIGKILL between a group's temporaries and their renames: every bundle still says
    ``recording`` (nothing reported sealed); the next writer removes the temporaries, continues
    each run and seals it with every record."""
    root = tmp_path / "bundles"
    script = textwrap.dedent(f"""
        import os, signal
        from otel_session.bundle.write import BundleWriter

        class DieInTheSync:
            name = "syncfs"
            def files(self, plans):
                assert all(os.path.exists(plan.capture_tmp) for plan in plans)
                os.kill(os.getpid(), signal.SIGKILL)
            renames = files

        writer = BundleWriter({str(root)!r}, identifier=lambda value: value, seal_sync=DieInTheSync())
        runs = [writer.open_run(session_id="s0", run_id=run_id) for run_id in {[_run_id(n) for n in range(2)]!r}]
        for run in runs:
            for k in range(3):
                at_ns = {FIXED_NS} + (3 - k) * 1000
                run.append("turn_started", {{"state": "greet", "required_slots": []}}, at_ns=at_ns)
        runs[0].close(reorder=lambda record: record["at"])  # its journal rewritten aside too
        runs[1].close()
        writer.force_flush()
    """)
    completed = subprocess.run([sys.executable, "-c", script], timeout=300)
    assert completed.returncode == -signal.SIGKILL
    paths = [layout.run_path(root, "s0", _run_id(n)) for n in range(2)]
    assert (paths[0] / ".events.ndjson.reorder.tmp").exists()
    for path in paths:
        assert orjson.loads((path / layout.CAPTURE_FILE).read_bytes())["status"] == "recording"
        assert [p.name for p in path.glob(".capture.json.*.tmp")], "the temporary capture, never renamed"
    writer = _writer(root, FsyncEach())
    try:
        for n, path in enumerate(paths):
            again = writer.open_run(session_id="s0", run_id=_run_id(n))
            again.close(reorder=_by_at)
            assert again.wait_sealed(30)
    finally:
        writer.shutdown()
    for path in paths:
        assert sorted(p.name for p in path.iterdir()) == ["capture.json", "events.ndjson", "run.json"]
        bundle = read_bundle(path)
        assert bundle.status is BundleStatus.COMPLETE and len(bundle.events) == 3
        assert [event["seq"] for event in bundle.events] == [1, 2, 3]


def test_a_bug_in_the_sync_ends_every_seal_and_the_writer_goes_on(tmp_path):
    """Not an I/O error but a bug (any exception): logged, every run of the group released (its
    capture stays ``recording``: never reported complete), and the next runs seal normally."""

    class Broken:
        name = "broken"
        calls = 0

        def files(self, plans: Sequence[SealPlan]) -> None:
            Broken.calls += 1
            if Broken.calls == 1:
                raise ZeroDivisionError("a bug")
            FsyncEach().files(plans)

        def renames(self, plans: Sequence[SealPlan]) -> None:
            FsyncEach().renames(plans)

    writer = _writer(tmp_path, Broken())
    try:
        first = _open(writer, 0)
        _close(first, 0)
        assert first.wait_sealed(30)
        second = _open(writer, 1)
        _close(second, 1)
        assert second.wait_sealed(30)
    finally:
        writer.shutdown()
    assert read_bundle(first.path).capture["status"] == "recording"
    assert sorted(p.name for p in first.path.iterdir()) == ["capture.json", "events.ndjson", "run.json"]
    assert read_bundle(second.path).status is BundleStatus.COMPLETE
