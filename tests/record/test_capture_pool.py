"""Spare capture inodes (otel_session.bundle.capture_pool): a seal frees no inode, an open creates no capture.

Real files on the test's file system, real hard links and renames, a real SIGKILL, a real tmpfs
mounted under the root for another file system (needs root, else skipped).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import orjson
import pytest

from otel_session.core import layout
from otel_session.bundle.capture_pool import POOL_DIR
from otel_session.core.journal import CAPTURE_SCHEMA
from otel_session.bundle.read import BundleStatus, read_bundle
from otel_session.bundle.seal import FsyncEach
from otel_session.bundle.write import BundleWriter

FIXED_NS = 1_796_000_000_123_456_000
RECORDING = {"schema": CAPTURE_SCHEMA, "status": "recording", "event_count": 0}


def _run_id() -> str:
    return f"run-{uuid.uuid4()}"


def _writer(root: Path, **kwargs) -> BundleWriter:
    return BundleWriter(root, identifier=lambda value: value, **kwargs)


def _open(writer: BundleWriter, session: str = "s"):
    return writer.open_run(session_id=session, run_id=_run_id(), created_at_ns=FIXED_NS, service="svc")


def _seal(run) -> None:
    run.append("turn_started", {"state": "greet", "required_slots": []}, at_ns=FIXED_NS)
    run.close(run_status="ok")
    assert run.wait_sealed(30)


def _capture_inode(run) -> os.stat_result:
    return os.stat(run.path / layout.CAPTURE_FILE)


def _pools(root: Path) -> list[str]:
    try:
        return sorted(os.listdir(root / POOL_DIR))
    except FileNotFoundError:
        return []


def test_a_seal_frees_no_inode_the_next_open_reuses_it(tmp_path):
    """Bundles opened and sealed one after another all record in the same capture inode: each seal
    keeps the ``recording`` capture it replaces, each open renames it into place."""
    root = tmp_path / "bundles"
    writer = _writer(root)
    try:
        inodes = []
        for _ in range(6):
            run = _open(writer)
            recording = _capture_inode(run)
            assert recording.st_nlink == 1, "the bundle's capture is its own inode"
            assert orjson.loads((run.path / layout.CAPTURE_FILE).read_bytes()) == RECORDING
            inodes.append(recording.st_ino)
            _seal(run)
            assert _capture_inode(run).st_nlink == 1
        assert len(set(inodes[1:])) == 1 and inodes[1] == inodes[0], "one recording inode, never freed"
    finally:
        writer.shutdown()
    assert not (root / POOL_DIR).exists() or _pools(root) == [], "the pool goes with the writer"


def test_two_writers_on_one_root_keep_pools_of_their_own(tmp_path):
    """The in-process writer and a collector's on one root: neither takes or removes the other's
    spares; each writer's pool goes with it, the pools' directory with the last."""
    root = tmp_path / "bundles"
    first, second = _writer(root), _writer(root)
    try:
        for writer in (first, second, first, second):
            _seal(_open(writer))
        assert len(_pools(root)) == 2
        first_run, second_run = _open(first), _open(second)
        assert _capture_inode(first_run).st_ino != _capture_inode(second_run).st_ino
        first.shutdown()
        assert len(_pools(root)) == 1
        _seal(second_run)
    finally:
        first.shutdown()
        second.shutdown()
    assert not (root / POOL_DIR).exists()
    for path in (root / "sessions" / "s").iterdir():
        assert sorted(p.name for p in path.iterdir()) == ["capture.json", "events.ndjson", "run.json"]


def test_a_forked_child_never_uses_the_parents_spares(tmp_path):
    root = tmp_path / "bundles"
    writer = _writer(root)
    try:
        _seal(_open(writer))
        (parents_pool,) = _pools(root)
        spares = sorted(os.listdir(root / POOL_DIR / parents_pool))
        pid = os.fork()
        if pid == 0:  # the child: report through the exit code only
            code = 1
            try:
                run = _open(writer)
                own = _capture_inode(run).st_nlink == 1
                _seal(run)
                code = 0 if own and sorted(os.listdir(root / POOL_DIR / parents_pool)) == spares else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert sorted(os.listdir(root / POOL_DIR / parents_pool)) == spares, "the parent's spares untouched"
        assert len(_pools(root)) == 2, "the child's own pool (it exited without its atexit)"
        _seal(_open(writer))  # the parent takes its spare again; the dead child's pool is left alone
    finally:
        writer.shutdown()
    (left,) = _pools(root)
    assert left.startswith(f"{pid}."), "the dead child's pool, removed by the next writer that makes one"
    again = _writer(root)
    try:
        _seal(_open(again))
        assert _pools(root) == [p for p in _pools(root) if p.startswith(f"{os.getpid()}.")]
    finally:
        again.shutdown()
    assert not (root / POOL_DIR).exists()


def test_killed_between_keeping_a_capture_and_replacing_it_the_run_continues(tmp_path):
    """SIGKILL right after the seal linked the ``recording`` capture into the pool, before the rename
    over it: the bundle says ``recording`` and shares its inode with the dead pool's entry. The next
    writer continues and seals it, never reuses that entry, and removes the dead pool."""
    root = tmp_path / "bundles"
    run_ids = [_run_id(), _run_id()]
    script = textwrap.dedent(f"""
        import os, signal
        from otel_session.bundle.write import BundleWriter

        writer = BundleWriter({str(root)!r}, identifier=lambda value: value)
        first = writer.open_run(session_id="s", run_id={run_ids[0]!r})
        first.close(run_status="ok")
        assert first.wait_sealed(30)  # the pool is made, with one spare
        real_link = os.link
        def link_then_die(*args, **kwargs):
            real_link(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        os.link = link_then_die
        second = writer.open_run(session_id="s", run_id={run_ids[1]!r})
        second.append("turn_started", {{"state": "greet", "required_slots": []}}, at_ns={FIXED_NS})
        second.close(run_status="ok")
        writer.force_flush()
    """)
    completed = subprocess.run([sys.executable, "-c", script], timeout=300)
    assert completed.returncode == -signal.SIGKILL
    crashed = layout.run_path(root, "s", run_ids[1])
    assert orjson.loads((crashed / layout.CAPTURE_FILE).read_bytes())["status"] == "recording"
    assert _capture_inode_of(crashed).st_nlink == 2, "its capture is also the dead pool's entry"
    (dead,) = _pools(root)
    writer = _writer(root, seal_sync=FsyncEach())
    try:
        again = writer.open_run(session_id="s", run_id=run_ids[1])
        again.close(run_status="ok")
        assert again.wait_sealed(30)
        _seal(_open(writer))  # makes this writer's pool: the dead one is removed first
        assert dead not in _pools(root)
        fresh = _open(writer)
        assert _capture_inode(fresh).st_nlink == 1
        _seal(fresh)
    finally:
        writer.shutdown()
    bundle = read_bundle(crashed)
    assert bundle.status is BundleStatus.COMPLETE
    assert [event["type"] for event in bundle.events] == ["turn_started", "run_finished", "run_finished"]
    assert sorted(p.name for p in crashed.iterdir()) == ["capture.json", "events.ndjson", "run.json"]
    assert not (root / POOL_DIR).exists()


def _capture_inode_of(path: Path) -> os.stat_result:
    return os.stat(path / layout.CAPTURE_FILE)


def test_a_failed_replace_rewrites_the_capture_in_place_through_no_second_name(tmp_path):
    """The terminal capture's rename fails after the pool linked the ``recording`` one (here: the
    temporary became a directory), and so does the atomic retry: the capture is rewritten in place
    (``files.write_terminal_capture``). The pool's link is gone first, so no spare holds those bytes."""

    class TemporaryBecomesADirectory:
        name = "fsync"

        def __init__(self) -> None:
            self.inner = FsyncEach()

        def files(self, plans) -> None:
            self.inner.files(plans)
            for plan in plans:
                if "broken" in str(plan.path.parent):
                    os.unlink(plan.capture_tmp)
                    os.mkdir(plan.capture_tmp)

        def renames(self, plans) -> None:
            self.inner.renames(plans)

    root = tmp_path / "bundles"
    writer = _writer(root, seal_sync=TemporaryBecomesADirectory())
    try:
        _seal(_open(writer))
        broken = _open(writer, "broken")
        recording = _capture_inode(broken)
        _seal(broken)
        assert _capture_inode(broken).st_ino == recording.st_ino, "rewritten in place"
        assert _capture_inode(broken).st_nlink == 1, "no pool entry names it"
        assert orjson.loads((broken.path / layout.CAPTURE_FILE).read_bytes())["status"] == "complete"
        later = [_open(writer) for _ in range(3)]
        for run in later:
            assert orjson.loads((run.path / layout.CAPTURE_FILE).read_bytes()) == RECORDING
            _seal(run)
    finally:
        writer.shutdown()


def test_bundles_on_another_file_system_than_the_root_are_written_as_before(tmp_path):
    """``<root>/sessions`` a mount point (a real tmpfs): no hard link crosses it (``EXDEV``), so the
    pool turns itself off and every capture is created as it was before the pool."""
    root = tmp_path / "bundles"
    (root / "sessions").mkdir(parents=True, mode=0o700)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(root / "sessions")],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        writer = _writer(root)
        try:
            runs = []
            for _ in range(3):
                run = _open(writer)
                runs.append(run)
                _seal(run)
        finally:
            writer.shutdown()
        for run in runs:
            assert read_bundle(run.path).status is BundleStatus.COMPLETE
        assert len({_capture_inode(run).st_ino for run in runs}) == 3
    finally:
        subprocess.run(["umount", "-l", str(root / "sessions")], check=False)
    assert not (root / POOL_DIR).exists()


def test_a_dead_pool_of_a_process_with_this_ones_pid_is_removed_and_the_pool_works(tmp_path):
    """In a container the pid (often 1) comes back after a restart: a pool named by this process's
    pid that this process did not make is a dead one (its lock free), removed like any other — it
    was skipped, and its name then took the new writer's, so the pool was off for good."""
    root = tmp_path / "bundles"
    script = textwrap.dedent(f"""
        import os, sys, uuid
        from otel_session.bundle.write import BundleWriter
        root = {str(root)!r}
        stale = os.path.join(root, {POOL_DIR!r}, f"{{os.getpid()}}.0")
        os.makedirs(stale)
        open(os.path.join(stale, "0"), "w").close()   # a crashed bundle's capture, say
        writer = BundleWriter(root, identifier=lambda value: value)
        inodes = []
        for _ in range(3):
            run = writer.open_run(session_id="s", run_id=f"run-{{uuid.uuid4()}}", service="svc")
            inodes.append(os.stat(os.path.join(run.path, "capture.json")).st_ino)
            run.append("turn_started", {{"state": "greet", "required_slots": []}})
            run.close(run_status="ok")
            assert run.wait_sealed(30)
        print(len(set(inodes[1:])), os.path.exists(os.path.join(stale, "0")))
        writer.shutdown()
    """)
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["1", "False"], "the spares reused, the stale pool gone"


def test_a_replaced_capture_is_a_spare_only_once_its_rename_is_durable(tmp_path):
    """A bundle opened while a seal's renames are not yet synced must not get the inode that seal
    replaced: until then a crash may bring the sealed bundle's old name for it back."""
    taken_during_sync: list[int] = []

    class OpensDuringTheSync:
        name = "fsync"

        def __init__(self) -> None:
            self.inner = FsyncEach()

        def files(self, plans) -> None:
            self.inner.files(plans)

        def renames(self, plans) -> None:
            if not taken_during_sync:
                taken_during_sync.append(_capture_inode(_open(writer, "meanwhile")).st_ino)
            self.inner.renames(plans)

    root = tmp_path / "bundles"
    writer = _writer(root, seal_sync=OpensDuringTheSync())
    try:
        first = _open(writer)
        replaced = _capture_inode(first).st_ino
        _seal(first)
        assert taken_during_sync and taken_during_sync[0] != replaced
        assert _capture_inode(_open(writer, "after")).st_ino == replaced, "a spare once the renames are durable"
    finally:
        writer.shutdown()
