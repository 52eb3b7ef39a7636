"""What a bundle's open and seal share between runs, and what they no longer wait for (issue 21)."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid

import orjson
import pytest

from otel_session.core import layout
from otel_session.bundle.files import json_document
from otel_session.core.journal import RUN_SCHEMA
from otel_session.bundle.read import BundleStatus, read_bundle
from otel_session.bundle.write import BundleWriter


def _run_id() -> str:
    return f"run-{uuid.uuid4()}"


def test_a_seal_does_not_wait_for_an_open_in_progress(writer):
    """An open holds the writer's open lock across its system calls (slow on a busy disk); the
    writer thread's seals must not queue behind it, or every bundle paid a thread switch."""
    first = writer.open_run(session_id="s", run_id=_run_id())
    second = writer.open_run(session_id="s", run_id=_run_id())
    with writer._open_lock:  # another thread's open_run, in the middle of its mkdir and renames
        first.close(run_status="ok")
        assert first.wait_sealed(10)
        second.close(run_status="ok")
        assert second.wait_sealed(10)
    assert writer.open_runs == []
    assert read_bundle(second.path).status is BundleStatus.COMPLETE


def test_wait_sealed_from_another_thread_before_and_after_the_seal(writer):
    run = writer.open_run(session_id="s", run_id=_run_id())
    assert not run.wait_sealed(0.01)  # waits on an event made for it
    run.close(run_status="ok")
    assert run.wait_sealed(10) and run.sealed
    assert run.wait_sealed(0)


def test_runs_sharing_a_session_keep_each_its_own_manifest(writer, root):
    """The checks and fields a session's runs share are made once; each run.json stays what the
    arguments of its own open say, byte for byte, in the same field order."""
    opens = [
        {"session_id": "s", "agent": "a", "service": "svc"},
        {"session_id": "s", "agent": "b", "service": "svc", "recorded_by": "otel-session collector"},
        {"session_id": "s", "service": "other", "session_derived": True},
        {"session_id": "s", "kind": "eval", "eval_id": "e1", "agent": "a", "service": "svc"},
        {"session_id": "s", "agent": "a", "service": "svc"},
    ]
    for arguments in opens:
        run_id = _run_id()
        run = writer.open_run(run_id=run_id, created_at_ns=1_796_000_000_123_456_000, **arguments)
        kind = arguments.get("kind", "live")
        expected = {"schema": RUN_SCHEMA, "session_id": "s", "run_id": run_id, "kind": kind,
                    "created_at": "2026-11-30T00:53:20.123456Z", "service": arguments["service"]}
        optional = {"eval_id": arguments.get("eval_id"), "agent": arguments.get("agent"),
                    "recorded_by": arguments.get("recorded_by"), "session_derived": arguments.get("session_derived")}
        expected.update((key, value) for key, value in optional.items() if value)
        assert (run.path / layout.RUN_FILE).read_bytes() == json_document(expected)
        assert orjson.loads((run.path / layout.RUN_FILE).read_bytes()) == run.manifest
        run.close(run_status="ok")
    assert writer.force_flush()


def test_session_derived_is_stored_as_a_boolean_whichever_true_value_opened_the_first_run(writer):
    """Opens whose arguments compare equal share what they store: ``1`` and ``True`` alike are ``true``."""
    for value in (1, True):
        run = writer.open_run(session_id="s", run_id=_run_id(), session_derived=value)
        assert orjson.loads((run.path / layout.RUN_FILE).read_bytes())["session_derived"] is True
        run.close(run_status="ok")
    assert writer.force_flush()


def test_an_agent_named_while_the_run_records_reads_as_if_opened_with_it_and_never_after_its_close(writer):
    run_id = _run_id()
    run = writer.open_run(session_id="s", run_id=run_id, service="svc", created_at_ns=1_796_000_000_123_456_000,
                          recorded_by="otel-session collector")
    assert writer.name_agent(run, "booking")
    opened_with_it = writer.open_run(session_id="s", run_id=_run_id(), service="svc", agent="booking",
                                     created_at_ns=1_796_000_000_123_456_000, recorded_by="otel-session collector")
    expected = {**opened_with_it.manifest, "run_id": run_id}
    assert (run.path / layout.RUN_FILE).read_bytes() == json_document(expected) and run.manifest == expected
    with pytest.raises(ValueError, match="not valid Unicode"):
        writer.name_agent(run, "bad\udc80")
    run.close(run_status="ok")
    assert not writer.name_agent(run, "other")  # closing: a bundle's files stay as they are from here on
    assert writer.force_flush()
    assert orjson.loads((run.path / layout.RUN_FILE).read_bytes())["agent"] == "booking"
    assert sorted(path.name for path in run.path.iterdir()) == [layout.CAPTURE_FILE, layout.EVENTS_FILE, layout.RUN_FILE]
    opened_with_it.close(run_status="ok")


def test_a_manifest_written_aside_by_a_writer_killed_before_its_rename_is_removed_when_the_run_continues(tmp_path):
    root = tmp_path / "bundles"
    run_id = _run_id()
    script = (f"import os, signal\nfrom otel_session.bundle.write import BundleWriter\n"
              f"run = BundleWriter({str(root)!r}).open_run(session_id='s', run_id={run_id!r})\n"
              f"os.kill(os.getpid(), signal.SIGKILL)\n")
    assert subprocess.run([sys.executable, "-c", script], timeout=300).returncode == -signal.SIGKILL
    path = layout.run_path(root, "s", run_id)
    (path / f".{layout.RUN_FILE}.4242.1.tmp").write_bytes(b'{"schema": "half')  # the replacement, never renamed
    writer = BundleWriter(root)
    try:
        writer.open_run(session_id="s", run_id=run_id).close(run_status="ok")
        assert writer.force_flush()
    finally:
        writer.shutdown()
    assert sorted(p.name for p in path.iterdir()) == [layout.CAPTURE_FILE, layout.EVENTS_FILE, layout.RUN_FILE]
    assert read_bundle(path).status is BundleStatus.COMPLETE


def test_bad_ids_are_refused_at_every_open_not_only_the_first(writer):
    for _ in range(2):
        with pytest.raises(ValueError, match="not valid Unicode"):
            writer.open_run(session_id="s", run_id=_run_id(), agent="bad\udc80")
        with pytest.raises(ValueError, match="eval_id"):
            writer.open_run(session_id="s", run_id=_run_id(), kind="eval")
        with pytest.raises(layout.UnsafePathError):
            writer.open_run(session_id="s", run_id="run-not-a-uuid")
    assert writer.open_runs == []


def test_the_environments_service_name_is_read_at_every_open(writer, monkeypatch):
    """The shared fields are remembered by the service an open resolves to, not by the argument."""
    services = []
    for name in ("svc-a", "svc-b"):
        monkeypatch.setenv("OTEL_SERVICE_NAME", name)
        run = writer.open_run(session_id="s", run_id=_run_id())
        services.append(orjson.loads((run.path / layout.RUN_FILE).read_bytes())["service"])
        run.close(run_status="ok")
    assert services == ["svc-a", "svc-b"]
    assert writer.force_flush()
