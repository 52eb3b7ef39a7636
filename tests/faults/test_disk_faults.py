"""Disk full, permission denied, I/O error mid-batch and a torn write, through the public API.

Disk full is real: a tmpfs of a few hundred KiB, filled by the app's own journal. Permission
denied is real where the kernel produces it (an unprivileged app whose run directory turns
read-only); an append that fails with EACCES/EIO mid-batch, half written, goes through the writer's
``_write`` seam (the one syscall that appends journal bytes), since no real device here fails on
demand.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import otel_session
from otel_session.core import layout
from otel_session.bundle.read import BundleStatus, DiagnosticCode, read_bundle
from otel_session.testing import capture_bundle

from .conftest import (
    FailingAppends,
    agent_env,
    assert_finished_normally,
    bundle_of,
    bundles,
    complete_lines,
    parse_agent_output,
    run_agent,
    viewer_verdict,
)
from .unprivileged import UnprivilegedApp

pytestmark = pytest.mark.slow


def assert_failed_capture(root: Path, session_id: str, run_id: str, code: str) -> None:
    """Failed with ``code``, at most one torn line, counted on disk; the viewer says failed."""
    bundle = bundle_of(root, run_id)
    assert bundle.status is BundleStatus.FAILED, bundle.diagnostics
    assert bundle.capture["failure"]["code"] == code
    lines, torn = complete_lines(bundle.path / layout.EVENTS_FILE)
    assert bundle.capture["event_count"] == lines == len(bundle.events)
    assert {d.code for d in bundle.diagnostics} <= {DiagnosticCode.TORN_TAIL}
    assert (DiagnosticCode.TORN_TAIL in {d.code for d in bundle.diagnostics}) == (torn > 0)
    assert [event["seq"] for event in bundle.events] == list(range(1, lines + 1))
    # Later events were refused: the run went on in the app, its end never reached the journal.
    assert "run_finished" not in {event["type"] for event in bundle.events}
    assert sorted(p.name for p in bundle.path.iterdir()) == ["capture.json", "events.ndjson", "run.json"]
    entry, integrity = viewer_verdict(root, session_id, run_id)
    assert entry["integrity"] == "failed"
    assert integrity["status"] == "failed" and integrity["capture"]["failure"]["code"] == code


def test_real_disk_full_fails_the_capture_not_the_app(tiny_fs):
    root = tiny_fs(256) / "bundles"
    before = run_agent(root, "--runs", "2", "--session-prefix", "before")
    assert_finished_normally(before, runs=2)
    earlier = {bundle.path: (bundle.path / layout.EVENTS_FILE).read_bytes() for bundle in bundles(root)}
    assert {bundle.status for bundle in bundles(root)} == {BundleStatus.COMPLETE}

    filler = root.parent / "filler"
    free = os.statvfs(root.parent).f_bavail * os.statvfs(root.parent).f_frsize
    filler.write_bytes(b"\0" * (free - 48 * 1024))  # leave 48 KiB: the next run's journal fills it
    full = run_agent(root, "--deltas", "3000", "--delta-bytes", "100", "--session-prefix", "full")
    assert_finished_normally(full, runs=1)
    assert "failed (disk_full)" in full.stderr
    assert_failed_capture(root, "full-0", full.runs[0]["run_id"], "disk_full")
    for path, journal in earlier.items():
        assert (path / layout.EVENTS_FILE).read_bytes() == journal, "other runs are unaffected"
        assert read_bundle(path).status is BundleStatus.COMPLETE

    filler.unlink()  # space again: the next run records completely
    after = run_agent(root, "--session-prefix", "after")
    assert_finished_normally(after, runs=1)
    assert bundle_of(root, after.runs[0]["run_id"]).status is BundleStatus.COMPLETE


def test_disk_full_before_a_run_opens_leaves_no_bundle_and_no_lock(tiny_fs):
    root = tiny_fs(64) / "bundles"
    root.mkdir()
    filler = root.parent / "filler"
    free = os.statvfs(root.parent).f_bavail * os.statvfs(root.parent).f_frsize
    filler.write_bytes(b"\0" * free)
    result = run_agent(root, "--runs", "3")
    assert_finished_normally(result, runs=3)
    assert "recording a run's bundle failed; the app goes on" in result.stderr
    assert bundles(root) == []
    leftovers = [path for path in root.rglob("*") if path.is_file() and path.name != ".redaction-key"]
    assert leftovers == [], "no lock or temporary file outlives a run that could not be opened"


@pytest.mark.parametrize(
    "error,code",
    [(errno.EIO, "io_error"), (errno.EACCES, "permission_denied"), (errno.ENOSPC, "disk_full")],
)
def test_append_error_mid_batch_fails_one_run_and_never_the_app(tmp_path, error, code):
    root = tmp_path / "bundles"
    healthy_done = threading.Event()
    outcomes: dict[str, object] = {}

    def healthy_run() -> None:
        with otel_session.session("healthy"), otel_session.run(agent="booking") as run:
            outcomes["healthy"] = run.run_id
            with otel_session.turn(0, state="greet"):
                with otel_session.message("assistant") as message:
                    for index in range(400):
                        message.delta(f"fine {index} ")
        healthy_done.set()

    with capture_bundle(root) as captured:
        seam = FailingAppends(captured.recorder.writer, error)
        captured.recorder.writer._write = seam
        with otel_session.session("faulty"), otel_session.run(agent="booking") as run:
            seam.target(run.journal_recorder)
            other = threading.Thread(target=healthy_run)
            other.start()
            with otel_session.turn(0, state="greet") as turn:
                with otel_session.tool_execution("lookup", call_id="c1", arguments={"q": 1}) as tool:
                    tool.finish(result={"ok": True})
                with otel_session.message("assistant") as message:
                    for index in range(2000):  # several batches: the first one tears
                        message.delta(f"chunk {index} ")
                captured.recorder.writer.force_flush()
                assert run.journal_recorder.failure is not None
                message_after = otel_session.message("user")
                with message_after as late:
                    late.text("said after the failure")
                turn.finish(state="done")
            faulty_run_id = run.run_id
            other.join(30)
        assert healthy_done.is_set()
    assert seam.calls == 2, "half a batch, then the error; after it the run's writer never appends again"
    assert_failed_capture(root, "faulty", faulty_run_id, code)
    healthy = bundle_of(root, outcomes["healthy"])
    assert healthy.status is BundleStatus.COMPLETE and healthy.diagnostics == []
    deltas = [e["payload"]["delta"] for e in healthy.events if e["type"] == "assistant_delta"]
    assert len(deltas) == 400  # one record per delta (the held-back text is no extra record)
    assert "".join(deltas) == "".join(f"fine {index} " for index in range(400))
    spans = {span.name for span in captured.spans}
    assert {"invoke_agent booking", "turn 0", "execute_tool lookup"} <= spans, "spans flow on"


@pytest.fixture(scope="module")
def nobody_app() -> Iterator[UnprivilegedApp]:
    """The agent app runnable by ``nobody`` whatever the checkout's modes (a world-readable copy)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("running the app as nobody needs root and setpriv (util-linux)")
    directory = Path(tempfile.mkdtemp(prefix="otel-session-nobody-"))
    try:
        yield UnprivilegedApp.build(directory, agent_env())
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def unprivileged_root() -> Path:
    """A bundle root owned by ``nobody`` in a directory ``nobody`` can reach (root bypasses modes)."""
    if os.geteuid() != 0:
        pytest.skip("chown to nobody needs root")
    base = Path(tempfile.mkdtemp(prefix="otel-session-eacces-"))
    base.chmod(0o755)
    root = base / "bundles"
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    yield root
    subprocess.run(["rm", "-rf", str(base)], check=False)


def test_real_permission_denied_at_open_records_nothing_and_the_app_goes_on(nobody_app, unprivileged_root):
    unprivileged_root.chmod(0o500)  # the app's user cannot create sessions/ under it
    os.chown(unprivileged_root, 0, 0)
    completed = subprocess.run(
        nobody_app.command(unprivileged_root, "--runs", "2"),
        capture_output=True, text=True, timeout=300, env=agent_env(),
    )
    result = parse_agent_output(completed.returncode, completed.stdout, completed.stderr)
    assert_finished_normally(result, runs=2)
    assert "Permission denied" in result.stderr
    assert bundles(unprivileged_root) == []


def test_real_permission_denied_at_seal_still_writes_the_terminal_capture(nobody_app, unprivileged_root):
    """The run directory turns read-only mid-run (EACCES for the capture's temporary file)."""
    process = subprocess.Popen(
        nobody_app.command(unprivileged_root, "--exit", "hang", "--handle-sigterm"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=agent_env(),
    )
    try:
        assert process.stdout.readline().strip() == "ready"
        (run_dir,) = [path.parent for path in unprivileged_root.rglob(layout.RUN_FILE)]
        run_dir.chmod(0o500)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGTERM, stderr
    assert "rewriting it in place" in stderr
    bundle = read_bundle(run_dir)
    assert bundle.status is BundleStatus.COMPLETE, bundle.diagnostics
    assert bundle.events[-1]["type"] == "run_finished"
    assert bundle.events[-1]["payload"] == {"status": "interrupted"}
    assert stat.S_IMODE((run_dir / layout.CAPTURE_FILE).stat().st_mode) == 0o600

